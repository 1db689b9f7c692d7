"""`fabricsim traffic`: jobs and background traffic on a cluster, simulated at flow level (max-min fair sharing):
per-job completion and bandwidth, link utilisation by tier, the hottest links; optional design-review plots."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.api import cluster_spec, progress_bar, resolved_names
from fabricsim.cli.options import CALIBRATION_LIST, CLUSTER, PRINT, Decl, declared, run_options
from fabricsim.cli.spec_options import TRAFFIC_OPTIONS
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.traffic import TrafficRun


def traffic_json(run: TrafficRun, routing: str, slow: dict[str, float], congestion: str = "ideal",
                 qos: bool = False) -> dict[str, Any]:
    """jobs, links (by tier, hottest), flows, events, wall_s; the fabric behaviour and whether classes were
    separated."""
    from fabricsim.traffic import job_metrics, link_summary
    from fabricsim.validation import unvalidated_band

    none = unvalidated_band(UNVALIDATED).to_json()
    jobs = job_metrics(run)
    for j in jobs:
        if j["name"] in slow:
            j["slowdown"] = slow[j["name"]]
        j.update({f"{k}_band": none for k in ("completion_time_s", "bytes_per_s_per_gpu",
                                               "scale_out_bytes_per_s_per_gpu")})
    return {"routing": routing, "congestion_control": congestion, "qos": qos, "gpus": run.topology.num_gpus,
            "jobs": jobs, "links": link_summary(run),
            "flows": run.flowset.total_flows, "flow_classes": run.flowset.num_flows, "events": run.result.events,
            "makespan_s": run.result.makespan, "makespan_s_band": none, "wall_s": run.wall_s,
            **({"aggregation": SYMMETRIC_NOTE} if run.traffic.symmetric is not None else {})}


SYMMETRIC_NOTE = ("symmetric: every GPU's all-to-all alike, simulated by kinds of flows and links (exact for flows "
                  "split evenly over their equal-cost paths); ECMP as that even split, its hash imbalance not "
                  "modelled at this size")


UNVALIDATED = ("no comparable published measurement: flow-level traffic is checked against the analytical model and "
               "its invariants (bytes conserved, no link above capacity), not against published runs")


def traffic_tables(data: dict[str, Any]) -> list[Table]:
    """Jobs, utilisation by tier, hottest links."""
    behaviour = "" if data.get("congestion_control", "ideal") == "ideal" else f", {data['congestion_control']}"
    qos = ", QoS classes" if data.get("qos") else ""
    jobs = ui.new_table(title=f"traffic: {data['flows']:,} flows, {data['events']:,} events, routing "
                        f"{data['routing']}{behaviour}{qos}, simulated in {data['wall_s']:.2f} s",
                        header_style="bold")
    ui.text_column(jobs, "job")
    for col in ("GPUs", "flows", "completion", "sent/s per GPU", "scale-out/s per GPU", "% of NIC line rate",
                "slowdown"):
        ui.num_column(jobs, col)
    for j in data["jobs"]:
        jobs.add_row(j["name"], f"{j['gpus']:,}", f"{j['flows']:,}", units.format_duration(j["completion_time_s"]),
                     units.format_rate(j["bytes_per_s_per_gpu"]), units.format_rate(j["scale_out_bytes_per_s_per_gpu"]),
                     f"{j['fraction_of_line_rate']:.1%}", f"{j['slowdown']:.2f}x" if "slowdown" in j else "-")
    jobs.caption = ("sent/s: bytes a GPU sent per second of the job's completion time (all peers); scale-out: the "
                    "part that left its node; % of NIC line rate: scale-out over the GPU's share of its node's NICs; "
                    f"error band: {UNVALIDATED}" + (f"; {data['aggregation']}" if "aggregation" in data else ""))
    tiers = ui.new_table(title="link utilisation by tier (links that carried traffic)", header_style="bold")
    ui.text_column(tiers, "tier")
    for col in ("links", "mean", "p99", "max"):
        ui.num_column(tiers, col)
    for name, t in data["links"]["by_tier"].items():
        tiers.add_row(name, f"{t['links']:,}", f"{t['mean']:.1%}", f"{t['p99']:.1%}", f"{t['max']:.1%}")
    hot = ui.new_table(title="hottest links", header_style="bold")
    ui.text_column(hot, "link")
    ui.text_column(hot, "tier")
    ui.num_column(hot, "utilisation")
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


TRAFFIC_OWN: dict[str, Decl] = TRAFFIC_OPTIONS
TRAFFIC_TAIL: dict[str, Decl] = {
    "plot": (Annotated[Path | None, typer.Option("--plot", help="write utilisation-by-tier and slowdown plots (PNG)")],
             None),
    "calibration": CALIBRATION_LIST,
}
TRAFFIC = (CLUSTER, TRAFFIC_OWN, PRINT, TRAFFIC_TAIL)


@declared(*TRAFFIC)
@ui.spec_errors
def traffic_command(**options: Any) -> None:
    """Simulate jobs' traffic at flow level: completion, bandwidth, and which links run hot."""
    from fabricsim.catalog import load_catalog
    from fabricsim.network import check_routing, flow_progress
    from fabricsim.topology import build_topology
    from fabricsim.traffic import (
        JobSpec,
        build_traffic,
        check_pattern,
        check_seed,
        load_jobs_file,
        run_traffic,
        slowdowns,
    )

    inputs, form, plot, _ = run_options(TRAFFIC, options)
    gpus, seed, placement, checkpoint = options["gpus"], options["seed"], options["placement"], options["checkpoint"]
    jobs_file, storage_server = options["jobs_file"], options["storage_server"]
    storage_servers = options["storage_servers"]
    from fabricsim.inputs import parse_buffer_size

    check_seed(seed, "--seed")
    route = check_routing(options["routing"])
    if checkpoint is not None and not checkpoint.strip():
        raise SpecError("empty; name the model (preset or spec file) whose checkpoint the job writes, or leave the "
                        "option out", field="--checkpoint")
    if checkpoint is not None and jobs_file is not None:
        raise SpecError("--checkpoint writes the --pattern job's checkpoint: give it without --jobs (a jobs file "
                        "names its own background)", field="--checkpoint")
    classes: dict[str, float] = {}
    if jobs_file is not None:
        parsed = load_jobs_file(jobs_file)
        jobs, background, storage, classes = parsed.jobs, parsed.background, parsed.storage_nodes, parsed.classes
    else:
        jobs, background, storage = [JobSpec("traffic", -1, check_pattern(options["pattern"]),
                                             float(parse_buffer_size(options["nbytes"], "--bytes")), placement, 0.0,
                                             seed)], [], 0
    spec = cluster_spec(**{name: options[name] for name in CLUSTER})
    catalog = load_catalog(*options["calibration"])
    behaviour = catalog.congestion_control(options["cc"]) if options["cc"] is not None else None
    qos = options["qos"]
    spec = resolved_names(spec, catalog, system=options["system"], nvlink_domain=options["nvlink_domain"],
                          eth=options["eth"], switch=options["switch"])
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
    from fabricsim.topology import degraded, parse_degrade

    degradation = parse_degrade(options["degrade"])
    degradation.check_use(flow=True, compute=False)
    topo = degraded(topo, degradation)
    if ck is not None:
        from fabricsim.cli.traffic_checkpoint import cap_storage_links

        topo = cap_storage_links(topo, ck)
    if jobs_file is None:
        compute_gpus = topo.num_gpus - storage * topo.gpus_per_node
        jobs = [JobSpec("traffic", compute_gpus if gpus is None else gpus, jobs[0].pattern, jobs[0].bytes,
                        placement, 0.0, seed)]
    traffic = build_traffic(topo, jobs, background, storage, classes=classes,
                            symmetric_ok=route == "ecmp" and not degradation.describe())  # degraded: not symmetric
    with flow_progress(None if options["as_json"] or form != "table" else progress_bar()):
        run = run_traffic(topo, traffic, route, behaviour, qos)
        slow = slowdowns(topo, run, route, behaviour, qos) if len(jobs) > 1 or background or plot is not None else {}
    data = traffic_json(run, route, slow, behaviour.id if behaviour is not None else "ideal",
                        qos and len(traffic.classes) > 1)
    data["degraded"] = degradation.describe()
    if ck is not None:
        written = next(j["completion_time_s"] for j in data["jobs"] if j["name"].startswith("checkpoint_write"))
        data["checkpoint"] = {"bytes": ck.checkpoint_bytes, "storage_nodes": ck.storage_nodes,
                              "simulated_write_s": written, "analytical_write_s": ck.analytical_write_s,
                              "storage": ck.bill.model_dump(mode="json")}
    if plot is not None:
        plot_traffic(run, slow, plot, plot_title(inputs, sum(len(g) for g in traffic.gpus.values())))
    if ui.emit(form, data, inputs, data["jobs"]):
        return
    for table in traffic_tables(data):
        ui.console.print(table)
    if data["degraded"]:
        ui.console.print(f"degraded: {', '.join(data['degraded'])}")
    if ck is not None:
        from fabricsim.cli.traffic_checkpoint import checkpoint_line

        ui.console.print(checkpoint_line(ck, data["checkpoint"]["simulated_write_s"]))
    if plot is not None:
        ui.console.print(f"[dim]plots written to {plot}[/]")
