"""Run traffic on the flow simulator and summarise it: per-job completion and bandwidth, link utilisation by tier,
the hottest links; with several jobs, each job's slowdown against running alone on the same GPUs."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fabricsim.catalog import CongestionControl
from fabricsim.errors import SpecError
from fabricsim.network import (
    FloatArray,
    FlowResult,
    FlowSet,
    IntArray,
    LinkKinds,
    expand_links,
    fabric_control,
    finish_quantiles,
    routed_flowset,
    simulate,
    symmetric_flowset,
)
from fabricsim.topology import ENDPOINT_KINDS, Topology, link_kind_name
from fabricsim.traffic.jobs import Traffic

if TYPE_CHECKING:
    import numpy.typing as npt

HOTTEST = 10


@dataclass(frozen=True)
class TrafficRun:
    """A finished simulation with the inputs needed to summarise it."""

    topology: Topology
    traffic: Traffic
    flowset: FlowSet
    result: FlowResult
    wall_s: float


def run_traffic(topology: Topology, traffic: Traffic, routing: str = "ecmp",
                behaviour: CongestionControl | None = None, qos: bool = True) -> TrafficRun:
    """Route and simulate all the traffic at once, under the fabric's behaviour (None: ideal max-min) and, with
    `qos`, each traffic class in its own queue at its weight (else every class shares one)."""
    t0 = time.perf_counter()
    src, dst, size, stage = traffic.arrays(rows=True)
    deps = np.asarray(traffic.dep_before, dtype=np.int64), np.asarray(traffic.dep_after, dtype=np.int64)
    if traffic.symmetric is not None:
        return _run_symmetric(topology, traffic, traffic.symmetric, routing, behaviour, qos, t0)
    counted = traffic.counted()
    fs = routed_flowset(topology, src, dst, size, stage, np.asarray(traffic.release, dtype=np.float64), routing,
                        *deps, count=None if counted is None else counted[0],
                        flow_ids=None if counted is None else counted[1])
    weights = traffic.class_weights() if qos else None
    control = fabric_control(topology, behaviour, weights)
    if control is not None:
        fs = replace(fs, stage_class=traffic.stage_classes(), stage_group=traffic.stage_groups())
    result = simulate(fs, topology.link_capacity, control=control)
    return TrafficRun(topology, traffic, fs, result, time.perf_counter() - t0)


def _run_symmetric(topology: Topology, traffic: Traffic, kinds: LinkKinds, routing: str,
                   behaviour: CongestionControl | None, qos: bool, t0: float) -> TrafficRun:
    """Symmetric traffic on its quotient (`fabricsim.network.symmetry`): every flow split evenly over its
    equal-cost paths, each link given its kind's bytes."""
    if routing != "ecmp":
        raise SpecError(f"{traffic.num_flows:,} flows are run by symmetry, as ECMP's even split over equal-cost "
                        f"paths; routing {routing!r} needs every flow built: use ecmp or fewer --nodes",
                        field="--routing")
    src, dst, size, stage = traffic.arrays(rows=True)
    many = np.concatenate([c if c is not None else np.ones(len(s), dtype=np.int64)
                           for s, c in zip(traffic.src, traffic.count, strict=True)]).astype(np.float64)
    fs = symmetric_flowset(topology, kinds, src, dst, size, stage, many,
                           np.asarray(traffic.release, dtype=np.float64),
                           np.asarray(traffic.dep_before, dtype=np.int64), np.asarray(traffic.dep_after,
                                                                                      dtype=np.int64))
    control = fabric_control(topology, behaviour, traffic.class_weights() if qos else None)
    if control is not None:
        fs = replace(fs, stage_class=traffic.stage_classes(), stage_group=traffic.stage_groups())
    result = expand_links(kinds, simulate(fs, topology.link_capacity, control=control, by_members=True))
    return TrafficRun(topology, traffic, fs, result, time.perf_counter() - t0)


def link_tiers(topology: Topology) -> list[str]:
    """A tier label per directed link: nic->leaf, leaf->spine, spine->core, ... in the fabric; the link kind
    (nvlink, pcie) inside nodes."""
    names = topology.fabric.tier_names
    nic = ENDPOINT_KINDS.index("nic")

    def end(e: int) -> str:
        t = int(topology.endpoint_tier[e])
        if t >= 0:
            return names[t]
        return "nic" if int(topology.endpoint_kind[e]) == nic else "node"

    src, dst = topology.link_src, topology.link_dst
    code_src = np.where(topology.endpoint_tier[src] >= 0, topology.endpoint_tier[src], -1 - topology.endpoint_kind[src])
    code_dst = np.where(topology.endpoint_tier[dst] >= 0, topology.endpoint_tier[dst], -1 - topology.endpoint_kind[dst])
    keys = np.stack([code_src, code_dst, topology.link_kind.astype(np.int64)], axis=1)
    _, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    table = []
    for i in first:
        a, b = end(int(src[i])), end(int(dst[i]))
        inside = a in ("nic", "node") and b in ("nic", "node")
        table.append(link_kind_name(int(topology.link_kind[i])) if inside else f"{a}->{b}")
    return [table[k] for k in np.asarray(inv).ravel()]


def endpoint_names(topology: Topology, endpoints: IntArray) -> list[str]:
    """Readable names of endpoints: "leaf 12", "spine 3" (numbered within their tier), "node 5 nic 2",
    "node 5 gpu 0" (numbered within their node)."""
    names = topology.fabric.tier_names
    kind, node, tier = topology.endpoint_kind, topology.endpoint_node, topology.endpoint_tier
    out = []
    for e in np.asarray(endpoints, dtype=np.int64).tolist():
        if tier[e] >= 0:
            out.append(f"{names[int(tier[e])]} {int(np.count_nonzero(tier[:e] == tier[e]))}")
            continue
        n = int(node[e])
        same = np.flatnonzero((node == n) & (kind == kind[e]))
        out.append(f"node {n} {ENDPOINT_KINDS[int(kind[e])]} {int(np.searchsorted(same, e))}")
    return out


def job_metrics(run: TrafficRun) -> list[dict[str, Any]]:
    """Per job: completion time from its start, bytes each GPU sent per second (all, and leaving its node), and
    the latter over the GPU's scale-out line rate (its share of the node's NICs)."""
    tr, fs, res = run.traffic, run.flowset, run.result
    owner = np.asarray(tr.owner)
    src, dst, _, _ = tr.arrays(rows=True)
    if len(fs.origin):  # counted rows: each entry is a class of one row's flows
        src, dst = src[fs.origin], dst[fs.origin]
    many = fs.multiplicity if len(fs.multiplicity) else np.ones(fs.num_flows)
    gpn = run.topology.gpus_per_node
    inter = src // gpn != dst // gpn
    line = run.topology.nic_bytes_per_s_per_gpu
    out = []
    for name in dict.fromkeys(tr.owner):
        stages = np.flatnonzero(owner == name)
        members = np.isin(fs.stage, stages)
        begin = float(np.min(np.asarray(tr.release)[stages]))
        done = float(res.stage_finish[stages].max())
        completion = done - begin
        gpus = len(tr.gpus[name]) if name in tr.gpus else len(np.unique(src[members]))
        rate = 1.0 / max(gpus, 1) / completion if completion > 0 else 0.0
        per_gpu = float(_weighted_sum(fs.size, many, members)) * rate
        scale_out = float(_weighted_sum(fs.size, many, members & inter)) * rate
        flows = int(many[members].sum()) if len(fs.multiplicity) else int(members.sum())
        p50, p99, last = finish_quantiles(fs, res, members, begin).tolist()
        out.append({"name": name, "gpus": gpus, "flows": flows, "completion_time_s": completion,
                    "flow_finish_s": {"p50": p50, "p99": p99, "max": last},
                    "bytes_per_s_per_gpu": per_gpu, "scale_out_bytes_per_s_per_gpu": scale_out,
                    "fraction_of_line_rate": scale_out / line})
    return out


def _weighted_sum(size: FloatArray, many: FloatArray, where: npt.NDArray[np.bool_]) -> float:
    """Bytes of the flows `where` selects, each entry counted as its members (all ones: the plain sum, as before)."""
    if (many == 1.0).all():
        return float(size[where].sum())
    return float((size[where] * many[where]).sum())


def utilisation(run: TrafficRun) -> FloatArray:
    """Each link's bytes over what it could carry during the whole run."""
    span = run.result.makespan
    cap = run.topology.link_capacity * span
    u: FloatArray = np.divide(run.result.link_bytes, cap, out=np.zeros(run.topology.num_links), where=cap > 0)
    return u  # a failed link (no capacity) carried nothing: 0


def link_summary(run: TrafficRun, tiers: list[str] | None = None) -> dict[str, Any]:
    """Utilisation by tier (links, mean, p99, max over links that carried traffic) and the hottest links."""
    u = utilisation(run)
    labels = np.asarray(tiers if tiers is not None else link_tiers(run.topology))
    used = run.result.link_bytes > 0
    by_tier = {}
    for tier in dict.fromkeys(labels[used].tolist()):
        x = u[used & (labels == tier)]
        by_tier[tier] = {"links": len(x), "mean": float(x.mean()), "p99": float(np.quantile(x, 0.99)),
                         "max": float(x.max())}
    top = np.asarray([i for i in np.argsort(-u, kind="stable")[:HOTTEST] if u[i] > 0], dtype=np.int64)
    topo = run.topology
    src_names = endpoint_names(topo, topo.link_src[top])
    dst_names = endpoint_names(topo, topo.link_dst[top])
    hottest = [{"link": int(i), "tier": str(labels[i]), "src": int(topo.link_src[i]), "dst": int(topo.link_dst[i]),
                "src_name": a, "dst_name": b, "utilisation": float(u[i])}
               for i, a, b in zip(top.tolist(), src_names, dst_names, strict=True)]
    return {"by_tier": by_tier, "hottest": hottest}


def slowdowns(topology: Topology, run: TrafficRun, routing: str, behaviour: CongestionControl | None = None,
              qos: bool = True) -> dict[str, float]:
    """Each job's completion time together over alone (same GPUs, its own stages only, same fabric behaviour)."""
    together = {j["name"]: j["completion_time_s"] for j in job_metrics(run)}
    tr = run.traffic
    if tr.symmetric is not None:  # one job on every GPU (`symmetric_job`): alone is the same run
        return dict.fromkeys(tr.gpus, 1.0)
    out = {}
    for name in tr.gpus:
        alone = Traffic(classes=dict(tr.classes))
        remap: dict[int, int] = {}
        for k, who in enumerate(tr.owner):
            if who != name:
                continue
            after = [remap[b] for b, a in zip(tr.dep_before, tr.dep_after, strict=True) if a == k and b in remap]
            remap[k] = alone.add_stage(who, tr.release[k], tr.src[k], tr.dst[k], tr.size[k],
                                       after[0] if after else None, list(tr.classes)[tr.stage_class[k]],
                                       tr.count[k], tr.member_ids[k])
        alone.gpus[name] = tr.gpus[name]
        t_alone = job_metrics(run_traffic(topology, alone, routing, behaviour, qos))[0]["completion_time_s"]
        out[name] = together[name] / t_alone if t_alone > 0 else 1.0
    return out
