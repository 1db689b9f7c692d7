"""`fabricsim collective`: predicted nccl-tests results for one operation over a size sweep."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricsim import inputs
from fabricsim.catalog import Catalog, load_catalog
from fabricsim.cli.output import console, print_json, spec_errors
from fabricsim.collectives import CollectiveModel, Prediction, check_op, group_shape, size_sweep
from fabricsim.collectives.conventions import dtype_bytes
from fabricsim.errors import SpecError
from fabricsim.inputs import PLOT_SUFFIXES, check_output_path


@spec_errors
def collective_command(
    system: str = typer.Option("dgx-h100", "--system", help="system preset (see `fabricsim catalog systems`)"),
    nodes: int = typer.Option(1, "--nodes", help="nodes in the job"),
    gpus: int | None = typer.Option(None, "--gpus", help="first N GPUs of the nodes (default: all)"),
    ranks_per_node: int | None = typer.Option(None, "--ranks-per-node",
                                              help="spread the group: N GPUs per node (1 = one rail across nodes)"),
    op: str = typer.Option("all_reduce", "--op", help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                           "all_to_all, send_recv"),
    min_size: str = typer.Option("8", "--min", help="smallest size (nccl-tests -b), e.g. 8, 1K, 1M"),
    max_size: str = typer.Option("8G", "--max", help="largest size (nccl-tests -e)"),
    step_factor: float = typer.Option(2.0, "--step-factor", help="size multiplier between rows (nccl-tests -f)"),
    algo: str = typer.Option("auto", "--algo", help="auto, ring, tree, nvls, nvls_tree, collnet, hierarchical, "
                             "halving_doubling, direct"),
    proto: str = typer.Option("auto", "--proto", help="auto, LL, LL128, Simple"),
    fabric: str | None = typer.Option(None, "--ib", help="network between nodes (ndr, hdr, xdr, eth-400g...); "
                                      "default: the system's NICs"),
    dtype: str = typer.Option("float", "--dtype", help="element type for the count column"),
    sim: str = typer.Option("analytical", "--sim", help="analytical (NCCL-style closed forms) or flow (the "
                            "algorithm's schedule on the built fat tree, max-min flow simulation)"),
    routing: str = typer.Option("ecmp", "--routing", help="with --sim flow: ecmp, adaptive or spray"),
    oversubscription: float = typer.Option(1.0, "--oversubscription", help="with --sim flow: leaf ports : uplinks"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    plot: Path | None = typer.Option(None, "--plot", help="write busbw vs size to this PNG"),
    calibration: list[str] = typer.Option([], "--calibration", help="calibration overlay YAML"),
) -> None:
    """Predict what nccl-tests would measure for one collective across message sizes."""
    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    oversubscription = inputs.oversubscription(oversubscription)
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
    name = check_op(op)
    element = dtype_bytes(dtype)
    sizes = size_sweep(inputs.parse_buffer_size(min_size, "--min", element_bytes=element),
                       inputs.parse_buffer_size(max_size, "--max", element_bytes=element), step_factor)
    if nodes > 1:
        from fabricsim.collectives.group import resolve_fabric_link
        from fabricsim.topology import check_buildable

        check_buildable(sysm.id, nodes, resolve_fabric_link(catalog, sysm, fabric).id, oversubscription, catalog,
                        field="--nodes")
    shape = group_shape(sysm, ngpus, ranks_per_node=ranks_per_node, fabric=fabric, catalog=catalog)
    model = CollectiveModel(shape, catalog=catalog)
    if sim == "flow":
        prediction = _flow_prediction(sysm.id, nodes, per_node, ngpus, name, sizes, algo, routing, fabric,
                                      oversubscription, dtype, catalog)
    elif sim == "analytical":
        prediction = model.predict(name, sizes, algo=algo, proto=proto, dtype=dtype)
    else:
        raise SpecError(f"unknown simulator {sim!r}; choose analytical or flow", field="--sim")
    if plot is not None:
        from fabricsim.report import plot_collective_sweep

        plot_collective_sweep(model, name, prediction, plot)
    if as_json:
        print_json(prediction.to_json())
        return
    table = Table(title=f"{name}: {ngpus} GPUs on {nodes} x {sysm.id}", header_style="bold")
    for header in ("size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algorithm",
                   "protocol", "bound"):
        table.add_column(header, justify="right" if header[0] in "sctab" and header not in ("type",) else "left")
    for r in prediction.rows:
        table.add_row(str(r.size_bytes), str(r.count), r.dtype, f"{r.time_s * 1e6:.2f}", f"{r.algbw_GBps:.2f}",
                      f"{r.busbw_GBps:.2f}", r.algorithm, r.protocol, r.bound)
    console.print(table)
    if plot is not None:
        console.print(f"plot written to {plot}")


def _flow_prediction(system: str, nodes: int, per_node: int, ngpus: int, op: str, sizes: list[int], algo: str,
                     routing: str, fabric: str | None, oversubscription: float, dtype: str,
                     catalog: Catalog) -> Prediction:
    """The sweep on the flow simulator: a fat tree of `nodes` nodes, the group's GPUs spread `per_node` a node."""
    from fabricsim.collectives import predict_on_flow
    from fabricsim.collectives.group import resolve_fabric_link
    from fabricsim.topology import build_cluster

    sysm = catalog.system(system)
    link = resolve_fabric_link(catalog, sysm, fabric).id
    topology = build_cluster(system, nodes=nodes, fabric="fat-tree", link=link, oversubscription=oversubscription,
                             catalog=catalog)
    gpus = [node * sysm.gpus_per_node + local for node in range(nodes) for local in range(per_node)][:ngpus]
    return predict_on_flow(topology, gpus, op, sizes, algo=algo, routing=routing, dtype=dtype)
