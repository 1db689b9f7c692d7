"""`fabricsim collective`: predicted nccl-tests results for one operation over a size sweep."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from fabricsim import units
from fabricsim.cli.output import (
    JsonOpt,
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
)
from fabricsim.cli.topo_options import DragonflyRouting, Planes
from fabricsim.errors import SpecError

if TYPE_CHECKING:

    from fabricsim.bench import BenchResult
    from fabricsim.catalog import GPU, Catalog
    from fabricsim.collectives import Prediction
    from fabricsim.validation import BandResult


class CollectiveFormat(StrEnum):
    """`collective --format`: the table formats plus nccl-tests' own layout (read back by `bench parse`)."""

    table = "table"
    json = "json"
    csv = "csv"
    nccl_tests = "nccl-tests"


def regime_line(prediction: Prediction) -> str:
    """Which resource bounds the sweep where, from each row's `bound`: 'latency-bound up to 32 MiB, nvlink-bound
    from 128 MiB'."""
    segments: list[tuple[str, int, int]] = []
    for r in prediction.rows:
        if segments and segments[-1][0] == r.bound:
            segments[-1] = (r.bound, segments[-1][1], r.size_bytes)
        else:
            segments.append((r.bound, r.size_bytes, r.size_bytes))
    if len(segments) == 1:
        return f"regime: {segments[0][0]}-bound over the whole sweep"
    parts = []
    for i, (bound, lo, hi) in enumerate(segments):
        if i == 0:
            parts.append(f"{bound}-bound up to {units.format_size(hi)}")
        elif i == len(segments) - 1:
            parts.append(f"{bound}-bound from {units.format_size(lo)}")
        else:
            parts.append(f"{bound}-bound {units.format_size(lo)}-{units.format_size(hi)}")
    return "regime: " + ", ".join(parts)


def bench_result(prediction: Prediction, op: str, ngpus: int, nodes: int, per_node: int,
                 system: str) -> BenchResult:
    """The prediction as a benchmark result (both column groups equal), for nccl-tests' layout."""
    from fabricsim.bench import BenchResult, BenchRow, DeviceInfo

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
    fabric: str | None = typer.Option(None, "--ib", help=fabric_help),
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
) -> None:
    """Predict what nccl-tests would measure for one collective across message sizes."""
    from fabricsim.catalog import load_catalog
    from fabricsim.collectives import CollectiveModel, group_shape, parse_op, size_sweep
    from fabricsim.validation import band_fields, band_note, band_text

    inputs = command_inputs(locals())
    form = output_format(fmt, as_json)
    from fabricsim import inputs as checks
    from fabricsim.collectives import dtype_bytes
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    oversubscription = checks.oversubscription(oversubscription)
    kind = fabric_kind.strip().lower()
    from fabricsim.comm import DIRECT_FABRICS

    if (kind not in (*DIRECT_FABRICS, "fat-tree") or planes != 1) and sim != "flow":
        raise SpecError("rail-only and --planes build a fabric for the flow simulator; add --sim flow (the "
                        "analytical model prices a rail-optimized fat tree, which they match for rail-local "
                        "traffic)", field="--fabric")
    if routing is not None and sim != "flow":
        raise SpecError("routing only acts on the flow simulator; add --sim flow (the analytical model has no "
                        "routes)", field="--routing")
    catalog = load_catalog(*calibration)
    sysm = catalog.system(system)
    if nodes < 1:
        raise SpecError(f"need at least 1 node, got {nodes}", field="--nodes")
    per_node = sysm.gpus_per_node if ranks_per_node is None else ranks_per_node
    if not 1 <= per_node <= sysm.gpus_per_node:
        raise SpecError(f"must be 1..{sysm.gpus_per_node} on {sysm.id}, got {per_node}", field="--ranks-per-node")
    total = nodes * per_node
    ngpus = total if gpus is None else gpus
    if not 1 <= ngpus <= total:
        raise SpecError(f"must be 1..{total} ({nodes} node(s) x {per_node}), got {ngpus}", field="--gpus")
    name = parse_op(op)
    element = dtype_bytes(dtype)
    sizes = size_sweep(checks.parse_buffer_size(min_size, "--min", element_bytes=element),
                       checks.parse_buffer_size(max_size, "--max", element_bytes=element), step_factor)
    taper = 1.0
    if nodes > 1:
        from fabricsim.collectives import resolve_fabric_link
        from fabricsim.topology import build_cluster, check_buildable

        link = resolve_fabric_link(catalog, sysm, fabric).id
        check_buildable(sysm.id, nodes, link, oversubscription, catalog, field="--nodes")
        if kind in DIRECT_FABRICS and sim != "flow":  # all_to_all tapered to the network's bisection
            from fabricsim.comm import direct_taper

            taper = direct_taper(build_cluster(sysm.id, nodes=nodes, fabric=kind, link=link, catalog=catalog))
    shape = group_shape(sysm, ngpus, ranks_per_node=ranks_per_node, fabric=fabric,
                        oversubscription=oversubscription, catalog=catalog, uniform_taper=taper)
    model = CollectiveModel(shape, catalog=catalog)
    if sim == "flow":
        from fabricsim.cli.output import progress_bar
        from fabricsim.network import flow_progress

        with flow_progress(progress_bar()):  # on stderr, once a run passes 2 s
            prediction = _flow_prediction(sysm.id, nodes, per_node, ngpus, name, sizes, algo, routing or "ecmp",
                                          fabric, oversubscription, dtype, catalog,
                                          {"fabric": kind, "planes": planes, "dragonfly_routing": dragonfly_routing})
    elif sim == "analytical":
        prediction = model.predict(name, sizes, algo=algo, proto=proto, dtype=dtype)
    else:
        raise SpecError(f"unknown simulator {sim!r}; choose analytical or flow", field="--sim")
    if plot is not None:
        from fabricsim.report import plot_collective_sweep

        plot_collective_sweep(model, name, prediction, plot)
    data = {"op": name, "ranks": ngpus, "nodes": nodes, **prediction.to_json(), "regime": regime_line(prediction)}
    row_bands = _row_bands(prediction, shape.nnodes, name, catalog.gpu(sysm.gpu), calibration)
    for row, found in zip(data["rows"], row_bands, strict=True):
        row.update(band_fields(found))
    if form == "nccl-tests":
        from fabricsim.bench import format_nccl_tests

        typer.echo(format_nccl_tests(bench_result(prediction, name, ngpus, nodes, per_node, sysm.id)), nl=False)
        return
    if emit(form, data, inputs, data["rows"]):
        return
    table = new_table(title=f"{name}: {ngpus} GPUs on {nodes} x {sysm.id}", header_style="bold")
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


def _row_bands(prediction: Prediction, nnodes: int, op: str, gpu: GPU, calibration: list[str]
               ) -> list[dict[str, BandResult]]:
    """Each row's error bands: its time and bandwidths, in the regime its bound puts it in."""
    from fabricsim.validation import bands, collective_regime

    return [bands({"time_s": (r.time_s, True), "algbw_bytes_per_s": (r.algbw_GBps * 1e9, False),
                   "busbw_bytes_per_s": (r.busbw_GBps * 1e9, False)}, collective_regime(nnodes, r.bound, op, gpu),
                  calibration)
            for r in prediction.rows]


def _flow_prediction(system: str, nodes: int, per_node: int, ngpus: int, op: str, sizes: list[int], algo: str,
                     routing: str, fabric: str | None, oversubscription: float, dtype: str,
                     catalog: Catalog, design: dict[str, Any] | None = None) -> Prediction:
    """The sweep on the flow simulator: a fabric of `nodes` nodes (a fat tree unless ``design`` names another
    design, planes or dragonfly routing), the group's GPUs spread `per_node` a node."""
    from fabricsim.collectives import predict_on_flow, resolve_fabric_link
    from fabricsim.topology import build_cluster

    sysm = catalog.system(system)
    link = resolve_fabric_link(catalog, sysm, fabric).id
    topology = build_cluster(system, nodes=nodes, link=link, oversubscription=oversubscription, catalog=catalog,
                             **(design or {"fabric": "fat-tree"}))
    gpus = [node * sysm.gpus_per_node + local for node in range(nodes) for local in range(per_node)][:ngpus]
    return predict_on_flow(topology, gpus, op, sizes, algo=algo, routing=routing, dtype=dtype)
