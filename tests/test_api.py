"""The Python API (issue 28): one function per command whose result's ``to_dict()`` is the command's ``--json``
document for the same inputs, whose defaults are the CLI's, with frames, reprs and the README's Python examples."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import fabricsim
from fabricsim import api
from fabricsim.cli import app
from fabricsim.cli.collective_cmd import collective_command
from fabricsim.cli.infer_cmd import infer_command
from fabricsim.cli.size_cmd import size_command
from fabricsim.cli.topo_cmd import topo_command
from fabricsim.cli.train_cmd import train_command
from fabricsim.cli.whatif_cmd import whatif_command

README = Path(__file__).resolve().parents[1] / "README.md"
PRESENTATION = {"fmt", "as_json", "plot", "report"}  # how the CLI prints, not what it computes
PAIRS = [(api.train, train_command), (api.whatif, whatif_command), (api.infer, infer_command),
         (api.size, size_command), (api.collective, collective_command), (api.topology, topo_command)]

# One small case per command: the API's keyword arguments and the same options on the command line.
CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("train", {"model": "llama3-70b", "gpus": 64, "tp": 8, "pp": 2, "gbs": 64},
     ["--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "2", "--gbs", "64"]),
    ("whatif", {"model": "llama3-8b", "gpus": 16, "tp": 2, "gbs": 32, "swap": ["ib=xdr"]},
     ["--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--gbs", "32", "--swap", "ib=xdr"]),
    ("infer", {"model": "llama3-70b", "gpus": 8, "tp": 8, "batch": 8, "rate": 2.0, "duration": "20s"},
     ["--model", "llama3-70b", "--gpus", "8", "--tp", "8", "--batch", "8", "--rate", "2", "--duration", "20s"]),
    ("size", {"model": "llama3-8b", "tokens": "100B", "gpus": "64", "systems": "dgx-h100", "fabrics": "ndr",
              "executor": "serial", "tp": "1,2", "pp": "1"},
     ["--model", "llama3-8b", "--tokens", "100B", "--gpus", "64", "--systems", "dgx-h100", "--fabrics", "ndr",
      "--executor", "serial", "--tp", "1,2", "--pp", "1"]),
    ("collective", {"nodes": 2, "op": "all_gather", "min_size": "1M", "max_size": "16M"},
     ["--nodes", "2", "--op", "all_gather", "--min", "1M", "--max", "16M"]),
    ("topology", {"nodes": 8, "ib": "xdr"}, ["--nodes", "8", "--ib", "xdr"]),
]
COMMAND = {"topology": "topo"}
VOLATILE = {"wall_s", "plans_per_s"}  # how long the search took, not what it found


def _cli_default(value: Any) -> Any:
    """A typer parameter's default, whether given as ``= value`` or as ``typer.Option(value, ...)``."""
    return getattr(value, "default", value)


@pytest.mark.parametrize(("func", "command"), PAIRS, ids=[f.__name__ for f, _ in PAIRS])
def test_the_api_takes_every_option_with_the_cli_default(func: Any, command: Any) -> None:
    cli = {k: _cli_default(p.default) for k, p in inspect.signature(command).parameters.items()}
    ours = {k: p.default for k, p in inspect.signature(func).parameters.items() if k != "progress"}
    assert set(cli) - PRESENTATION == set(ours), "the API and the CLI take different options"
    for name, default in ours.items():
        expected = cli[name]
        if isinstance(expected, list) and not expected:  # `--calibration` repeated: [] on the CLI, () in Python
            expected = ()
        assert default == expected, f"{func.__name__}({name}=...) defaults to {default!r}, the CLI to {expected!r}"


def _strip(doc: Any) -> Any:
    """A document without the figures that vary run to run (search wall time)."""
    if isinstance(doc, dict):
        return {k: _strip(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


@pytest.mark.parametrize(("name", "kwargs", "argv"), CASES, ids=[c[0] for c in CASES])
def test_the_api_and_the_cli_give_the_same_answer(name: str, kwargs: dict[str, Any], argv: list[str]) -> None:
    result = getattr(fabricsim, name)(**kwargs)
    run = CliRunner().invoke(app, [COMMAND.get(name, name), *argv, "--json"])
    assert run.exit_code == 0, run.output
    cli = json.loads(run.stdout)
    ours = result.to_dict()
    assert _strip({k: v for k, v in ours.items() if k != "inputs"}) == \
        _strip({k: v for k, v in cli.items() if k != "inputs"})
    given = {k: v for k, v in ours["inputs"].items() if k in cli["inputs"]}
    assert given == {k: v for k, v in cli["inputs"].items() if k in given}, "the inputs echo differs"
    frame = result.to_frame()
    assert len(frame) == len(result.rows if result.rows is not None else [1]) > 0
    assert repr(result).startswith(type(result).__name__ + "(")
    assert "<table>" in result._repr_html_()
    from rich.console import Console

    console = Console(record=True, width=120)
    console.print(result)
    assert f"fabricsim {result.command}" in console.export_text()


def test_typed_results_answer_the_question() -> None:
    r = fabricsim.train(model="llama3-70b", gpus=64, tp=8, pp=2, gbs=64)
    assert isinstance(r, fabricsim.TrainResult)
    assert r.step_time_s == r.to_dict()["step_time_s"] > 0
    assert r.bottleneck == r.to_dict()["bottleneck"]
    assert 0 < r.mfu < 1 and r.plan.dp == 4
    assert set(r.to_frame().columns) == {"layer", "exposed_s", "overlapped_s"}
    assert f"step_time_s={r.step_time_s:.4g}" in repr(r)


@pytest.mark.parametrize(("name", "kwargs", "argv"), [
    ("train", {"gpus": 60, "tp": 8}, ["--gpus", "60", "--tp", "8"]),
    ("size", {"model": "llama3-8b", "objective": "speed"}, ["--model", "llama3-8b", "--objective", "speed"]),
    ("infer", {"engine": "nope"}, ["--engine", "nope"]),
    ("collective", {"min_size": "1Q"}, ["--min", "1Q"]),
], ids=["train", "size", "infer", "collective"])
def test_bad_input_is_the_cli_s_one_line_error(name: str, kwargs: dict[str, Any], argv: list[str]) -> None:
    with pytest.raises(fabricsim.SpecError) as caught:
        getattr(fabricsim, name)(**kwargs)
    run = CliRunner().invoke(app, [COMMAND.get(name, name), *argv])
    assert run.exit_code == 2
    assert run.stderr.strip() == f"error: {caught.value}"


def test_import_fabricsim_stays_light() -> None:
    """The API loads on first use: a bare import pulls neither it nor numpy."""
    code = "import sys, fabricsim; print('fabricsim.api' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    assert "train" in dir(fabricsim)
    with pytest.raises(AttributeError):
        fabricsim.no_such_command  # noqa: B018


def python_blocks() -> list[str]:
    """The README's ```python blocks."""
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_python_examples() -> None:
    assert len(python_blocks()) >= 1


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_the_readme_python_examples_run(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(python_blocks()[index], f"README.md python block {index}", "exec"), {"__name__": "__readme__"})


def test_the_api_docstring_examples_run() -> None:
    import doctest

    failures, tried = doctest.testmod(api, verbose=False)
    assert tried >= 2 and failures == 0


def test_make_docs_builds_the_api_reference(tmp_path: Path) -> None:
    """`make docs`: mkdocs with mkdocstrings, strict (a broken reference fails), every API function documented."""
    root = README.parent
    mkdocs = Path(sys.executable).with_name("mkdocs")
    subprocess.run([str(mkdocs), "build", "--strict", "--quiet", "-d", str(tmp_path / "site")], cwd=root, check=True,
                   timeout=120)
    page = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("train", "whatif", "infer", "size", "collective", "topology"):
        assert f"fabricsim.api.{name}" in page


def test_a_hugging_face_config_says_what_it_ignored() -> None:
    """An imported config's unmodelled fields: in the JSON ("model_import") and one stderr line of the CLI."""
    config = Path(api.__file__).parents[1] / "model" / "data" / "hf" / "gemma-2-9b.json"
    result = fabricsim.train(model=str(config), gpus=8, tp=8, gbs=8)
    imported = result.to_dict()["model_import"]
    assert imported["architecture"] == "Gemma2ForCausalLM"
    assert any(i.startswith("sliding_window=4096") for i in imported["ignored"])
    run = CliRunner().invoke(app, ["train", "--model", str(config), "--gpus", "8", "--tp", "8", "--gbs", "8"])
    assert run.exit_code == 0, run.output
    notes = [line for line in run.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "sliding_window=4096 (attention priced as full)" in notes[0]
    assert "model_import" not in fabricsim.train(model="llama3-70b", gpus=8, tp=8, gbs=8).to_dict()


def test_a_result_s_report_is_the_cli_s(tmp_path: Path) -> None:
    """The API's report and the CLI's are the same page for the same answer (the CLI's inputs echo also names its
    presentation options, plot and report)."""
    from fabricsim.report import render_report

    result = fabricsim.train(model="llama3-70b", gpus=64, tp=8, pp=2, gbs=64)
    ours = result.report(tmp_path / "api.html")
    assert ours.read_text(encoding="utf-8") == render_report("train", result.to_dict())
    run = CliRunner().invoke(app, ["train", "--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "2",
                                   "--gbs", "64", "--json", "--report", str(tmp_path / "cli.html")])
    assert run.exit_code == 0, run.output
    cli_inputs = json.loads(run.stdout)["inputs"]
    assert (tmp_path / "cli.html").read_text(encoding="utf-8") == \
        render_report("train", {**result.to_dict(), "inputs": cli_inputs})
