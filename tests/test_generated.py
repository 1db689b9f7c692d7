"""Issue 44 item 1: the run specs (`fabricsim.api.specs`) are the one declaration of the options of `train`,
`whatif` and `topo`. The API functions (`fabricsim/api/calls.py`), the typer declarations
(`fabricsim/cli/spec_options.py`) and docs/reference/options.md are generated from them and must be current; the
API's keyword arguments, the CLI's options and the reference page say what the fields say; and adding an option is
one field (the worked example below)."""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

import pytest
import typer.main

from fabricsim import api
from fabricsim.api.specs import RUNS, ApiFunction, OptionGroup, PlanOptions, field_cli, opt
from fabricsim.api.specs.generate import api_source, cli_source, constant_name, docs_source, main, stale
from fabricsim.cli import app

COMMANDS = {"train": "train", "whatif": "whatif", "topology": "topo", "collective": "collective", "infer": "infer",
            "size": "size", "sweep": "sweep"}


def _command(name: str) -> Any:
    return typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]


def test_generated_files_are_current() -> None:
    assert stale() == [], "run `make generate` (python -m fabricsim.api.specs.generate)"
    assert main(["--check"]) == 0


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.__name__)
def test_api_function_is_the_spec(run: type[OptionGroup]) -> None:
    """The API function takes the spec's fields, in order, with their defaults, and documents each."""
    func = getattr(api, run.api.name)  # type: ignore[attr-defined]
    params = inspect.signature(func).parameters
    extra = [name for name, _, _ in run.api.extra]  # type: ignore[attr-defined]
    assert list(params) == [*run.model_fields, *extra]
    for name, field in run.model_fields.items():
        assert params[name].default == field.default, name
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert f"{name}: " in (func.__doc__ or ""), name


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.__name__)
def test_cli_options_are_the_spec(run: type[OptionGroup]) -> None:
    """Every field is an option of its command with the field's flag, help and default (the CLI echoes
    ``calibration`` as a list, as before)."""
    command = _command(COMMANDS[run.api.name])  # type: ignore[attr-defined]
    options = {p.name: p for p in command.params}
    for name, field in run.model_fields.items():
        param = options[name]
        assert param.opts[0] == field_cli(name, field).split("/")[0], name
        assert param.help == field.description, name
        if name != "calibration":
            assert param.default == field.default, name


def test_reference_page_lists_every_option() -> None:
    page = docs_source()
    for run in RUNS:
        for name, field in run.model_fields.items():
            assert f"| `{name}` |" in page and (field.description or "").replace("|", "\\|") in page, name


def test_api_refuses_an_unknown_keyword_as_python_does() -> None:
    with pytest.raises(TypeError, match="tpp"):
        api.train(tpp=8)  # type: ignore[call-arg]


def test_adding_an_option_is_one_field() -> None:
    """The worked example: one field on a plan group gives the option on the CLI, a keyword of the API function
    with its default and docstring line, and a row of the reference page."""

    class WithRamp(PlanOptions):
        """The plan options with one more."""

        warmup_steps: int = opt(0, "steps of learning-rate warm-up to leave out of the step time", unit="steps")

    class RampRun(WithRamp):
        """A run with the new option."""

        api: ClassVar[ApiFunction] = ApiFunction("ramp", "fabricsim.api.train:run_train",
                                                 "fabricsim.api.train:TrainResult", None, "A run.")

    cli = cli_source([WithRamp])
    assert f"{constant_name(WithRamp)}: dict[str, Decl]" in cli
    assert "'warmup_steps': (Annotated[int, typer.Option('--warmup-steps', help='steps of learning-rate" in cli
    source = api_source([RampRun])
    assert "    warmup_steps: int = 0," in source
    assert "warmup_steps: steps of learning-rate warm-up to leave out of the step time [steps] (--warmup-steps)" \
        in source
    namespace: dict[str, Any] = {}
    exec(compile(source, "<generated>", "exec"), namespace)  # the generated module runs
    assert inspect.signature(namespace["ramp"]).parameters["warmup_steps"].default == 0
    assert "| `--warmup-steps` | `warmup_steps` | `int` | `0` |" in docs_source([WithRamp], [RampRun])


def test_a_flag_pair_for_every_bool() -> None:
    """Booleans (also optional ones, such as --sequence-parallel) are --x/--no-x pairs."""
    cli = cli_source()
    assert "'--sequence-parallel/--no-sequence-parallel'" in cli and "'--goodput/--no-goodput'" in cli


@pytest.mark.parametrize(("kwargs", "cli", "api_field"), [
    ({"tp": 8.5}, "--tp", "train(tp=...)"),
    ({"fabric_kind": "torus"}, "--fabric", "train(fabric_kind=...)"),
    ({"vpp": 0}, "vpp", "train(vpp=...)"),
])
def test_api_errors_name_the_option_and_the_keyword(kwargs: dict[str, Any], cli: str, api_field: str) -> None:
    """An API error keeps the CLI's one line (naming the option) and names the API keyword too (issue 44 item 2)."""
    from fabricsim.errors import SpecError

    with pytest.raises(SpecError) as caught:
        api.train(model="llama3-8b", gpus=16, **kwargs)
    assert str(caught.value).startswith(f"{cli}: ")
    assert caught.value.api_field == api_field
    assert f"in the API: {api_field}" in caught.value.__notes__
