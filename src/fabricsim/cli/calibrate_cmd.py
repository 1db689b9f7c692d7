"""`fabricsim calibrate` and `fabricsim compare`: fit the model to measurements, and show model vs measurement."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.cli.bench_cmd import LogOp
from fabricsim.cli.topo_options import Ib

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.calibration import CalibrationResult, Measurement
    from fabricsim.catalog import Catalog


def load_measurements(logs: list[str], system: str, catalog: Catalog, op: str | None) -> tuple[list[Measurement],
                                                                                            list[str]]:
    """Measurements of every log, each tagged with its file, after checking the log can belong to the system (its
    backend and devices, and bus bandwidths the system's links can carry); returns them with the warnings of the
    checks. `calibrate`, `compare` and `trace calibrate` refuse alike."""
    from fabricsim.calibration import check_bandwidths, check_results, load_results, to_measurements

    sysm = catalog.system(system)
    measurements: list[Measurement] = []
    warnings: list[str] = []
    for log in logs:
        results = load_results([log], op=op)
        warnings += check_results(results, sysm, catalog, source=log)
        found = [replace(m, log=log) for m in to_measurements(results)]
        check_bandwidths(found, sysm, catalog, source=log)
        measurements += found
    return measurements, warnings


def calibration_tables(result: CalibrationResult, count: int) -> list[Table]:
    """Parameters, per-log errors and per-size errors, before and after."""
    params = ui.new_table(title=f"calibration of {result.system} on {count} measurements", header_style="bold")
    for header in ("parameter", "before", "after", "fitted"):
        params.add_column(header)
    for name in result.before:
        fitted = ("no (kept the catalog's)" if result.kept_catalog else "yes") if name in result.fitted \
            else "no (not exercised)"
        params.add_row(name, f"{result.before[name]:.4g}", f"{result.after[name]:.4g}", fitted)
    logs = ui.new_table(title="error per log (|busbw error|)", header_style="bold")
    for header in ("log", "points", "mean before", "max before", "mean after", "max after"):
        logs.add_column(header, justify="right")
    for e in result.logs:
        logs.add_row(e.log, str(e.points), f"{e.before_mean_abs_error:.1%}", f"{e.before_max_abs_error:.1%}",
                     f"{e.after_mean_abs_error:.1%}", f"{e.after_max_abs_error:.1%}")
    rows = ui.new_table(header_style="bold")
    for header in ("op", "ranks", "size", "measured busbw", "before", "error", "after", "error"):
        rows.add_column(header, justify="right")
    for r in result.rows:
        rows.add_row(r.op, str(r.nranks), units.format_size(r.size_bytes), f"{r.measured_busbw_GBps:.2f}",
                     f"{r.before_busbw_GBps:.2f}", f"{r.before_error:+.1%}", f"{r.after_busbw_GBps:.2f}",
                     f"{r.after_error:+.1%}")
    return [params, logs, rows]


# The options `calibrate` shares with `trace calibrate` (the overlay it writes and starts from), declared once.
OverlayOut = Annotated[Path | None, typer.Option("--out", help="write the calibration overlay YAML here")]
StartOverlay = Annotated[list[str], typer.Option("--calibration", help="start from this overlay")]


@ui.spec_errors
def calibrate_command(
    logs: list[str] = typer.Argument(..., help="nccl-tests logs or fabricsim bench JSON files"),
    system: str = typer.Option(..., "--system", help="system preset the measurements ran on"),
    fabric: Ib = None,
    op: str | None = typer.Option(None, "--op", help="the collective, when a log does not say"),
    out: OverlayOut = None,
    fmt: ui.FormatOpt = None,
    as_json: ui.JsonOpt = False,
    calibration: StartOverlay = [],  # noqa: B006
) -> None:
    """Fit link efficiencies and latencies to measured collectives; print the error per log and per size before and
    after. Logs that cannot belong to the system are refused; an overlay that fits worse than the catalog is never
    written, and when `--out` asked for one the command says "no overlay written" and exits 1."""
    from fabricsim.calibration import calibrate
    from fabricsim.catalog import load_catalog

    inputs = ui.command_inputs(locals())
    form = ui.output_format(fmt, as_json)
    from fabricsim.inputs import check_output_path

    out = check_output_path(out, "--out")
    catalog = load_catalog(*calibration)
    measurements, warnings = load_measurements(logs, system, catalog, op)
    result = calibrate(measurements, system, fabric=fabric, catalog=catalog)
    result = result.model_copy(update={"warnings": warnings + result.warnings})
    written = out if out is not None and not result.kept_catalog else None
    if written is not None:
        result.write(written)
    data = result.model_dump(mode="json") | {"overlay_file": str(written) if written else None}
    if not ui.emit(form, data, inputs, data["rows"]):  # JSON: the warnings are in the document
        for table in calibration_tables(result, len(measurements)):
            ui.console.print(table)
        stderr_warnings(result.warnings)
        if written is not None:
            ui.console.print(f"overlay written to {written}; use it with --calibration {written}")
    if out is not None and written is None:  # asked for an overlay and got none: a script must not go on
        sys.stderr.write(f"no overlay written: {out} was not created, the fit does not beat the catalog on these "
                         "measurements (the warnings say where); exit 1\n")
        raise typer.Exit(1)


def stderr_warnings(warnings: list[str]) -> None:
    """One 'warning:' line per warning on stderr (the JSON on stdout stays parseable)."""
    for w in warnings:
        sys.stderr.write(f"warning: {w}\n")


@ui.spec_errors
def compare_command(
    log: str = typer.Argument(..., help="nccl-tests log or fabricsim bench JSON"),
    system: str = typer.Option(..., "--system", help="system preset the measurement ran on"),
    fabric: Ib = None,
    op: LogOp = None,
    plot: Path | None = typer.Option(None, "--plot", help="write measured and predicted busbw to this PNG"),
    fmt: ui.FormatOpt = None,
    as_json: ui.JsonOpt = False,
    calibration: list[str] = typer.Option([], "--calibration", help="calibration overlay YAML"),
) -> None:
    """Measured against predicted bus bandwidth, per size. A log that cannot belong to the system is refused, as
    calibrate refuses it."""
    from fabricsim.calibration import predict_times
    from fabricsim.catalog import load_catalog
    from fabricsim.collectives import busbw_factor

    inputs = ui.command_inputs(locals())
    form = ui.output_format(fmt, as_json)
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    catalog = load_catalog(*calibration)
    measurements, warnings = load_measurements([log], system, catalog, op)
    sysm = catalog.system(system)
    predicted = predict_times(catalog, sysm, fabric, measurements)
    rows = []
    for m, t in zip(measurements, predicted, strict=True):
        bw = m.size_bytes / t / 1e9 * busbw_factor(m.op, m.nranks)
        rows.append({"op": m.op, "ranks": m.nranks, "nodes": m.nnodes, "size_bytes": m.size_bytes,
                     "measured_busbw_GBps": m.busbw_GBps, "predicted_busbw_GBps": bw,
                     "error": (bw - m.busbw_GBps) / m.busbw_GBps})
    if plot is not None:
        from fabricsim.report import plot_compare

        plot_compare(rows, f"{log} vs fabricsim ({system})", plot)
    if ui.emit(form, {"rows": rows, "system": system, "calibration": calibration, "warnings": warnings}, inputs, rows):
        return
    table = ui.new_table(title=f"{log}: measured vs predicted ({system})", header_style="bold")
    for header in ("op", "ranks", "size", "measured busbw", "predicted busbw", "error"):
        ui.num_column(table, header)
    for r in rows:
        table.add_row(str(r["op"]), str(r["ranks"]), units.format_size(int(r["size_bytes"])),
                      f"{r['measured_busbw_GBps']:.2f}", f"{r['predicted_busbw_GBps']:.2f}", f"{r['error']:+.1%}")
    ui.console.print(table)
    stderr_warnings(warnings)
