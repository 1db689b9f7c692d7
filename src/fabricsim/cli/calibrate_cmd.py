"""`fabricsim calibrate` and `fabricsim compare`: fit the model to measurements, and show model vs measurement."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricsim import units
from fabricsim.bench.calibration import calibrate, predict_times
from fabricsim.bench.measurements import load_results, to_measurements
from fabricsim.catalog import load_catalog
from fabricsim.cli.output import console, print_json, spec_errors
from fabricsim.collectives import busbw_factor


@spec_errors
def calibrate_command(
    logs: list[str] = typer.Argument(..., help="nccl-tests logs or fabricsim bench JSON files"),
    system: str = typer.Option(..., "--system", help="system preset the measurements ran on"),
    fabric: str | None = typer.Option(None, "--ib", help="network between nodes (default: the system's NICs)"),
    op: str | None = typer.Option(None, "--op", help="the collective, when a log does not say"),
    out: Path | None = typer.Option(None, "--out", help="write the calibration overlay YAML here"),
    as_json: bool = typer.Option(False, "--json"),
    calibration: list[str] = typer.Option([], "--calibration", help="start from this overlay"),
) -> None:
    """Fit link efficiencies and latencies to measured collectives; print the error per size before and after."""
    catalog = load_catalog(*calibration)
    measurements = to_measurements(load_results(logs, op=op))
    result = calibrate(measurements, system, fabric=fabric, catalog=catalog)
    if out is not None:
        result.write(out)
    if as_json:
        print_json(result.model_dump(mode="json") | {"overlay_file": str(out) if out else None})
        return
    params = Table(title=f"calibration of {result.system} on {len(measurements)} measurements", header_style="bold")
    for header in ("parameter", "before", "after", "fitted"):
        params.add_column(header)
    for name in result.before:
        params.add_row(name, f"{result.before[name]:.4g}", f"{result.after[name]:.4g}",
                       "yes" if name in result.fitted else "no (not exercised)")
    console.print(params)
    rows = Table(header_style="bold")
    for header in ("op", "ranks", "size", "measured busbw", "before", "error", "after", "error"):
        rows.add_column(header, justify="right")
    for r in result.rows:
        rows.add_row(r.op, str(r.nranks), units.format_size(r.size_bytes), f"{r.measured_busbw_GBps:.2f}",
                     f"{r.before_busbw_GBps:.2f}", f"{r.before_error:+.1%}", f"{r.after_busbw_GBps:.2f}",
                     f"{r.after_error:+.1%}")
    console.print(rows)
    if out is not None:
        console.print(f"overlay written to {out}; use it with --calibration {out}")


@spec_errors
def compare_command(
    log: str = typer.Argument(..., help="nccl-tests log or fabricsim bench JSON"),
    system: str = typer.Option(..., "--system", help="system preset the measurement ran on"),
    fabric: str | None = typer.Option(None, "--ib"),
    op: str | None = typer.Option(None, "--op", help="the collective, when the log does not say"),
    plot: Path | None = typer.Option(None, "--plot", help="write measured and predicted busbw to this PNG"),
    as_json: bool = typer.Option(False, "--json"),
    calibration: list[str] = typer.Option([], "--calibration", help="calibration overlay YAML"),
) -> None:
    """Measured against predicted bus bandwidth, per size."""
    catalog = load_catalog(*calibration)
    measurements = to_measurements(load_results([log], op=op))
    sysm = catalog.system(system)
    predicted = predict_times(catalog, sysm, fabric, measurements)
    rows = []
    for m, t in zip(measurements, predicted, strict=True):
        bw = m.size_bytes / t / 1e9 * busbw_factor(m.op, m.nranks)
        rows.append({"op": m.op, "ranks": m.nranks, "nodes": m.nnodes, "size_bytes": m.size_bytes,
                     "measured_busbw_GBps": m.busbw_GBps, "predicted_busbw_GBps": bw,
                     "error": (bw - m.busbw_GBps) / m.busbw_GBps})
    if plot is not None:
        from fabricsim.report.plots import plot_compare

        plot_compare(rows, f"{log} vs fabricsim ({system})", plot)
    if as_json:
        print_json({"rows": rows, "system": system, "calibration": calibration})
        return
    table = Table(title=f"{log}: measured vs predicted ({system})", header_style="bold")
    for header in ("op", "ranks", "size", "measured busbw", "predicted busbw", "error"):
        table.add_column(header, justify="right")
    for r in rows:
        table.add_row(str(r["op"]), str(r["ranks"]), units.format_size(int(r["size_bytes"])),
                      f"{r['measured_busbw_GBps']:.2f}", f"{r['predicted_busbw_GBps']:.2f}", f"{r['error']:+.1%}")
    console.print(table)
