"""Collectives timed on the flow-level simulator: an algorithm's schedule of point-to-point phases run on the real
topology and placement (max-min fair sharing of every link), reported in nccl-tests conventions.

The schedule carries the bandwidth term on links modelled as the analytical model models them (achievable rate and
protocol payload, `link_model`); NCCL's per-step latencies, fill and launch floor come from the analytical cost of
the same algorithm and protocol, so with nothing else on the fabric the two agree and the difference is congestion
(`congestion_s`). In-network reductions (NVLS, SHARP) have no flow schedule yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np

from fabricsim.catalog import CongestionControl
from fabricsim.collectives.algorithms import tree_channels
from fabricsim.collectives.conventions import busbw_factor, check_op, dtype_bytes
from fabricsim.collectives.group import GroupShape, group_shape_on
from fabricsim.collectives.link_model import capacity_scale, fixed_seconds, kind_efficiencies
from fabricsim.collectives.model import Choice, CollectiveModel
from fabricsim.collectives.result import CollectiveRow, Prediction
from fabricsim.collectives.schedule import Phase, ring_orders, schedule, schedule_size
from fabricsim.errors import SpecError
from fabricsim.network import (
    check_memory,
    fabric_control,
    flow_count_bound,
    routed_flowset,
    simulate,
    stage_timings,
    time_schedule_flow,
)
from fabricsim.topology import LINK_KINDS, Topology

FLOW_ALGORITHMS = ("ring", "direct", "halving_doubling", "tree", "hierarchical")
SCHEDULE_FLOW_WORDS = 7
"""words a transfer holds before the flow guard sees it: the schedule's source, destination and bytes, and the
joined source, destination, size and phase arrays the flow run is built from"""
SHRINK_HINT = "fewer nodes or ranks per node, or the analytical model (drop --sim flow)"


class StagedFlows(Protocol):
    """Other traffic on the fabric as stages of flows (fabricsim.traffic.jobs.Traffic has this shape)."""

    release: list[float]
    dep_before: list[int]
    dep_after: list[int]

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...

    def class_weights(self) -> np.ndarray: ...

    def stage_classes(self) -> np.ndarray: ...

    def stage_groups(self) -> np.ndarray: ...


def flow_algorithm(op: str, algo: str) -> str:
    """The algorithm whose schedule the flow simulator runs: the one asked for, else ring (direct for all_to_all
    and send_recv), since NCCL's in-network choices (NVLS, SHARP) have no point-to-point schedule."""
    if algo == "auto":
        return "direct" if op in ("all_to_all", "send_recv") else "ring"
    if algo not in FLOW_ALGORITHMS:
        raise SpecError(f"--sim flow runs point-to-point schedules ({', '.join(FLOW_ALGORITHMS)}); {algo!r} reduces "
                        "in the network", field="--algo")
    return algo


def predict_on_flow(topology: Topology, gpus: Sequence[int], op: str, sizes: Sequence[int], algo: str = "auto",
                    routing: str = "ecmp", dtype: str = "float",
                    behaviour: CongestionControl | None = None) -> Prediction:
    """Rows in nccl-tests conventions from flow-simulated schedules of `op` over `gpus` (rank r on gpus[r]), under
    the fabric's behaviour (None: ideal max-min)."""
    name = check_op(op)
    where = np.asarray(gpus, dtype=np.int64)
    per_node = int(np.bincount(where // topology.gpus_per_node).max())
    chosen = flow_algorithm(name, algo)
    shape = group_shape_on(topology, where)
    model = CollectiveModel(shape, catalog=topology.catalog)
    # NCCL's rail-aware rings (one per GPU of a node) and tree channels (one per NIC they use)
    channels = per_node if chosen == "ring" else tree_channels(shape, model.tuning) if chosen == "tree" else 1
    factor, elem = busbw_factor(name, len(where)), dtype_bytes(dtype)
    transfers, phase_count = schedule_size(chosen, name, len(where), per_node, channels)
    check_memory(flow_count_bound(transfers, phase_count, SCHEDULE_FLOW_WORDS), hint=SHRINK_HINT)
    rows = []
    for size in sizes:
        scaled, choice = _modelled_links(topology, shape, model, name, chosen, float(size))
        fixed = fixed_seconds(choice.cost, size)
        phases = schedule(chosen, name, len(where), per_node, float(size), channels=channels)
        moving, timings = time_schedule_flow(scaled, phases, routing, where, behaviour)
        total = max(choice.cost.floor_s, moving + fixed)
        alone = choice.cost.time_s(size)
        bound = max(timings, key=lambda t: t.time_s).bottleneck_kind if timings else "latency"
        algbw = size / total / 1e9 if total > 0 else 0.0
        rows.append(CollectiveRow(op=name, size_bytes=int(size), count=int(size) // elem, dtype=dtype, time_s=total,
                                  algbw_GBps=algbw, busbw_GBps=algbw * factor, algorithm=chosen,
                                  protocol=choice.protocol, bound=bound, congestion_s=max(0.0, total - alone)))
    assumptions = {"op": name, "sim": "flow", "routing": routing,
                   **({"congestion_control": behaviour.id} if behaviour is not None else {}),
                   "ranks": len(where), "nodes": topology.num_nodes,
                   "algorithm": chosen, "topology": {"system": topology.system.id, "switch": topology.fabric_switch.id,
                                                     "tiers": topology.tiers,
                                                     "oversubscription": topology.oversubscription}}
    return Prediction(rows=rows, assumptions=assumptions)


def concurrent_groups_time(topology: Topology, groups: np.ndarray, op: str, size_bytes: float,
                           routing: str = "ecmp", others: StagedFlows | None = None,
                           behaviour: CongestionControl | None = None, qos: bool = True,
                           own_class: int = 0) -> tuple[float, str]:
    """Seconds for every group of `groups` (rows of GPU indices) to run `op` on `size_bytes` at the same time,
    and the link kind of the most loaded link: what a training step's data-parallel or expert-parallel
    collectives do, all groups of a kind together, sharing the fabric (max-min fair flows).

    Pipelined rings keep every ring edge busy at once, so a ring's bytes are one concurrent phase on its edges
    (each edge carries the ring's per-rank wire bytes: 2(n-1)/n S for all_reduce, (n-1)/n S for all_gather /
    reduce_scatter with S the nccl-tests size); NCCL's rail-aware channels (one per GPU of a node) spread them
    over the NICs. all_to_all sends S/n to every peer at once. `others` (other jobs and background traffic,
    placed elsewhere on the same fabric) run alongside, with their own release times, stage order and traffic
    classes (the groups' own: `own_class`; with `qos` each class has its own queue and weight); `behaviour` is the
    fabric's flow and rate control (None: ideal max-min). The time returned is the groups' own.
    """
    name = check_op(op)
    n = groups.shape[1]
    if n < 2 or size_bytes <= 0:
        return 0.0, "nvlink"
    per_node = int(np.bincount(groups[0] // topology.gpus_per_node).max())
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    if name == "all_to_all":
        a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        keep = a != b
        local_src, local_dst, each = a[keep], b[keep], size_bytes / n
    elif name in ("all_reduce", "all_gather", "reduce_scatter"):
        wire = (2.0 if name == "all_reduce" else 1.0) * (n - 1) / n * size_bytes
        orders = ring_orders(n, per_node, per_node)
        local_src = np.concatenate([np.asarray(o) for o in orders])
        local_dst = np.concatenate([np.roll(np.asarray(o), -1) for o in orders])
        each = wire / len(orders)
    else:
        raise SpecError(f"concurrent group timing covers all_reduce, all_gather, reduce_scatter and all_to_all, "
                        f"not {name}", field="op")
    for row in groups:
        src.append(row[local_src])
        dst.append(row[local_dst])
        sizes.append(np.full(len(local_src), each))
    phase = Phase(np.concatenate(src), np.concatenate(dst), np.concatenate(sizes), f"{name} of every group")
    shape = group_shape_on(topology, groups[0])
    topology, choice = _modelled_links(topology, shape, CollectiveModel(shape, catalog=topology.catalog), name,
                                       "direct" if name == "all_to_all" else "ring", size_bytes)
    fixed = fixed_seconds(choice.cost, size_bytes)
    if others is None or not others.release:
        total, timings = time_schedule_flow(topology, [phase], routing, behaviour=behaviour)
        return total + fixed, timings[0].bottleneck_kind if timings else "nvlink"
    o_src, o_dst, o_size, o_stage = others.arrays()
    fs = routed_flowset(topology, np.concatenate([phase.src, o_src]), np.concatenate([phase.dst, o_dst]),
                        np.concatenate([phase.bytes, o_size]),
                        np.concatenate([np.zeros(len(phase.src), dtype=np.int64), o_stage + 1]),
                        np.concatenate([[0.0], np.asarray(others.release, dtype=np.float64)]), routing,
                        np.asarray(others.dep_before, dtype=np.int64) + 1,
                        np.asarray(others.dep_after, dtype=np.int64) + 1)
    control = fabric_control(topology, behaviour, others.class_weights() if qos else None)
    if control is not None:
        fs = replace(fs, stage_class=np.concatenate([[own_class], others.stage_classes()]).astype(np.int64),
                     stage_group=np.concatenate([[0], others.stage_groups() + 1]).astype(np.int64))
    result = simulate(fs, topology.link_capacity, control=control)
    own = stage_timings(topology, fs, result)[0]
    return float(result.stage_finish[0] - result.stage_start[0]) + fixed, own.bottleneck_kind


def _modelled_links(topology: Topology, shape: GroupShape, model: CollectiveModel, op: str, algorithm: str,
                    size_bytes: float) -> tuple[Topology, Choice]:
    """The topology with its links as the analytical model prices ``algorithm`` on the group of ``shape``
    (capacities at the achievable rate and protocol payload, no path latency), and the analytical choice (its
    protocol and cost) whose fixed seconds the flow time adds."""
    choice = model.choose(op, size_bytes, algo=algorithm)
    efficiency = kind_efficiencies(shape, model.tuning, algorithm, op, choice.protocol)
    scaled = replace(topology, link_latency=np.zeros_like(topology.link_latency),
                     link_capacity=topology.link_capacity * capacity_scale(LINK_KINDS, topology.link_kind,
                                                                           efficiency, shape.net_kind))
    return scaled, choice
