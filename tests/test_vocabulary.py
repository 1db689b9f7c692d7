"""One vocabulary across commands (issue 44, item 5): a generated test.

The cases are generated, not listed: the options come from the typer app (every option two or more commands
declare), the values from the resolvers' own tables (the catalog's network and system ids, the packaged engine
profiles and their releases, the plan's precisions). Each (command, option, value) runs the command on a small
fast base invocation and must exit 0; every spelling of one name (``ndr``, ``NDR``, ``ib-ndr``) must give the
same document as the catalog id it spells, apart from the echo of what was typed. The API takes the same values
through its keyword arguments, and a bad name is refused by the CLI and the API alike, naming the option typed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any, get_args

import pytest
import typer
from typer.testing import CliRunner

from fabricsim.catalog import default_catalog, network_names
from fabricsim.cli import app
from fabricsim.errors import SpecError

# ---- the app's options ---------------------------------------------------------------------------------------


def _walk(cmd: Any, path: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _walk(sub, (*path, name))
    else:
        yield " ".join(path), cmd


@cache
def commands() -> dict[str, Any]:
    """Every leaf command of `fabricsim` by its path ('train', 'bench collective')."""
    return dict(_walk(typer.main.get_command(app), ()))


@cache
def declared() -> dict[str, dict[str, Any]]:
    """option name -> {command path -> its click option}."""
    out: dict[str, dict[str, Any]] = {}
    for path, cmd in commands().items():
        for param in cmd.params:
            if param.param_type_name == "option":
                for name in param.opts:
                    out.setdefault(name, {})[path] = param
    return out


def shared_options() -> dict[str, dict[str, Any]]:
    return {name: cmds for name, cmds in declared().items() if len(cmds) >= 2}


# ---- the accepted values, from the resolvers' tables ----------------------------------------------------------


@cache
def network_spellings() -> dict[str, str]:
    """spelling -> the catalog id it names: each scale-out link and switch id, an InfiniBand generation bare and
    in capitals (ndr, NDR for ib-ndr), an Ethernet rate bare (400g for eth-400g)."""
    out: dict[str, str] = {}
    for key in network_names(default_catalog()):
        out[key] = key
        out[key.upper()] = key
        if key.startswith("ib-"):
            out[key.removeprefix("ib-")] = key
            out[key.removeprefix("ib-").upper()] = key
        if key.startswith("eth-"):
            out[key.removeprefix("eth-")] = key
    return out


def _has_switch(key: str) -> bool:
    """Whether a catalog switch runs this network (a link no switch runs cannot build a fabric: refused by design,
    'no catalog switch runs ...')."""
    catalog = default_catalog()
    return key in catalog.switches or any(s.link == key for s in catalog.switches.values())


@cache
def system_samples() -> dict[str, str]:
    """One system of each kind of id: a plain id, the same in capitals, ``id/N`` (part of each node used) and
    ``id@D`` (racks joined into one NVLink domain), each from the catalog; value -> its canonical spelling."""
    catalog = default_catalog()
    plain = next(k for k, s in catalog.systems.items() if s.gpus_per_node == 8)
    out = {plain: plain, plain.upper(): plain, f"{plain}/4": f"{plain}/4"}
    joinable = next(k for k, s in catalog.systems.items() if catalog.why_not_joinable(s) is None)
    domain = 2 * catalog.system(joinable).gpus_per_node
    out[f"{joinable}@{domain}"] = f"{joinable}@{domain}"
    return out


@cache
def engine_samples() -> dict[str, str]:
    """Each packaged engine bare, in capitals and at each profiled release; value -> its canonical spelling."""
    from fabricsim.inference import serving_engines as engines

    out: dict[str, str] = {}
    for engine in engines().values():
        out[engine.id] = f"{engine.id}@{engine.default_version}"
        out[engine.id.upper()] = f"{engine.id}@{engine.default_version}"
        for version in engine.versions:
            out[f"{engine.id}@{version.since}"] = f"{engine.id}@{version.since}"
    return out


def precision_values() -> list[str]:
    from fabricsim.training import ParallelPlan

    return list(get_args(ParallelPlan.model_fields["precision"].annotation))


# ---- base invocations ----------------------------------------------------------------------------------------

TRAIN = ["--model", "llama3-8b", "--gpus", "16", "--tp", "8", "--gbs", "16", "--seq", "2048"]
SIZE = ["size", "--model", "llama3-8b", "--tokens", "1B", "--deadline", "30d", "--executor", "serial",
        "--gpus", "8", "--tp", "8", "--pp", "1", "--gbs", "8", "--seq", "2048", "--fabric-kinds", "fat-tree",
        "--oversubscription", "1", "--mbs", "1", "--recompute", "none", "--zero", "0", "--spares", "0"]
SIZE_INFERENCE = ["size", "--inference", "--model", "llama3-8b", "--rate", "1", "--slo-ttft", "2s", "--slo-tpot",
                  "50ms", "--duration", "60s", "--max-gpus", "8"]
BASE: dict[str, list[str]] = {
    "train": ["train", *TRAIN, "--no-goodput"],
    "whatif": ["whatif", *TRAIN],
    "collective": ["collective", "--nodes", "2", "--min", "1M", "--max", "1M"],
    "topo": ["topo", "--nodes", "4"],
    "traffic": ["traffic", "--nodes", "4", "--bytes", "1M"],
    "infer": ["infer", "--model", "llama3-8b", "--gpus", "16", "--tp", "8", "--pp", "2", "--batch", "1",
              "--prompt", "128", "--output", "8"],
    "size": SIZE,
}
"""A small fast valid run of each command that runs a model; the other commands read files (calibrate, compare,
trace) or list the catalog, and are checked for the option's declaration only."""

# (command, option) -> the option the command takes the same names under, and its base run.
SPELLED_AS = {("size", "--ib"): "--fabrics", ("size", "--system"): "--systems"}
BASE_FOR = {("size", "--engine"): SIZE_INFERENCE}

# The name kinds and where their values come from. Each option here is declared by two or more commands.
NAME_OPTIONS: dict[str, Callable[[], dict[str, str]]] = {
    "--ib": lambda: {k: v for k, v in network_spellings().items() if _has_switch(v)},
    "--system": system_samples,
    "--engine": engine_samples,
    "--precision": lambda: {p: p for p in precision_values()},
}


def _runner() -> CliRunner:
    return CliRunner()


def _strip(doc: Any) -> Any:
    """A JSON document without what echoes the input or the clock (``inputs``, ``wall_s``)."""
    if isinstance(doc, dict):
        return {k: _strip(v) for k, v in doc.items() if k != "inputs" and not k.endswith("wall_s")}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


def _echoed(doc: Any, typed: str, canonical: str) -> Any:
    """``doc`` with each echo of what was typed (a value equal to it) read as the canonical spelling."""
    if isinstance(doc, dict):
        return {k: _echoed(v, typed, canonical) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_echoed(v, typed, canonical) for v in doc]
    return canonical if doc == typed else doc


@cache
def run_json(argv: tuple[str, ...]) -> Any:
    result = _runner().invoke(app, [*argv, "--json"])
    assert result.exit_code == 0, f"fabricsim {' '.join(argv)}: exit {result.exit_code}: {result.output[-600:]}"
    return _strip(json.loads(result.output))


def _cases() -> Iterator[Any]:
    for option, values in NAME_OPTIONS.items():
        for command in BASE:
            typed = SPELLED_AS.get((command, option), option)
            if command not in declared().get(typed, {}):
                continue
            for value in values():
                yield pytest.param(command, typed, option, value, id=f"{command}{typed}={value}")


def test_name_options_are_shared() -> None:
    """The name kinds checked here are the shared options that take names: each declared by two or more
    commands, so a name means one thing everywhere."""
    shared = shared_options()
    for option in NAME_OPTIONS:
        assert option in shared, f"{option} is declared by fewer than two commands: {declared().get(option)}"


@pytest.mark.parametrize(("command", "typed", "kind", "value"), list(_cases()))
def test_every_spelling_runs_and_means_the_same(command: str, typed: str, kind: str, value: str) -> None:
    base = BASE_FOR.get((command, kind), BASE[command])
    doc = run_json((*base, typed, value))
    canonical = NAME_OPTIONS[kind]()[value]
    if canonical != value:
        want = run_json((*base, typed, canonical))
        assert want in (doc, _echoed(doc, value, canonical)), f"{command} {typed} {value} differs from {canonical}"


def test_must_hold_network_spellings_are_generated() -> None:
    """The issue's must-hold spellings are among the generated cases, on every command that runs a model."""
    spellings = NAME_OPTIONS["--ib"]()
    for name in ("hdr", "ndr", "xdr", "gdr", "400g", "800g", "ib-ndr", "eth-400g", "eth-800g"):
        assert name in spellings
    covered = {(c, k) for c, _, k, _ in (p.values for p in _cases())}
    for command in ("train", "whatif", "size", "collective", "topo", "traffic", "infer"):
        assert (command, "--ib") in covered


@pytest.mark.parametrize("command", sorted(BASE))
def test_bad_names_are_refused_naming_the_option_typed(command: str) -> None:
    """A name no resolver knows: exit 2 and a one-line error naming the option the user typed."""
    for kind in ("--ib", "--system", "--engine"):
        typed = SPELLED_AS.get((command, kind), kind)
        if command not in declared().get(typed, {}):
            continue
        base = BASE_FOR.get((command, kind), BASE[command])
        result = _runner().invoke(app, [*base, typed, "no-such-name"])
        assert result.exit_code == 2, result.output
        assert f"{typed}: " in result.output, f"{command} {typed}: {result.output.strip()}"


# ---- help text -----------------------------------------------------------------------------------------------

HELP_MAY_DIFFER = {
    "--gpus": "GPUs of one job (train, infer) against those of the world (collective, traffic)",
    "--nodes": "node count of the cluster built (topo) against the nodes a collective spans",
    "--model": "a preset or file (train, infer) with different defaults by what the command asks",
    "--dp": "data parallelism of a training plan against attention data parallelism within a serving group (infer)",
    "--sim": "what the flow simulation runs differs: one collective's schedule against every group of a step",
    "--jobs": "the same jobs YAML: the job itself (traffic) against other jobs placed after the training job (train)",
    "--plot": "each command plots its own figure",
    "--format": "collective also prints nccl-tests' own layout, which only a collective sweep has",
    "--seed": "the seed of what each command draws",
    "--checkpoint": "a Hugging Face checkpoint (infer) against the checkpoint a job writes (traffic)",
}
"""Shared options whose help differs by command, with why; every other one has one help text."""

DIVERGENT_TODAY: dict[str, str] = {}
"""Shared options whose help differs today without a reason: for the declarations shared once (issue 44, item 1);
marked xfail(strict), so the test says when one is fixed and its entry must go."""

RUN_COMMANDS = tuple(c for c in BASE if c != "size")
"""The help is compared among the commands that run one model or cluster: `size` searches lists of the same
values ("ZeRO stages to try"), and the commands that read measurements (calibrate, compare, trace) say what the
option meant for the run that was measured."""


def _help_cases() -> Iterator[Any]:
    for option, cmds in sorted(shared_options().items()):
        if option in HELP_MAY_DIFFER or sum(c in cmds for c in RUN_COMMANDS) < 2:
            continue
        marks = [pytest.mark.xfail(strict=True, reason=DIVERGENT_TODAY[option])] if option in DIVERGENT_TODAY else []
        yield pytest.param(option, marks=marks, id=option)


@pytest.mark.parametrize("option", list(_help_cases()))
def test_shared_option_has_one_help_text(option: str) -> None:
    helps = {path: (param.help or "") for path, param in shared_options()[option].items() if path in RUN_COMMANDS}
    assert len(set(helps.values())) == 1, f"{option} has {len(set(helps.values()))} help texts: {helps}"


def test_help_exceptions_are_current() -> None:
    """Each listed exception is a shared option of the commands compared (a stale entry is removed)."""
    for option in (*HELP_MAY_DIFFER, *DIVERGENT_TODAY):
        assert sum(c in shared_options().get(option, {}) for c in RUN_COMMANDS) >= 2, option


# ---- the API, with the same values ---------------------------------------------------------------------------

API_CALLS: dict[str, tuple[Callable[..., Any], dict[str, str]]] = {}
"""function name -> (a small run, keyword of each name kind); filled lazily: the API is imported on first use."""


def _api() -> dict[str, tuple[Callable[..., Any], dict[str, str]]]:
    if API_CALLS:
        return API_CALLS
    import fabricsim

    tr: dict[str, Any] = {"model": "llama3-8b", "gpus": 16, "tp": 8, "gbs": 16, "seq": 2048}
    sz: dict[str, Any] = {"model": "llama3-8b", "tokens": "1B", "deadline": "30d", "executor": "serial", "gpus": "8",
                          "tp": "8", "pp": "1", "gbs": "8", "seq": 2048, "fabric_kinds": "fat-tree",
                          "oversubscription": "1", "mbs": "1", "recompute": "none", "zero": "0", "spares": "0"}
    inf: dict[str, Any] = {"model": "llama3-8b", "gpus": 16, "tp": 8, "pp": 2, "batch": 1, "prompt": 128,
                           "output": 8}
    API_CALLS.update({
        "train": (lambda **k: fabricsim.train(**tr, goodput=False, **k),
                  {"--ib": "ib", "--system": "system", "--precision": "precision"}),
        "whatif": (lambda **k: fabricsim.whatif(**tr, **k),
                   {"--ib": "ib", "--system": "system", "--precision": "precision"}),
        "collective": (lambda **k: fabricsim.collective(nodes=2, min_size="1M", max_size="1M", **k),
                       {"--ib": "ib", "--system": "system"}),
        "topology": (lambda **k: fabricsim.topology(nodes=4, **k), {"--ib": "ib", "--system": "system"}),
        "infer": (lambda **k: fabricsim.infer(**inf, **k), {"--ib": "fabric", "--system": "system",
                                                            "--engine": "engine"}),
        "size": (lambda **k: fabricsim.size(**sz, **k),
                 {"--ib": "fabrics", "--system": "systems", "--precision": "precision"}),
    })
    return API_CALLS


def _api_cases() -> Iterator[Any]:
    kinds = {"train": ("--ib", "--system", "--precision"), "whatif": ("--ib", "--system"),
             "collective": ("--ib", "--system"), "topology": ("--ib", "--system"),
             "infer": ("--ib", "--system", "--engine"), "size": ("--ib", "--system", "--precision")}
    for function, names in kinds.items():
        for kind in names:
            values = NAME_OPTIONS[kind]()
            # every network spelling; of the other kinds, the ones spelled differently from their canonical id
            sample = values if kind == "--ib" else {v: c for v, c in values.items() if v != c} or values
            for value in sample:
                yield pytest.param(function, kind, value, id=f"{function}:{kind}={value}")


@pytest.mark.parametrize(("function", "kind", "value"), list(_api_cases()))
def test_api_takes_the_same_values(function: str, kind: str, value: str) -> None:
    call, keywords = _api()[function]
    keyword = keywords[kind]
    canonical = NAME_OPTIONS[kind]()[value]
    got = _strip(call(**{keyword: value}).to_dict())
    if canonical != value:
        want = _strip(call(**{keyword: canonical}).to_dict())
        assert want in (got, _echoed(got, value, canonical)), f"{function}({keyword}={value!r})"


@pytest.mark.parametrize("function", ["train", "whatif", "collective", "topology", "infer", "size"])
def test_api_refuses_bad_names_naming_the_option(function: str) -> None:
    """The API names the option as the CLI does (``--fabrics`` for ``size(fabrics=)``, ``--ib`` for ``ib=``)."""
    call, keywords = _api()[function]
    cli = {"train": "train", "whatif": "whatif", "collective": "collective", "topology": "topo", "infer": "infer",
           "size": "size"}[function]
    for kind, keyword in keywords.items():
        if kind == "--precision":
            continue
        typed = SPELLED_AS.get((cli, kind), kind)
        with pytest.raises(SpecError) as err:
            call(**{keyword: "no-such-name"})
        assert str(err.value).startswith((f"{typed}: ", f"{typed.removeprefix('--')}: ")), str(err.value)


@pytest.mark.parametrize("command", ["topo", "traffic"])
def test_eth_takes_ethernet_names_only(command: str) -> None:
    """``--eth`` reads an Ethernet rate; an InfiniBand name there is refused naming --eth, not built as IB (nor
    mangled to 'eth-ndrg')."""
    assert "--eth" in declared() and command in declared()["--eth"]
    result = _runner().invoke(app, [*BASE[command], "--eth", "ndr"])
    assert result.exit_code == 2 and "--eth: " in result.output and "--ib ndr" in result.output, result.output
    assert run_json((*BASE[command], "--eth", "400")) == run_json((*BASE[command], "--ib", "eth-400g"))
