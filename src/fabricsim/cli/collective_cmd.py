"""`fabricsim collective`: predicted nccl-tests results for one operation over a size sweep."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import fabricsim.cli.output as ui
from fabricsim.cli.options import (
    CALIBRATION_LIST,
    COLLECTIVE_OPTIONS,
    PRINT,
    REPORT,
    Decl,
    declared,
    run_options,
)

if TYPE_CHECKING:

    from fabricsim.collectives import Prediction
    from fabricsim.nccltests import BenchResult


class CollectiveFormat(StrEnum):
    """`collective --format`: the table formats plus nccl-tests' own layout (read back by `bench parse`)."""

    table = "table"
    json = "json"
    csv = "csv"
    nccl_tests = "nccl-tests"


def bench_result(prediction: Prediction, op: str, ngpus: int, nodes: int, per_node: int,
                 system: str) -> BenchResult:
    """The prediction as a benchmark result (both column groups equal), for nccl-tests' layout."""
    from fabricsim.nccltests import BenchResult, BenchRow, DeviceInfo

    rows = [BenchRow(op=op, size_bytes=r.size_bytes, count=r.count, dtype=r.dtype, in_place=place,
                     redop="sum" if op in ("all_reduce", "reduce", "reduce_scatter") else None,
                     root=0 if op in ("broadcast", "reduce") else None, time_s=r.time_s, algbw_GBps=r.algbw_GBps,
                     busbw_GBps=r.busbw_GBps, algorithm=r.algorithm, protocol=r.protocol, bound=r.bound)
            for r in prediction.rows for place in (False, True)]
    hosts = [f"node{i}" for i in range(nodes)]
    devices = [DeviceInfo(rank=r, host=hosts[r // per_node], device=r % per_node, bus_id="model",
                          name=f"{system} (fabricsim model)") for r in range(ngpus)]
    return BenchResult(tool="fabricsim", op=op, backend="model", world_size=ngpus, hosts=hosts, devices=devices,
                       rows=rows,
                       source=f"fabricsim collective --system {system}",
                       notes=["predicted by fabricsim's collective model"])


COLLECTIVE_OWN: dict[str, Decl] = {
    "fmt": (Annotated[CollectiveFormat | None, typer.Option(
        "--format", help="table (default), json (SI units), csv, or nccl-tests (nccl-tests' own layout, read back by "
        "`bench parse`)")], None),
    "as_json": PRINT["as_json"],
    "plot": (Annotated[Path | None, typer.Option("--plot", help="write busbw vs size to this PNG")], None),
    "calibration": CALIBRATION_LIST,
}
COLLECTIVE = (COLLECTIVE_OPTIONS, COLLECTIVE_OWN, REPORT)


@declared(*COLLECTIVE)
@ui.spec_errors
def collective_command(**options: Any) -> None:
    """Predict what nccl-tests would measure for one collective across message sizes."""
    from fabricsim.api import collective
    from fabricsim.validation import band_note, band_text

    inputs, form, plot, report = run_options(COLLECTIVE, options)
    nodes = options["nodes"]
    result = collective(**ui.api_arguments(collective, inputs))
    prediction, row_bands, name, ngpus = result.prediction, result.row_bands, result.op, result.ranks
    assert prediction is not None and result.model is not None
    if plot is not None:
        from fabricsim.report import plot_collective_sweep

        plot_collective_sweep(result.model, name, prediction, plot)
    ui.write_command_report(report, result, inputs)
    data = result.data
    if form == "nccl-tests":
        from fabricsim.nccltests import format_nccl_tests

        bench = bench_result(prediction, name, ngpus, nodes, result.per_node, result.system)
        typer.echo(format_nccl_tests(bench), nl=False)
        return
    if ui.emit(form, data, inputs, data["rows"]):
        return
    table = ui.new_table(title=f"{name}: {ngpus} GPUs on {nodes} x {result.system}", header_style="bold")
    secondary = ("count", "type", "protocol") if ui.narrow() else ()
    flow = any(r.congestion_s is not None for r in prediction.rows)
    for header in ("size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "busbw 80% band",
                   "congestion", "algorithm", "protocol", "bound"):
        if header in secondary or (header == "congestion" and not flow):
            continue
        if header.startswith(("size", "count", "time", "algbw", "busbw")):
            ui.num_column(table, header)
        else:
            ui.text_column(table, header)
    for r, found in zip(prediction.rows, row_bands, strict=True):
        cells = {"size (B)": str(r.size_bytes), "count": str(r.count), "type": r.dtype,
                 "time (us)": f"{r.time_s * 1e6:.2f}", "algbw (GB/s)": f"{r.algbw_GBps:.2f}",
                 "busbw (GB/s)": f"{r.busbw_GBps:.2f}", "busbw 80% band": band_text(found["busbw_bytes_per_s"], 1e-9),
                 "congestion": "" if r.congestion_s is None else f"{r.congestion_s / r.time_s:.1%}",
                 "algorithm": r.algorithm, "protocol": r.protocol, "bound": r.bound}
        table.add_row(*(v for k, v in cells.items() if k not in secondary and (flow or k != "congestion")))
    ui.console.print(table)
    ui.console.print(data["regime"])
    sharp = data.get("sharp")
    if sharp is not None:
        ui.console.print(f"SHARP: a tree for this job ({sharp['jobs']} job(s) want one)" if sharp["tree"]
                         else f"SHARP: no tree: {sharp['note']}")
    if data.get("degraded"):
        ui.console.print(f"degraded: {', '.join(data['degraded'])}")
    if flow:
        ui.console.print("congestion: the share of the time beyond the same algorithm and protocol alone on the fabric "
                      "(the flow run uses the analytical model's link rates and step latencies)")
    for note in dict.fromkeys(band_note({"busbw": found["busbw_bytes_per_s"]}) for found in row_bands):
        ui.console.print(note)
    if plot is not None:
        ui.console.print(f"plot written to {plot}")
