"""The `fabricsim` command line: typer app; every command prints a table and takes --format/--json.

Start-up: this module and every ``*_cmd`` module import only typer, rich and light fabricsim modules (units,
errors, cli.output); numpy, scipy, pandas, pydantic models, the catalog and the bench harness are imported inside
the command functions, so ``fabricsim --help`` stays fast (tests/test_cli_conventions.py checks the modules).
"""

from __future__ import annotations

import atexit
import functools
import gc
import sys

import typer

from fabricsim.cli.bench_cmd import bench_app
from fabricsim.cli.calibrate_cmd import calibrate_command, compare_command
from fabricsim.cli.catalog_cmd import catalog_command
from fabricsim.cli.collective_cmd import collective_command
from fabricsim.cli.infer_cmd import infer_command
from fabricsim.cli.output import console
from fabricsim.cli.run_config import run_config
from fabricsim.cli.size_cmd import size_command
from fabricsim.cli.sweep_cmd import sweep_command
from fabricsim.cli.topo_cmd import topo_command
from fabricsim.cli.trace_cmd import trace_app
from fabricsim.cli.traffic_cmd import traffic_command
from fabricsim.cli.train_cmd import render_training, summary_lines, train_command
from fabricsim.cli.validate_cmd import validate_command
from fabricsim.cli.whatif_cmd import whatif_command

app = typer.Typer(
    name="fabricsim",
    help="Which interconnect layer bounds a GPU workload, and what is the cheapest cluster that meets a target.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: rich's help renderer alone doubles start-up (bench_startup.py)
)


def _version(value: bool) -> None:
    """Print the installed version (importlib.metadata) and exit."""
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("fabricsim")
        except PackageNotFoundError:
            from fabricsim import __version__ as text
        typer.echo(f"fabricsim {text}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="print the version and exit"),
) -> None:
    """Which interconnect layer bounds a GPU workload, and what is the cheapest cluster that meets a target."""


app.command("catalog")(catalog_command)
app.command("collective")(run_config("collective")(collective_command))
app.command("topo")(run_config("topo")(topo_command))
app.command("traffic")(run_config("traffic")(traffic_command))
app.command("train")(run_config("train")(train_command))
app.command("whatif")(run_config("whatif")(whatif_command))
app.command("infer")(run_config("infer")(infer_command))
app.command("size")(run_config("size")(size_command))
app.command("sweep")(sweep_command)
app.command("validate")(validate_command)
app.add_typer(bench_app, name="bench")
app.command("calibrate")(calibrate_command)
app.command("compare")(compare_command)
app.add_typer(trace_app, name="trace")


@app.command("demo")
def demo_command() -> None:
    """The main job on a built-in default: Llama 3 70B on 64 DGX H100 nodes, which layer bounds it, and what
    failures and checkpoints leave of it (goodput)."""
    from fabricsim.catalog import default_catalog
    from fabricsim.comm import Cluster
    from fabricsim.model import load_model
    from fabricsim.training import ParallelPlan, predict_training

    catalog = default_catalog()
    model = load_model("llama3-70b")
    plan = ParallelPlan.build(gpus=512, tp=8, pp=4, seq=8192, gbs=512, recompute="selective")
    cluster = Cluster(catalog.system("dgx-h100"))
    pred = predict_training(model, plan, cluster)
    title = (f"demo: llama3-70b on 512 H100 ({pred.nodes} x dgx-h100), tp=8 pp=4 dp=16, seq 8192, gbs 512, "
             "flash attention")
    console.print(render_training(pred, title))
    from fabricsim.api import prediction_bands, run_goodput
    from fabricsim.cli.goodput_options import goodput_lines
    from fabricsim.training import GoodputSpec

    good = run_goodput(model, cluster, pred, GoodputSpec())
    for line in summary_lines(pred, prediction_bands(model, cluster, pred, [])) + goodput_lines(good):
        console.print(line)
    console.print("[dim]next: `fabricsim catalog systems` for the other systems, `fabricsim whatif` for where the "
                  "next dollar goes, `fabricsim --help` for every command[/]")


@functools.cache
def _freeze_start_up() -> None:
    """Once per process: freeze the objects made so far and register the same freeze for the exit.

    The modules, classes and catalog objects made at start-up live until the process ends, yet every full
    collection scans them, and the interpreter's shutdown runs several; frozen (``gc.freeze``) they are skipped, and
    the exit's freeze does the same for the command's own imports: about 0.1 s of a 0.5 s `fabricsim train`
    (benchmarks/bench_startup.py). Collection stays on while a command runs."""
    gc.freeze()
    atexit.register(gc.freeze)


def main() -> None:
    """Console-script entry point: usage errors become one line on stderr and exit code 2. Its first call freezes
    the start-up objects (``_freeze_start_up``); a caller that runs ``main`` in-process (the tests) freezes once."""
    _freeze_start_up()
    try:
        code = app(standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("error: aborted\n")
        sys.exit(130)
    except Exception as exc:
        # typer's (vendored click) usage errors: duck-typed, since their classes are private to typer.
        if type(exc).__name__ == "NoArgsIsHelpError":  # `fabricsim` (or a group) alone: its usage, as --help
            ctx = getattr(exc, "ctx", None)
            sys.stdout.write((ctx.get_help() if ctx is not None else "usage: fabricsim --help") + "\n")
            sys.exit(0)
        format_message = getattr(exc, "format_message", None)
        if format_message is None or not hasattr(exc, "exit_code"):
            raise
        sys.stderr.write(f"error: {format_message()}\n")
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["app", "main"]
