"""`fabricsim.collective`: what nccl-tests would measure for one collective over a size sweep (analytical or on the
flow simulator), each row with its error band; the engine of `fabricsim collective`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from fabricsim import units
from fabricsim.api.result import Result
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from fabricsim.api.specs import CollectiveRun
    from fabricsim.catalog import GPU, Catalog, CongestionControl
    from fabricsim.collectives import CollectiveModel, GroupShape, Prediction
    from fabricsim.topology import Degradation
    from fabricsim.validation import BandResult


@dataclass(frozen=True, repr=False)
class CollectiveResult(Result):
    """A predicted size sweep: ``prediction.rows`` (size, time, algbw, busbw, algorithm, protocol, bound), each
    row's bands (``row_bands``) and the regime line; ``to_frame()`` is the rows."""

    command: ClassVar[str] = "collective"

    prediction: Prediction | None = None
    model: CollectiveModel | None = None
    row_bands: list[dict[str, BandResult]] = field(default_factory=list)
    op: str = ""
    ranks: int = 0
    per_node: int = 0
    system: str = ""

    def headline(self) -> dict[str, Any]:
        assert self.prediction is not None
        last = self.prediction.rows[-1]
        return {"op": self.op, "ranks": self.ranks, "max_size_bytes": last.size_bytes,
                "busbw_bytes_per_s": last.busbw_GBps * 1e9, "regime": self.data["regime"]}


def run_collective(run: CollectiveRun, inputs: dict[str, Any]) -> CollectiveResult:
    """`fabricsim.collective` (generated in `fabricsim.api.calls` from `CollectiveRun`): the sweep's rows and
    their bands; ``inputs`` the call's keyword arguments as given, the result's ``inputs`` echo."""
    o = run
    system, nodes, gpus, ranks_per_node, op, algo, proto, ib = (o.system, o.nodes, o.gpus, o.ranks_per_node, o.op,
                                                                o.algo, o.proto, o.ib)
    planes, dragonfly_routing, dtype, sim, routing = o.planes, o.dragonfly_routing, o.dtype, o.sim, o.routing
    calibration = list(o.calibration)
    from fabricsim import inputs as checks
    from fabricsim.catalog import load_catalog
    from fabricsim.collectives import CollectiveModel, dtype_bytes, group_shape, parse_op, scaled, size_sweep
    from fabricsim.validation import band_fields

    oversubscription = checks.oversubscription(o.oversubscription)
    kind = o.fabric_kind.strip().lower()
    from fabricsim.comm import DIRECT_FABRICS

    check_fabric_options(kind, planes, dragonfly_routing, sim)
    if routing is not None and sim != "flow":
        raise SpecError("routing only acts on the flow simulator; add --sim flow (the analytical model has no "
                        "routes)", field="--routing")
    if o.cc is not None and sim != "flow":
        raise SpecError("a fabric's congestion behaviour acts on the flow simulator; add --sim flow (the analytical "
                        "model shares no links)", field="--cc")
    catalog = load_catalog(*calibration)
    behaviour = catalog.congestion_control(o.cc) if o.cc is not None else None  # resolved once, here
    from fabricsim.topology import job_nic_fraction, parse_degrade

    degradation = parse_degrade(o.degrade)
    degradation.check_use(flow=sim == "flow", compute=False)
    sysm = catalog.system(system, field="--system")
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
    sizes = size_sweep(checks.parse_buffer_size(o.min_size, "--min", element_bytes=element),
                       checks.parse_buffer_size(o.max_size, "--max", element_bytes=element), o.step_factor)
    taper = 1.0
    if nodes > 1:
        from fabricsim.collectives import resolve_fabric_link
        from fabricsim.topology import build_cluster, check_buildable

        link = resolve_fabric_link(catalog, sysm, ib).id
        check_buildable(sysm.id, nodes, link, oversubscription, catalog, field="--nodes")
        if kind in DIRECT_FABRICS and sim != "flow":  # all_to_all tapered to the network's bisection
            from fabricsim.comm import direct_taper

            taper = direct_taper(build_cluster(sysm.id, nodes=nodes, fabric=kind, link=link, catalog=catalog))
    shape = group_shape(sysm, ngpus, ranks_per_node=ranks_per_node, fabric=ib,
                        oversubscription=oversubscription, catalog=catalog, uniform_taper=taper)
    slow_nic = job_nic_fraction(degradation, nodes)
    degradation.check_parts(ngpus, nodes)
    if slow_nic < 1.0 and shape.nnodes > 1:  # NCCL splits evenly over its channels: the slowest NIC paces them
        shape = scaled(shape, net=slow_nic)
    shape, algo, sharp = _sharp_tree(shape, catalog, o.sharp_jobs, algo)
    shared = _shared_link(o.background, o.qos_weights, sim)
    if shared < 1.0 and shape.nnodes > 1:
        shape = scaled(shape, net=shared)
    model = CollectiveModel(shape, catalog=catalog)
    if sim == "flow":
        from fabricsim.api.progress import progress_bar
        from fabricsim.network import flow_progress

        with flow_progress(progress_bar()):  # on stderr, once a run passes 2 s
            prediction = _flow_prediction(sysm.id, nodes, per_node, ngpus, name, sizes, algo, routing or "ecmp",
                                          ib, oversubscription, dtype, catalog,
                                          {"fabric": kind, "planes": planes, "dragonfly_routing": dragonfly_routing},
                                          behaviour, degradation)
    elif sim == "analytical":
        prediction = model.predict(name, sizes, algo=algo, proto=proto, dtype=dtype)
    else:
        raise SpecError(f"unknown simulator {sim!r}; choose analytical or flow", field="--sim")
    data = {"op": name, "ranks": ngpus, "nodes": nodes, **prediction.to_json(), "regime": regime_line(prediction),
            "degraded": degradation.describe(), **({"sharp": sharp} if sharp is not None else {}),
            **({"network_share": shared} if o.background else {})}
    row_bands = _row_bands(prediction, shape.nnodes, name, catalog.gpu(sysm.gpu), calibration)
    for row, found in zip(data["rows"], row_bands, strict=True):
        row.update(band_fields(found))
    return CollectiveResult(inputs, data, rows=data["rows"], prediction=prediction, model=model,
                            row_bands=row_bands, op=name, ranks=ngpus, per_node=per_node, system=sysm.id)


def _shared_link(load: float, weights: str | None, sim: str) -> float:
    """The network share the collective keeps beside a neighbour wanting `load` of every link (analytical only: the
    flow simulator takes the neighbour as traffic, `train --sim flow --jobs`)."""
    from fabricsim.collectives import background_share
    from fabricsim.inputs import finite

    load = finite(load, "--background", low=0.0, high=1.0)
    if weights is not None and not load:
        raise SpecError("weights share a link with a neighbour: give its load with --background", field="--qos-weights")
    if load and sim == "flow":
        raise SpecError("the flow simulator takes a neighbour as traffic (traffic or train --jobs); --background is "
                        "the analytical model's", field="--background")
    pair = (1.0, 1.0)
    if weights is not None:
        try:
            own, other = (float(x) for x in weights.split(":"))
        except ValueError:
            own = other = float("nan")
        if not (0 < own < float("inf") and 0 < other < float("inf")):
            raise SpecError(f"{weights!r}: write OWN:NEIGHBOUR, two positive weights (e.g. 4:1)",
                            field="--qos-weights")
        pair = (own, other)
    return background_share(load, pair)


def _sharp_tree(shape: GroupShape, catalog: Catalog, jobs: int, algo: str
                ) -> tuple[GroupShape, str, dict[str, Any] | None]:
    """Whether the group gets a SHARP tree when `jobs` jobs want one through its leaf switches: without one the
    group reduces as without SHARP, and --algo collnet falls back to NCCL's choice (None: no SHARP fabric)."""
    from dataclasses import replace

    from fabricsim.collectives import sharp_refusal

    if jobs < 1:
        raise SpecError(f"at least 1 (this job), got {jobs}", field="--sharp-jobs")
    if not shape.sharp or shape.fabric_switch_id is None:
        return shape, algo, None
    reason = sharp_refusal(catalog.switch(shape.fabric_switch_id), jobs)
    if reason is None:
        return shape, algo, {"tree": True, "jobs": jobs}
    fallback = "auto" if algo.strip().lower() == "collnet" else algo
    note = reason + ("; --algo collnet falls back to NCCL's next choice" if fallback != algo else "")
    return replace(shape, sharp=False), fallback, {"tree": False, "jobs": jobs, "note": note}


def check_fabric_options(kind: str, planes: int, dragonfly_routing: str, sim: str) -> None:
    """--fabric, --planes and --dragonfly-routing as `topo` takes them; without --sim flow only what the analytical
    model prices: a rail-optimized fat tree, tapered to a dragonfly's or Slim Fly's bisection."""
    from fabricsim.api.topology import check_design
    from fabricsim.comm import DIRECT_FABRICS
    from fabricsim.topology import FABRICS

    if kind not in FABRICS:
        raise SpecError(f"unknown fabric {kind!r}; allowed: {', '.join(FABRICS)}", field="--fabric")
    check_design(kind, planes, dragonfly_routing, sim=sim)
    if sim == "flow":
        return
    if kind == "rail-only":
        raise SpecError("a rail-only network is built only by the flow simulator: add --sim flow (the analytical "
                        "model prices a rail-optimized fat tree, which rail-only matches for rail-local traffic)",
                        field="--fabric")
    if kind not in (*DIRECT_FABRICS, "fat-tree"):
        raise SpecError(f"the analytical model prices fat-tree-like fabrics (a rail-optimized fat tree, tapered to a "
                        f"dragonfly's or Slim Fly's bisection); a {kind} is priced only on the flow simulator: add "
                        "--sim flow", field="--fabric")
    if planes != 1:
        raise SpecError("a multi-plane fabric is built only by the flow simulator: add --sim flow (the analytical "
                        "model prices one rail-optimized fat tree, which planes match for rail-local traffic)",
                        field="--planes")


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
                     catalog: Catalog, design: dict[str, Any] | None = None,
                     behaviour: CongestionControl | None = None,
                     degradation: Degradation | None = None) -> Prediction:
    """The sweep on the flow simulator: a fabric of `nodes` nodes (a fat tree unless ``design`` names another
    design, planes or dragonfly routing), the group's GPUs spread `per_node` a node, under the fabric's behaviour
    (None: ideal max-min)."""
    from fabricsim.collectives import predict_on_flow, resolve_fabric_link
    from fabricsim.topology import build_cluster

    sysm = catalog.system(system, field="--system")
    link = resolve_fabric_link(catalog, sysm, fabric).id
    topology = build_cluster(system, nodes=nodes, link=link, oversubscription=oversubscription, catalog=catalog,
                             **(design or {"fabric": "fat-tree"}))
    if degradation:
        from fabricsim.topology import degraded

        topology = degraded(topology, degradation)
    gpus = [node * sysm.gpus_per_node + local for node in range(nodes) for local in range(per_node)][:ngpus]
    return predict_on_flow(topology, gpus, op, sizes, algo=algo, routing=routing, dtype=dtype, behaviour=behaviour)
