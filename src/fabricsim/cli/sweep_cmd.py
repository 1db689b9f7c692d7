"""`fabricsim sweep`: every plan of a training space that fits, timed and priced (`size`'s evaluation without its
bound, constraints or ranking): the fastest and cheapest plans as tables, the whole table to Parquet (--out) or
as CSV on stdout (--format csv)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.cli.options import PRINT, Decl, declared, given
from fabricsim.cli.size_cmd import ClusterBar
from fabricsim.cli.spec_options import CALIBRATION_OPTIONS, GOODPUT_SWITCH, PLAN_SPACE_OPTIONS

if TYPE_CHECKING:
    import pandas as pd
    from rich.table import Table

SWEEP: dict[str, Decl] = {**PLAN_SPACE_OPTIONS, **GOODPUT_SWITCH, **CALIBRATION_OPTIONS, "fmt": PRINT["fmt"],
                          "as_json": PRINT["as_json"]}
SHOWN = 10
"""plans in each printed table (the rest: --out or --format csv)"""


def plans_table(frame: pd.DataFrame, title: str) -> Table:
    """Plans of the sweep, a row each: cluster, plan, step, time to train, cost, MFU."""
    table = ui.new_table(title=title)
    for col in ("system", "network", "GPUs", "tp pp dp cp ep vpp mbs", "recompute", "zero", "precision"):
        ui.text_column(table, col) if col in ("system", "network", "recompute", "precision") else \
            ui.num_column(table, col)
    for col in ("step", "time to train", "cost", "MFU"):
        ui.num_column(table, col)
    for r in frame.to_dict("records"):
        table.add_row(str(r["system"]), f"{r['fabric']} {r['oversubscription']:g}:1", f"{r['gpus']:,}",
                      f"{r['tp']} {r['pp']} {r['dp']} {r['cp']} {r['ep']} {r['vpp']} {r['mbs']}", str(r["recompute"]),
                      str(r["zero"]), str(r["precision"]), units.format_duration(r["step_time_s"]),
                      units.format_duration(r["time_to_train_s"]),
                      "-" if r["cost_usd"] != r["cost_usd"] else f"${r['cost_usd']:,.0f}", f"{r['mfu']:.1%}")
    return table


@declared(SWEEP)
@ui.spec_errors
def sweep_command(**options: Any) -> None:
    """Time and price every plan of a training space that fits: the options of `size`'s space (systems, networks,
    sizes, knobs); the whole table with --out (Parquet) or --format csv."""
    inputs = ui.command_inputs(given((SWEEP,), options))
    form = ui.output_format(options["fmt"], options["as_json"])
    from fabricsim.api import sweep
    from fabricsim.inputs import check_output_path

    out = check_output_path(options["out"], "--out")
    arguments = {**ui.api_arguments(sweep, inputs), "out": out}
    bar = None if form != "table" or not sys.stderr.isatty() else ClusterBar("sweep")
    if bar is not None:
        with bar.progress:
            answer = sweep(**arguments, progress=bar)
    else:
        answer = sweep(**arguments)
    frame = answer.to_frame()
    if form == "csv":
        frame.to_csv(sys.stdout, index=False)
        return
    if ui.emit(form, answer.data, inputs):
        return
    data = answer.data
    ui.console.print(f"[bold]sweep[/]: {data['plans']:,} plans fit of {data['candidates']:,} candidates on "
                     f"{data['clusters']:,} clusters ({data['wall_s']:.1f} s)"
                     + (f"; every plan in {data['out']}" if data["out"] else ""))
    if len(frame):
        ui.console.print(plans_table(frame.nsmallest(SHOWN, "time_to_train_s"), f"fastest {SHOWN}"))
        ui.console.print(plans_table(frame.nsmallest(SHOWN, "cost_usd"), f"cheapest {SHOWN}"))
    else:
        ui.console.print("[yellow]no plan of the space fits (see --json errors, or `fabricsim size` for why)[/]")
    for chunk, why in data["errors"].items():
        ui.console.print(f"[yellow]{chunk}: {why}[/]")
