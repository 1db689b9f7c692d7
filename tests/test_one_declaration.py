"""Issue 44 item 1: each option is declared once. The same option name on two commands has one help text and one
default (unless listed below, with the reason the two are different options), and a flag is written in one
``typer.Option`` of the CLI's source unless its declarations really differ. The run commands take ``**options`` and
get their signature from the declaration tables (`fabricsim.cli.options.declared`), so no default is restated."""

from __future__ import annotations

import ast
import inspect
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from fabricsim.cli import app
from fabricsim.cli.options import PLAN, declared

CLI = Path(__file__).resolve().parents[1] / "src" / "fabricsim" / "cli"
RUN_COMMANDS = {"train": "train_cmd", "whatif": "whatif_cmd", "size": "size_cmd", "infer": "infer_cmd",
                "collective": "collective_cmd", "topo": "topo_cmd", "traffic": "traffic_cmd"}

SEARCH = "size searches a list of values, or leaves the value to the search: a different option under the name"
TOOL = ("a tool command outside the run commands (its own declaration: the system or log a measurement ran on, "
        "or bench's own sweep)")
ECHO = ("`topo`, `traffic` and `collective` echo `calibration: []` in their JSON inputs and API to_dict(); one "
        "default would change those documents")
PLOT = "each command draws a different plot"

# option -> {command: why that command's declaration differs from the others'}
EXCEPTIONS: dict[str, dict[str, str]] = {
    **{opt: {"size": SEARCH, "sweep": SEARCH} for opt in (
        "--tp", "--pp", "--cp", "--ep", "--etp", "--vpp", "--mbs", "--gbs", "--recompute", "--zero", "--precision",
        "--nodes", "--oversubscription", "--dropout", "--ep-comm-overlap", "--shared-expert-overlap", "--moe-balance",
        "--moe-dispatcher")},
    **{opt: {"size": SEARCH} for opt in ("--spares", "--storage-bw", "--weights", "--kv")},
    "--seq": {cmd: "size's scenario is a pre-training run at 8192 tokens; train's default step is 4096"
              for cmd in ("size", "sweep")},
    "--gpus": {"collective": "the GPUs of one collective's group (first N of the nodes)",
               "traffic": "the GPUs of the simulated job", "infer": "the GPUs of one serving group (= tp*pp*dp)",
               "size": SEARCH, "sweep": SEARCH},
    "--dp": {"infer": "attention data parallelism within one serving group (default 1), not training DP"},
    "--calibration": {"collective": ECHO, "topo": ECHO, "traffic": ECHO, "catalog": TOOL, "validate": TOOL,
                      "compare": TOOL, "calibrate": TOOL, "trace calibrate": TOOL},
    "--checkpoint": {"traffic": "the model whose checkpoint write is simulated, not the launch command's path"},
    "--disagg": {"size": "a switch to search disaggregated pools; infer --disagg takes the P:D ratio"},
    "--duration": {"size": "each candidate is simulated for 120 s by default, infer's run for 600 s"},
    "--engine": {"size": "size --engine is the serving engine of size --inference only (its help says so)"},
    "--rate": {"size": "size takes the request rate to size for as text"},
    "--seed": {"infer": "infer's Poisson arrivals (echoed as null: seed 0)",
               "size": "the arrivals of size's candidate simulations"},
    "--format": {"collective": "collective also prints nccl-tests' own layout"},
    "--framework": {cmd: "size takes it for training only (refused with --inference): no default, megatron's "
                         "settings unless given" for cmd in ("size", "sweep")},
    "--jobs": {cmd: "other jobs placed beside this one; traffic --jobs is the whole workload"
               for cmd in ("train", "whatif")},
    "--routing": {"collective": "no default: refused without --sim flow"},
    "--sim": {cmd: "the flow run of train is every DP/EP group at once, of collective one algorithm's schedule"
              for cmd in ("train", "whatif")},
    "--storage": {"topo": "topo bills storage servers only when asked (no tier by default)", "size": SEARCH},
    "--storage-network": {"topo": "topo bills a storage network only when asked (default none)"},
    "--plot": {"collective": PLOT, "topo": PLOT, "traffic": PLOT, "size": PLOT, "compare": PLOT},
    "--out": {cmd: "size and sweep write their plans to Parquet; calibrate writes an overlay"
              for cmd in ("size", "sweep")},
    "--model": {"trace import": TOOL},
    "--system": {"calibrate": TOOL, "compare": TOOL, "trace import": TOOL, "trace calibrate": TOOL},
    "--op": {"collective": "collective predicts one operation (default all_reduce)", "calibrate": TOOL,
             "bench collective": TOOL},
    **{opt: {"bench memory": TOOL} for opt in ("--iters", "--warmup")},
    **{opt: {"bench memory": TOOL, "bench collective": "a live run sweeps a shorter range (torchrun takes --max)"}
       for opt in ("--min", "--max")},
    "--step-factor": {"bench collective": TOOL, "bench memory": TOOL},
    "--dtype": {"bench collective": TOOL},
}


def _commands(cmd: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, f"{path} {name}".strip())
    else:
        yield path, cmd


def _declarations() -> dict[str, dict[str, tuple[str | None, str]]]:
    """Every option (by its first name) -> command -> (help, default) as --help shows them."""
    found: dict[str, dict[str, tuple[str | None, str]]] = defaultdict(dict)
    for path, cmd in _commands(typer.main.get_command(app)):
        for param in cmd.params:
            if getattr(param, "param_type_name", "") == "option" and param.opts[0].startswith("--"):
                found[param.opts[0]][path] = (param.help, repr(param.default))
    return found


DECLARATIONS = _declarations()


@pytest.mark.parametrize("option", sorted(o for o, c in DECLARATIONS.items() if len(c) > 1))
def test_one_option_name_has_one_help_and_default(option: str) -> None:
    commands = DECLARATIONS[option]
    excepted = EXCEPTIONS.get(option, {})
    assert set(excepted) <= set(commands), (
        f"{option}: exceptions for commands without it: {set(excepted) - set(commands)}")
    shared = {c: d for c, d in commands.items() if c not in excepted}
    assert len(set(shared.values())) <= 1, (
        f"{option} has different help or default on {sorted(shared)}: declare it once, or list the exception")
    for command in excepted:  # a stale exception hides a future difference: it must still differ
        assert all(commands[command] != d for d in shared.values()), (
            f"{option} on {command} is now the shared declaration: remove its exception")


def test_every_exception_names_an_option_on_two_commands() -> None:
    for option in EXCEPTIONS:
        assert len(DECLARATIONS.get(option, {})) > 1, f"{option}: no longer on two commands; remove the exception"


def _source_declarations() -> Counter[str]:
    """How many ``typer.Option(...)`` calls (or size's ``_opt``) in src/fabricsim/cli name each flag (not the
    generated `spec_options`: its declarations are the run specs' fields, checked below)."""
    count: Counter[str] = Counter()
    for path in sorted(p for p in CLI.glob("*.py") if p.name != "spec_options.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in ("Option", "_opt"):
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and re.match(r"--[a-z0-9]", arg.value):
                    count[arg.value.split("/")[0]] += 1
    return count


def test_a_flag_is_written_once_per_distinct_declaration() -> None:
    """A flag in several `typer.Option` calls only where the declarations differ (listed above): the same option
    on two commands is one declaration, shared."""
    repeated = {}
    for flag, n in _source_declarations().items():
        variants = len(set(DECLARATIONS.get(flag, {}).values())) or 1
        if n > variants:
            repeated[flag] = (n, variants)
    assert not repeated, f"flags written more often than they differ (declare once, share): {repeated}"


def test_the_source_check_sees_the_declarations() -> None:
    counts = _source_declarations()
    assert counts["--iters"] >= 1 and counts["--op"] >= 1  # the tool commands' own (bench, calibrate)
    assert counts["--tp"] == counts["--swap"] == counts["--storage-switch"] == 0  # the run specs' fields


@pytest.mark.parametrize("command", sorted(RUN_COMMANDS))
def test_run_commands_restate_no_option(command: str) -> None:
    """The run commands take ``**options``: no parameter list (and so no default) written in the function."""
    tree = ast.parse((CLI / f"{RUN_COMMANDS[command]}.py").read_text())
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == f"{command}_command")
    args = func.args
    assert not (args.args or args.kwonlyargs or args.defaults) and args.kwarg is not None, (
        f"{command}_command restates its options: compose it from the declaration tables (cli.options.declared)")


def test_train_and_whatif_defaults_are_the_plan_table() -> None:
    from fabricsim.cli.train_cmd import train_command
    from fabricsim.cli.whatif_cmd import whatif_command

    for command in (train_command, whatif_command):
        params = inspect.signature(command).parameters
        assert {name: params[name].default for name in PLAN} == {name: d for name, (_, d) in PLAN.items()}


def test_an_option_declared_twice_in_one_command_is_refused() -> None:
    with pytest.raises(TypeError, match="declared twice"):
        declared(PLAN, {"tp": PLAN["tp"]})


SPECS = CLI.parent / "api" / "specs"


def test_a_spec_option_is_declared_once() -> None:
    """In the run specs each option is one `opt(...)` call: no help text written twice (a field several specs
    share is one ``Annotated`` alias, as `--ib` and `--storage-bw`; a help text two declarations with different
    defaults share is one named constant, as STORAGE_HELP)."""
    helps: Counter[str] = Counter()
    for path in sorted(SPECS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "opt" and len(node.args) > 1 and \
                    not isinstance(node.args[1], ast.Name):  # a named help text is written once, where it is named
                helps[ast.unparse(node.args[1])] += 1
    assert helps and not [h for h, n in helps.items() if n > 1]
