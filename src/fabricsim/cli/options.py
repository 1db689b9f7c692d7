"""Each option of the run commands declared once: the options of `train`, `whatif`, `topo`, `collective`, `infer`,
`size` and `traffic` are fields of the typed run specs (`fabricsim.api.specs`), from which
`python -m fabricsim.api.specs.generate` writes their typer declarations (`cli.spec_options`, so `--help` never
imports pydantic), the API functions and docs/reference/options.md; only how the CLI prints (--format, --json,
--plot, --report) is declared here. A command takes ``**options``; `declared` gives it the signature of its groups
of declarations, in order, which typer reads to build the options, and `run_options` puts the values back in that
order (the JSON ``inputs`` echo).

Adding an option to `train` and `whatif`: one field of `PlanOptions` (fabricsim/api/specs/plan.py) and its use,
then `make generate`; tests/test_generated.py fails while a generated file is stale.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from inspect import Parameter, Signature
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from fabricsim.cli.output import REPORT_SUFFIXES, FormatOpt, JsonOpt, ReportOpt, command_inputs, output_format
from fabricsim.cli.spec_options import (
    CALIBRATION_OPTIONS,
    CLUSTER_OPTIONS,
    DEGRADE_OPTIONS,
    DESIGN_OPTIONS,
    FLOW_OPTIONS,
    GOODPUT_OPTIONS,
    PLAN_OPTIONS,
    TOPOLOGY_STORAGE,
    TRACE_MERGE_OPTIONS,
    WHAT_IF_OPTIONS,
)
from fabricsim.cli.spec_options import (
    COLLECTIVE_OPTIONS as COLLECTIVE_OPTIONS,
)
from fabricsim.cli.spec_options import (
    GOODPUT_SWITCH as GOODPUT_SWITCH,
)

F = TypeVar("F", bound=Callable[..., Any])
Decl = tuple[Any, Any]  # (the Annotated type with its typer.Option, the default)
Group = Mapping[str, Decl]

# The run specs' groups under the names the commands use.
CLUSTER: dict[str, Decl] = CLUSTER_OPTIONS  # the cluster `topo` and `traffic` describe
PLAN: dict[str, Decl] = PLAN_OPTIONS  # the plan and cluster options of `train`, shared with `whatif`
TOPOLOGY: dict[str, Decl] = DESIGN_OPTIONS
FLOW: dict[str, Decl] = FLOW_OPTIONS
DEGRADE: dict[str, Decl] = DEGRADE_OPTIONS
GOODPUT: dict[str, Decl] = GOODPUT_OPTIONS
CALIBRATION: dict[str, Decl] = CALIBRATION_OPTIONS
WHATIF_OWN: dict[str, Decl] = WHAT_IF_OPTIONS
TOPO_STORAGE_OPTIONS: dict[str, Decl] = TOPOLOGY_STORAGE

# Single options other commands declare as the run specs do (the same type, flag and help).
Model, Gpus, Tp, Pp, Dp, Cp, Ep = (PLAN[n][0] for n in ("model", "gpus", "tp", "pp", "dp", "cp", "ep"))
Seq, Gbs, Mbs, Recompute, Zero, Precision = (PLAN[n][0] for n in ("seq", "gbs", "mbs", "recompute", "zero",
                                                                  "precision"))
Fabric = Ib = PLAN["ib"][0]
TRACE_MERGE: dict[str, Decl] = TRACE_MERGE_OPTIONS  # trace import given one file per rank
StragglerThreshold, Workers = (TRACE_MERGE[n][0] for n in ("straggler_threshold", "workers"))
Routing = FLOW["routing"][0]
Calibration = CALIBRATION["calibration"][0]
AsJson = JsonOpt


def help_of(decl: Decl) -> str:
    """The help text of a declaration (for a command that declares the same option with another type)."""
    return str(decl[0].__metadata__[0].help)




# How the CLI prints: no API argument.
PRINT: dict[str, Decl] = {"fmt": (FormatOpt, None), "as_json": (AsJson, False)}
REPORT: dict[str, Decl] = {"report": (ReportOpt, None)}
BREAKDOWN_PLOT: dict[str, Decl] = {"plot": (
    Annotated[Path | None, typer.Option("--plot", help="write the breakdown as a bar chart PNG")], None)}
# `topo`, `traffic` and `collective` echo an empty list, the run commands none (their JSON `inputs` as before).
CALIBRATION_LIST: Decl = (Calibration, [])

# Each command's options in `--help` order.
TRAIN = (PLAN, TOPOLOGY, PRINT, BREAKDOWN_PLOT, CALIBRATION, FLOW, DEGRADE, GOODPUT, GOODPUT_SWITCH, REPORT)
WHATIF = (PLAN, WHATIF_OWN, FLOW, DEGRADE, GOODPUT_SWITCH, GOODPUT, PRINT, CALIBRATION, REPORT)


def declared(*groups: Group) -> Callable[[F], F]:
    """Give a command defined as ``def command(**options: Any)`` the keyword parameters of these groups, in order
    (typer builds its options from the signature; a name in two groups is a programming error)."""
    params = [Parameter(name, Parameter.KEYWORD_ONLY, annotation=kind, default=default)
              for group in groups for name, (kind, default) in group.items()]
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise TypeError(f"an option declared twice: {sorted({n for n in names if names.count(n) > 1})}")

    def wrap(func: F) -> F:
        func.__signature__ = Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        return func

    return wrap


def given(groups: tuple[Group, ...], options: Mapping[str, Any]) -> dict[str, Any]:
    """The options typer passed, in the order of their declaration (the ``inputs`` echo and ``--dump-config``)."""
    return {name: options[name] for group in groups for name in group if name in options}


def run_options(groups: tuple[Group, ...], options: Mapping[str, Any]) -> tuple[dict[str, Any], str, Path | None,
                                                                              Path | None]:
    """What every run command does first: the JSON ``inputs`` echo (declaration order), the output format, and the
    --plot and --report paths checked before any work (None where the command has no such option)."""
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    inputs = command_inputs(given(groups, options))
    form = output_format(options["fmt"], options["as_json"])
    plot = check_output_path(options.get("plot"), "--plot", PLOT_SUFFIXES)
    return inputs, form, plot, check_output_path(options.get("report"), "--report", REPORT_SUFFIXES)
