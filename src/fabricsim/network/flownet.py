"""The flow simulator behind the `NetworkModel` protocol, and collective schedules timed on it.

`FlowSimNetwork.phase` times one phase of concurrent flows; `time_schedule_flow` runs a whole schedule as one
simulation (phase k starts when phase k-1 has delivered its last byte), so the collectives time on it as they do on
`AnalyticalNetwork` and `LinkLoadNetwork`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.catalog import CongestionControl
from fabricsim.errors import SpecError
from fabricsim.network.budget import guard_flows, report
from fabricsim.network.control import fabric_control
from fabricsim.network.flowcount import route_counted
from fabricsim.network.flowroute import check_routing, route_flows
from fabricsim.network.flowsim import FlowResult, FlowSet, simulate
from fabricsim.network.maxmin import FloatArray, IntArray
from fabricsim.network.models import PhaseLike, PhaseTiming
from fabricsim.topology import Topology, link_kind_name

if TYPE_CHECKING:
    import numpy.typing as npt


def routed_flowset(topology: Topology, src: npt.ArrayLike, dst: npt.ArrayLike, nbytes: npt.ArrayLike,
                   stage: IntArray, stage_release: FloatArray, routing: str = "ecmp",
                   dep_before: IntArray | None = None, dep_after: IntArray | None = None,
                   memory_limit_bytes: int | None = None, count: IntArray | None = None,
                   flow_ids: IntArray | None = None) -> FlowSet:
    """Route flows (src[i] -> dst[i], nbytes[i] bytes, in stage[i]) and bundle them with their stage DAG.

    With `count`, row i stands for count[i] such flows whose flow ids are `flow_ids` (grouped by row, in row
    order): they are routed as classes with multiplicities (`fabricsim.network.flowcount`), exactly as the flows
    one by one would be; `FlowSet.origin` gives each class's row.

    Refuses (SpecError, one line) a run whose estimated peak memory (`fabricsim.network.budget`) exceeds
    `memory_limit_bytes` (default: $FABRICSIM_MEMORY_LIMIT, else the machine's available memory).
    """
    s = np.atleast_1d(np.asarray(src, dtype=np.int64))
    empty = np.zeros(0, dtype=np.int64)
    before = empty if dep_before is None else np.asarray(dep_before, dtype=np.int64)
    after = empty if dep_after is None else np.asarray(dep_after, dtype=np.int64)
    release = np.asarray(stage_release, dtype=np.float64)
    stages = np.asarray(stage)
    if stages.dtype.kind not in "iu":  # kept as given (int32 from traffic): the largest runs hold one per flow
        stages = stages.astype(np.int64)
    if len(s) and (stages.min() < 0 or stages.max() >= len(release)):
        raise SpecError("flow in an unknown stage", field="stage")
    guard_flows(topology, s, dst, stages, len(release), before, after, check_routing(routing), memory_limit_bytes)
    size = np.asarray(nbytes, dtype=np.float64)
    if size.shape != s.shape:
        size = np.broadcast_to(size, s.shape).astype(np.float64)
    if (size < 0).any():
        raise SpecError("flow sizes must be non-negative", field="bytes")
    report("routing", 0, len(s))
    if count is not None and flow_ids is not None:
        r, row, many = route_counted(topology, s, np.asarray(dst, dtype=np.int64), count, flow_ids, routing, size)
        report("routing", len(s), len(s))
        return FlowSet(r.indptr, r.links, r.weights, size[row], r.latency, stages[row], release, before, after,
                       many.astype(np.float64), origin=row)
    r = route_flows(topology, s, dst, routing, sizes=size)
    report("routing", len(s), len(s))
    return FlowSet(r.indptr, r.links, r.weights, size, r.latency, stages, release, before, after)


def stage_timings(topology: Topology, fs: FlowSet, result: FlowResult) -> list[PhaseTiming]:
    """Per stage: its duration and the busiest link (bytes / capacity over the run) of its last-finishing flow."""
    drain = np.divide(result.link_bytes, topology.link_capacity, out=np.zeros(len(result.link_bytes)),
                      where=topology.link_capacity > 0)  # a failed link carries nothing
    out = []
    for k in range(fs.num_stages):
        members = np.flatnonzero(fs.stage == k)
        duration = float(result.stage_finish[k] - result.stage_start[k])
        if len(members) == 0:
            out.append(PhaseTiming(duration, -1, "none"))
            continue
        last = int(members[np.argmax(result.flow_finish[members])])
        path = fs.links[fs.indptr[last]:fs.indptr[last + 1]]
        if len(path) == 0:
            out.append(PhaseTiming(duration, -1, "none"))
            continue
        link = int(path[np.argmax(drain[path])])
        out.append(PhaseTiming(duration, link, link_kind_name(int(topology.link_kind[link]))))
    return out


class FlowSimNetwork:
    """Max-min fair flow-level simulation of a phase (NetworkModel protocol); routing ecmp, adaptive or spray."""

    def __init__(self, routing: str = "ecmp", behaviour: CongestionControl | None = None) -> None:
        self.routing = check_routing(routing)
        self.behaviour = behaviour

    def phase(self, topology: Topology, src: npt.ArrayLike, dst: npt.ArrayLike,
              nbytes: npt.ArrayLike) -> PhaseTiming:
        s = np.atleast_1d(np.asarray(src, dtype=np.int64))
        fs = routed_flowset(topology, s, dst, nbytes, np.zeros(len(s), dtype=np.int64), np.zeros(1), self.routing)
        result = simulate(fs, topology.link_capacity, control=fabric_control(topology, self.behaviour))
        return stage_timings(topology, fs, result)[0]


def time_schedule_flow(topology: Topology, schedule: Sequence[PhaseLike], routing: str = "ecmp",
                       gpus: Sequence[int] | npt.NDArray[np.int64] | None = None,
                       behaviour: CongestionControl | None = None) -> tuple[float, list[PhaseTiming]]:
    """Total time and per-phase timings of a collective schedule on the flow simulator (rank r on gpus[r]), under
    the fabric's behaviour (None: ideal max-min).

    The phases run in order as one simulation; in-network reduction (rank -1: NVLS, SHARP) is not modelled.
    """
    if not schedule:
        return 0.0, []
    nranks = max(int(max(ph.src.max(initial=0), ph.dst.max(initial=0))) for ph in schedule) + 1
    where = np.arange(nranks, dtype=np.int64) if gpus is None else np.asarray(gpus, dtype=np.int64)
    if any((ph.src < 0).any() or (ph.dst < 0).any() for ph in schedule):
        raise SpecError("the flow simulator does not model in-network reduction (NVLS, SHARP) yet", field="--algo")
    if len(where) < nranks:
        raise SpecError(f"schedule has {nranks} ranks but {len(where)} GPUs were given", field="gpus")
    src = np.concatenate([where[ph.src] for ph in schedule])
    dst = np.concatenate([where[ph.dst] for ph in schedule])
    size = np.concatenate([np.broadcast_to(np.asarray(ph.bytes, dtype=np.float64), ph.src.shape)
                           for ph in schedule])
    stage = np.repeat(np.arange(len(schedule), dtype=np.int64), [len(ph.src) for ph in schedule])
    chain = np.arange(len(schedule) - 1, dtype=np.int64)
    fs = routed_flowset(topology, src, dst, size, stage, np.zeros(len(schedule)), routing, chain, chain + 1)
    control = fabric_control(topology, behaviour)
    if control is not None:  # one collective: its phases reuse the same connections
        fs = replace(fs, stage_group=np.zeros(len(schedule), dtype=np.int64))
    result = simulate(fs, topology.link_capacity, control=control)
    return result.makespan, stage_timings(topology, fs, result)
