"""`fabricsim collective`: predicted nccl-tests results for one operation over a size sweep."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from fabricsim.cli.output import (
    REPORT_SUFFIXES,
    JsonOpt,
    ReportOpt,
    api_arguments,
    command_inputs,
    console,
    emit,
    fabric_help,
    narrow,
    new_table,
    num_column,
    output_format,
    spec_errors,
    text_column,
    write_command_report,
)
from fabricsim.cli.topo_options import DragonflyRouting, Planes

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


@spec_errors
def collective_command(
    system: str = typer.Option("dgx-h100", "--system", help="system preset (see `fabricsim catalog systems`)"),
    nodes: int = typer.Option(1, "--nodes", help="nodes in the job"),
    gpus: int | None = typer.Option(None, "--gpus", help="first N GPUs of the nodes (default: all)"),
    ranks_per_node: int | None = typer.Option(None, "--ranks-per-node",
                                              help="spread the group: N GPUs per node (1 = one rail across nodes)"),
    op: str = typer.Option("all_reduce", "--op", help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                           "all_to_all, send_recv (also allreduce, alltoall_perf, bcast: as `bench collective`)"),
    min_size: str = typer.Option("8", "--min", help="smallest size (nccl-tests -b), e.g. 8, 1K, 1M"),
    max_size: str = typer.Option("8G", "--max", help="largest size (nccl-tests -e)"),
    step_factor: float = typer.Option(2.0, "--step-factor", help="size multiplier between rows (nccl-tests -f)"),
    algo: str = typer.Option("auto", "--algo", help="auto, ring, tree, nvls, nvls_tree, collnet, hierarchical, "
                             "halving_doubling, direct"),
    proto: str = typer.Option("auto", "--proto", help="auto, LL, LL128, Simple"),
    ib: str | None = typer.Option(None, "--ib", help=fabric_help),
    fabric_kind: str = typer.Option("fat-tree", "--fabric", help="the scale-out design: fat-tree, rail-only, "
                                    "dragonfly or slim-fly (built by --sim flow; the analytical model prices a "
                                    "rail-optimized fat tree, tapered to a dragonfly's or Slim Fly's bisection)"),
    planes: Planes = 1,
    dragonfly_routing: DragonflyRouting = "minimal",
    dtype: str = typer.Option("float", "--dtype", help="element type for the count column"),
    sim: str = typer.Option("analytical", "--sim", help="analytical (NCCL-style closed forms) or flow (the "
                            "algorithm's schedule on the built fat tree, max-min flow simulation)"),
    routing: str | None = typer.Option(None, "--routing", help="needs --sim flow: ecmp (default), adaptive or "
                                       "spray"),
    oversubscription: float = typer.Option(1.0, "--oversubscription", help="leaf ports : uplinks; slows bytes that "
                                           "leave a leaf (analytical: the network share divided by it, as `train`; "
                                           "flow: the built fat tree)"),
    fmt: CollectiveFormat | None = typer.Option(None, "--format", help="table (default), json (SI units), csv, or "
                                                "nccl-tests (nccl-tests' own layout, read back by `bench parse`)"),
    as_json: JsonOpt = False,
    plot: Path | None = typer.Option(None, "--plot", help="write busbw vs size to this PNG"),
    calibration: list[str] = typer.Option([], "--calibration", help="calibration overlay YAML"),
    report: ReportOpt = None,
) -> None:
    """Predict what nccl-tests would measure for one collective across message sizes."""
    from fabricsim.api import collective
    from fabricsim.validation import band_note, band_text

    inputs = command_inputs(locals())
    form = output_format(fmt, as_json)
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    report = check_output_path(report, "--report", REPORT_SUFFIXES)
    result = collective(**api_arguments(collective, inputs))
    prediction, row_bands, name, ngpus = result.prediction, result.row_bands, result.op, result.ranks
    assert prediction is not None and result.model is not None
    if plot is not None:
        from fabricsim.report import plot_collective_sweep

        plot_collective_sweep(result.model, name, prediction, plot)
    write_command_report(report, result, inputs)
    data = result.data
    if form == "nccl-tests":
        from fabricsim.nccltests import format_nccl_tests

        bench = bench_result(prediction, name, ngpus, nodes, result.per_node, result.system)
        typer.echo(format_nccl_tests(bench), nl=False)
        return
    if emit(form, data, inputs, data["rows"]):
        return
    table = new_table(title=f"{name}: {ngpus} GPUs on {nodes} x {result.system}", header_style="bold")
    secondary = ("count", "type", "protocol") if narrow() else ()
    flow = any(r.congestion_s is not None for r in prediction.rows)
    for header in ("size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "busbw 80% band",
                   "congestion", "algorithm", "protocol", "bound"):
        if header in secondary or (header == "congestion" and not flow):
            continue
        if header.startswith(("size", "count", "time", "algbw", "busbw")):
            num_column(table, header)
        else:
            text_column(table, header)
    for r, found in zip(prediction.rows, row_bands, strict=True):
        cells = {"size (B)": str(r.size_bytes), "count": str(r.count), "type": r.dtype,
                 "time (us)": f"{r.time_s * 1e6:.2f}", "algbw (GB/s)": f"{r.algbw_GBps:.2f}",
                 "busbw (GB/s)": f"{r.busbw_GBps:.2f}", "busbw 80% band": band_text(found["busbw_bytes_per_s"], 1e-9),
                 "congestion": "" if r.congestion_s is None else f"{r.congestion_s / r.time_s:.1%}",
                 "algorithm": r.algorithm, "protocol": r.protocol, "bound": r.bound}
        table.add_row(*(v for k, v in cells.items() if k not in secondary and (flow or k != "congestion")))
    console.print(table)
    console.print(data["regime"])
    if flow:
        console.print("congestion: the share of the time beyond the same algorithm and protocol alone on the fabric "
                      "(the flow run uses the analytical model's link rates and step latencies)")
    for note in dict.fromkeys(band_note({"busbw": found["busbw_bytes_per_s"]}) for found in row_bands):
        console.print(note)
    if plot is not None:
        console.print(f"plot written to {plot}")
