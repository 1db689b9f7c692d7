"""`fabricsim traffic`: jobs and background traffic on a cluster, simulated at flow level (max-min fair sharing):
per-job completion and bandwidth, link utilisation by tier, the hottest links; optional design-review plots."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from fabricsim import units
from fabricsim.api import cluster_spec, progress_bar
from fabricsim.cli.goodput_options import StorageServer, StorageServers
from fabricsim.cli.output import (
    FormatOpt,
    JsonOpt,
    command_inputs,
    console,
    emit,
    new_table,
    num_column,
    output_format,
    spec_errors,
    text_column,
)
from fabricsim.cli.topo_options import (
    DragonflyRouting,
    Eth,
    Fabric,
    Ib,
    NodeCable,
    Nodes,
    NodesPerSwitch,
    NvlinkDomain,
    Oversubscription,
    Planes,
    RailOptimized,
    Switch,
    System,
    Tiers,
    TorusDims,
)
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.traffic import TrafficRun


def traffic_json(run: TrafficRun, routing: str, slow: dict[str, float]) -> dict[str, Any]:
    """jobs, links (by tier, hottest), flows, events, wall_s."""
    from fabricsim.traffic import job_metrics, link_summary
    from fabricsim.validation import unvalidated_band

    none = unvalidated_band(UNVALIDATED).to_json()
    jobs = job_metrics(run)
    for j in jobs:
        if j["name"] in slow:
            j["slowdown"] = slow[j["name"]]
        j.update({f"{k}_band": none for k in ("completion_time_s", "bytes_per_s_per_gpu",
                                               "scale_out_bytes_per_s_per_gpu")})
    return {"routing": routing, "gpus": run.topology.num_gpus, "jobs": jobs, "links": link_summary(run),
            "flows": run.flowset.num_flows, "events": run.result.events,
            "makespan_s": run.result.makespan, "makespan_s_band": none, "wall_s": run.wall_s}


UNVALIDATED = ("no comparable published measurement: flow-level traffic is checked against the analytical model and "
               "its invariants (bytes conserved, no link above capacity), not against published runs")


def traffic_tables(data: dict[str, Any]) -> list[Table]:
    """Jobs, utilisation by tier, hottest links."""
    jobs = new_table(title=f"traffic: {data['flows']:,} flows, {data['events']:,} events, routing {data['routing']}, "
                       f"simulated in {data['wall_s']:.2f} s", header_style="bold")
    text_column(jobs, "job")
    for col in ("GPUs", "flows", "completion", "sent/s per GPU", "scale-out/s per GPU", "% of NIC line rate",
                "slowdown"):
        num_column(jobs, col)
    for j in data["jobs"]:
        jobs.add_row(j["name"], f"{j['gpus']:,}", f"{j['flows']:,}", units.format_duration(j["completion_time_s"]),
                     units.format_rate(j["bytes_per_s_per_gpu"]), units.format_rate(j["scale_out_bytes_per_s_per_gpu"]),
                     f"{j['fraction_of_line_rate']:.1%}", f"{j['slowdown']:.2f}x" if "slowdown" in j else "-")
    jobs.caption = ("sent/s: bytes a GPU sent per second of the job's completion time (all peers); scale-out: the "
                    "part that left its node; % of NIC line rate: scale-out over the GPU's share of its node's NICs; "
                    f"error band: {UNVALIDATED}")
    tiers = new_table(title="link utilisation by tier (links that carried traffic)", header_style="bold")
    text_column(tiers, "tier")
    for col in ("links", "mean", "p99", "max"):
        num_column(tiers, col)
    for name, t in data["links"]["by_tier"].items():
        tiers.add_row(name, f"{t['links']:,}", f"{t['mean']:.1%}", f"{t['p99']:.1%}", f"{t['max']:.1%}")
    hot = new_table(title="hottest links", header_style="bold")
    text_column(hot, "link")
    text_column(hot, "tier")
    num_column(hot, "utilisation")
    for h in data["links"]["hottest"]:
        hot.add_row(f"{h['src_name']} -> {h['dst_name']}", h["tier"], f"{h['utilisation']:.1%}")
    return [jobs, tiers, hot]


def plot_title(inputs: dict[str, Any], gpus: int) -> str:
    """The run's parameters for the plot's title: system, nodes, fabric, pattern (or jobs file), bytes, routing."""
    fabric = inputs["fabric"] + "".join(f" {k} {inputs[k]}" for k in ("ib", "eth", "switch") if inputs.get(k))
    if inputs.get("tiers"):
        fabric += f", {inputs['tiers']} tiers"
    if inputs.get("oversubscription", 1.0) != 1.0:
        fabric += f", {inputs['oversubscription']:g}:1"
    what = f"jobs {Path(inputs['jobs_file']).name}" if inputs.get("jobs_file") else \
        f"{Path(inputs['pattern']).name} {inputs['nbytes']}B per GPU on {gpus:,} GPUs"
    return f"{inputs['system']} x {inputs['nodes']} nodes, {fabric}: {what}, {inputs['routing']} routing"


def plot_traffic(run: TrafficRun, slow: dict[str, float], path: Path, title: str = "") -> None:
    """Two panels for a design review: utilisation histogram per fabric tier, and per-job slowdown."""
    import matplotlib
    import numpy as np

    from fabricsim.traffic import link_tiers
    from fabricsim.traffic import utilisation as link_utilisation

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    u = link_utilisation(run)
    tiers = np.asarray(link_tiers(run.topology))
    used = run.result.link_bytes > 0
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for tier in dict.fromkeys(tiers[used].tolist()):
        left.hist(u[used & (tiers == tier)] * 100, bins=20, range=(0, 100), histtype="step", label=tier)
    left.set_xlabel("link utilisation (%)")
    left.set_ylabel("links")
    left.set_yscale("log")
    left.legend(fontsize=7)
    names = list(slow)
    right.bar(names, [slow[n] for n in names])
    right.tick_params(axis="x", labelrotation=30)
    right.axhline(1.0, color="gray", lw=0.8)
    right.set_ylabel("slowdown vs alone")
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@spec_errors
def traffic_command(
    system: System = "dgx-h100",
    nodes: Nodes = 1,
    fabric: Fabric = "fat-tree",
    ib: Ib = None,
    eth: Eth = None,
    switch: Switch = None,
    tiers: Tiers = None,
    rail_optimized: RailOptimized = True,
    oversubscription: Oversubscription = 1.0,
    node_cable: NodeCable = "optical",
    torus_dims: TorusDims = None,
    nodes_per_switch: NodesPerSwitch = 1,
    planes: Planes = 1,
    dragonfly_routing: DragonflyRouting = "minimal",
    nvlink_domain: NvlinkDomain = None,
    pattern: str = typer.Option("all_to_all", "--pattern", help="permutation, all_to_all, ring, incast, "
                                "all_reduce, all_gather, reduce_scatter, or a CSV matrix of bytes (rank x rank)"),
    nbytes: str = typer.Option("1G", "--bytes", help="bytes each GPU sends (K/M/G powers of 1024)"),
    gpus: int | None = typer.Option(None, "--gpus", help="GPUs in the job (default: all)"),
    placement: str = typer.Option("packed", "--placement", help="packed, scattered or random"),
    seed: int = typer.Option(0, "--seed", help="seed of random placements and permutations"),
    routing: str = typer.Option("ecmp", "--routing", help="ecmp (hash per flow), adaptive (by load), spray"),
    jobs_file: Path | None = typer.Option(None, "--jobs", help="YAML of several jobs and background traffic "
                                          "(replaces --pattern/--bytes/--gpus/--placement)"),
    checkpoint: str | None = typer.Option(None, "--checkpoint", help="a model (preset or file) whose checkpoint the "
                                          "job writes, at its start, to converged storage at the fabric's end: "
                                          "simulated beside the job's traffic and compared with the goodput model"),
    storage_server: StorageServer = None,
    storage_servers: StorageServers = None,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
    plot: Path | None = typer.Option(None, "--plot", help="write utilisation-by-tier and slowdown plots (PNG)"),
    calibration: list[str] = typer.Option([], "--calibration", help="overlay YAML applied on top of the catalog"),
) -> None:
    """Simulate jobs' traffic at flow level: completion, bandwidth, and which links run hot."""
    from fabricsim.catalog import load_catalog
    from fabricsim.network import check_routing, flow_progress
    from fabricsim.topology import build_topology
    from fabricsim.traffic import (
        JobSpec,
        build_traffic,
        check_pattern,
        check_seed,
        load_jobs,
        run_traffic,
        slowdowns,
    )

    inputs = command_inputs(locals())
    form = output_format(fmt, as_json)
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path, parse_buffer_size

    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    check_seed(seed, "--seed")
    route = check_routing(routing)
    if checkpoint is not None and not checkpoint.strip():
        raise SpecError("empty; name the model (preset or spec file) whose checkpoint the job writes, or leave the "
                        "option out", field="--checkpoint")
    if checkpoint is not None and jobs_file is not None:
        raise SpecError("--checkpoint writes the --pattern job's checkpoint: give it without --jobs (a jobs file "
                        "names its own background)", field="--checkpoint")
    if jobs_file is not None:
        jobs, background, storage = load_jobs(jobs_file)
    else:
        jobs, background, storage = [JobSpec("traffic", -1, check_pattern(pattern),
                                             float(parse_buffer_size(nbytes, "--bytes")), placement, 0.0,
                                             seed)], [], 0
    spec = cluster_spec(system, nodes, fabric, ib, eth, switch, tiers, rail_optimized, oversubscription, node_cable,
                        torus_dims, nodes_per_switch, planes, dragonfly_routing, nvlink_domain)
    catalog = load_catalog(*calibration)
    ck = None
    if checkpoint is not None:
        from fabricsim.cli.traffic_checkpoint import checkpoint_traffic

        job_gpus = spec.nodes * catalog.system(spec.system).gpus_per_node if gpus is None else gpus
        ck = checkpoint_traffic(spec, catalog, checkpoint, "traffic", job_gpus, storage_server, storage_servers)
        background, storage = [ck.background], ck.storage_nodes
        spec = spec.model_copy(update={"nodes": spec.nodes + ck.storage_nodes})
    elif storage_server is not None or storage_servers is not None:
        raise SpecError("--storage-server and --storage-servers size the storage --checkpoint writes to",
                        field="--storage-servers" if storage_servers is not None else "--storage-server")
    topo = build_topology(spec, catalog)
    if ck is not None:
        from fabricsim.cli.traffic_checkpoint import cap_storage_links

        topo = cap_storage_links(topo, ck)
    if jobs_file is None:
        compute_gpus = topo.num_gpus - storage * topo.gpus_per_node
        jobs = [JobSpec("traffic", compute_gpus if gpus is None else gpus, jobs[0].pattern, jobs[0].bytes,
                        placement, 0.0, seed)]
    traffic = build_traffic(topo, jobs, background, storage)
    with flow_progress(None if as_json or form != "table" else progress_bar()):
        run = run_traffic(topo, traffic, route)
        slow = slowdowns(topo, run, route) if len(jobs) > 1 or background or plot is not None else {}
    data = traffic_json(run, route, slow)
    if ck is not None:
        written = next(j["completion_time_s"] for j in data["jobs"] if j["name"].startswith("checkpoint_write"))
        data["checkpoint"] = {"bytes": ck.checkpoint_bytes, "storage_nodes": ck.storage_nodes,
                              "simulated_write_s": written, "analytical_write_s": ck.analytical_write_s,
                              "storage": ck.bill.model_dump(mode="json")}
    if plot is not None:
        plot_traffic(run, slow, plot, plot_title(inputs, sum(len(g) for g in traffic.gpus.values())))
    if emit(form, data, inputs, data["jobs"]):
        return
    for table in traffic_tables(data):
        console.print(table)
    if ck is not None:
        from fabricsim.cli.traffic_checkpoint import checkpoint_line

        console.print(checkpoint_line(ck, data["checkpoint"]["simulated_write_s"]))
    if plot is not None:
        console.print(f"[dim]plots written to {plot}[/]")
