"""Event-driven flow-level simulation: flows share links max-min fairly; rates change only at arrivals and departures.

A `FlowSet` is routed flows (a weighted CSR incidence: flow i loads ``links[indptr[i]:indptr[i+1]]`` with
``weights``), their sizes and path latencies, and a DAG of *stages*: every flow belongs to one stage; a stage
starts when all the stages it depends on have finished and its release time has come, and finishes when the last
byte of its last flow has arrived. Collective phases, job steps and background bursts are stages.
A flow occupies its links from its stage's start until its bytes have drained, and completes one path latency
later (so a lone flow takes latency + bytes / slowest link, as `AnalyticalNetwork`).

Between events every active flow runs at its max-min fair rate (`fabricsim.network.maxmin`); flows whose
remaining time is within a relative 1e-9 of the next departure leave together, so symmetric traffic costs one
event per wave rather than one per flow. Each event is a few numpy passes over the active incidence entries.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.network.budget import report
from fabricsim.network.maxmin import FloatArray, IntArray, link_loads, max_min_rates

SAME_TIME_RTOL = 1e-9
"""departures and stage events this close (relative) to the current event are handled in the same batch"""

_ACTIVATE, _COMPLETE = 1, 0  # completions first at equal times, so a successor released now starts now


@dataclass(frozen=True)
class FlowSet:
    """Routed flows, their sizes and path latencies, and the stage DAG that orders them."""

    indptr: IntArray
    links: IntArray
    weights: FloatArray
    """fraction of the flow's rate on each entry's link (1 for a single path)"""
    size: FloatArray
    latency: FloatArray
    stage: IntArray
    """stage of every flow"""
    stage_release: FloatArray
    """earliest start of every stage (s)"""
    dep_before: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dep_after: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """stage dep_after[k] waits for stage dep_before[k]"""

    @property
    def num_flows(self) -> int:
        return len(self.size)

    @property
    def num_stages(self) -> int:
        return len(self.stage_release)

    def check(self, num_links: int) -> None:
        """Raise SpecError on inconsistent arrays (lengths, ranges, negative sizes)."""
        n, s = self.num_flows, self.num_stages
        if len(self.indptr) != n + 1 or len(self.latency) != n or len(self.stage) != n:
            raise SpecError("flow arrays differ in length", field="flows")
        if len(self.links) != len(self.weights) or self.indptr[-1] != len(self.links):
            raise SpecError("flow incidence is inconsistent", field="flows")
        if (self.size < 0).any() or not np.isfinite(self.size).all():
            raise SpecError("flow sizes must be finite and non-negative", field="bytes")
        if len(self.links) and (self.links.min() < 0 or self.links.max() >= num_links):
            raise SpecError("flow crosses an unknown link", field="flows")
        if n and (self.stage.min() < 0 or self.stage.max() >= s):
            raise SpecError("flow in an unknown stage", field="stage")
        deps = np.concatenate([self.dep_before, self.dep_after])
        if len(deps) and (deps.min() < 0 or deps.max() >= s):
            raise SpecError("dependency on an unknown stage", field="deps")


@dataclass(frozen=True)
class FlowResult:
    """What happened: per-flow and per-stage times, bytes per link, events and the worst link load seen."""

    flow_start: FloatArray
    flow_drained: FloatArray
    """time the flow's last byte left the source"""
    flow_finish: FloatArray
    """drained + path latency: the last byte has arrived"""
    delivered: FloatArray
    """bytes each flow moved (integral of its rate): equals its size"""
    stage_start: FloatArray
    stage_finish: FloatArray
    link_bytes: FloatArray
    events: int
    """event times processed (each one recomputes the max-min rates once)"""
    max_utilisation: float
    """highest load / capacity of any link at any event (<= 1 up to rounding); NaN unless simulated with check"""

    @property
    def makespan(self) -> float:
        return float(self.stage_finish.max()) if len(self.stage_finish) else 0.0


def gather_entries(indptr: IntArray, flows: IntArray) -> IntArray:
    """Indices into the incidence arrays of every entry of `flows` (vectorised CSR row gather)."""
    starts = indptr[flows]
    lens = indptr[flows + 1] - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.cumsum(lens) - lens
    out: IntArray = np.arange(total, dtype=np.int64) - np.repeat(first - starts, lens)
    return out


def solo_rates(fs: FlowSet, capacity: FloatArray) -> FloatArray:
    """Each flow's rate alone on its path: its tightest capacity over weight (+inf for an empty path)."""
    out = np.full(fs.num_flows, np.inf)
    nonempty = np.diff(fs.indptr) > 0
    if nonempty.any():
        out[nonempty] = np.minimum.reduceat(capacity[fs.links] / fs.weights, fs.indptr[:-1][nonempty])
    return out


class _Stages:
    """Stage bookkeeping: members, remaining flows, unfinished predecessors, the event heap."""

    def __init__(self, fs: FlowSet) -> None:
        s = fs.num_stages
        self.release = fs.stage_release
        self.order = np.argsort(fs.stage, kind="stable")
        self.ptr = np.searchsorted(fs.stage[self.order], np.arange(s + 1))
        self.left = np.diff(self.ptr)
        self.waiting = np.bincount(fs.dep_after, minlength=s)
        by = np.argsort(fs.dep_before, kind="stable")
        self.succ = fs.dep_after[by]
        self.succ_ptr = np.searchsorted(fs.dep_before[by], np.arange(s + 1))
        self.start = np.full(s, np.nan)
        self.finish = np.full(s, np.nan)
        self.heap: list[tuple[float, int, int]] = [(float(self.release[i]), _ACTIVATE, int(i))
                                                   for i in np.flatnonzero(self.waiting == 0)]
        heapq.heapify(self.heap)

    def next_time(self) -> float:
        return self.heap[0][0] if self.heap else np.inf

    def flows_of(self, stage: int) -> IntArray:
        return self.order[self.ptr[stage]:self.ptr[stage + 1]]

    def flows_done(self, stages: IntArray, finish: FloatArray) -> None:
        """Account finished flows; a stage whose last flow finished schedules its completion."""
        if len(stages) == 0:
            return
        np.fmax.at(self.finish, stages, finish)
        u, c = np.unique(stages, return_counts=True)
        self.left[u] -= c
        for st in u[self.left[u] == 0]:
            heapq.heappush(self.heap, (float(self.finish[st]), _COMPLETE, int(st)))

    def complete(self, stage: int, now: float) -> None:
        """A stage finished: release the successors that waited only for it."""
        nxt = self.succ[self.succ_ptr[stage]:self.succ_ptr[stage + 1]]
        np.subtract.at(self.waiting, nxt, 1)
        for st in nxt[self.waiting[nxt] == 0]:
            heapq.heappush(self.heap, (max(now, float(self.release[st])), _ACTIVATE, int(st)))


def simulate(fs: FlowSet, capacity: FloatArray, check: bool = False) -> FlowResult:
    """Run the flows to completion on links of the given capacities (bytes/s); see the module docstring.

    With `check`, every event also records the highest link load over capacity (`FlowResult.max_utilisation`,
    NaN otherwise).
    """
    fs.check(len(capacity))
    n, num_links = fs.num_flows, len(capacity)
    st = _Stages(fs)
    remaining = fs.size.astype(np.float64, copy=True)
    delivered = np.zeros(n)
    start, drained, finish = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    path_len = np.diff(fs.indptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), path_len)  # flow of every incidence entry
    act = np.zeros(0, dtype=np.int64)  # active flows (global ids)
    el = np.zeros(0, dtype=np.int64)  # incidence entries of the active flows: link, owner flow, weight
    eo = np.zeros(0, dtype=np.int64)
    ew = np.zeros(0)
    solo = solo_rates(fs, capacity)
    pos = np.zeros(n, dtype=np.int64)  # global flow id -> index into act
    rate = np.zeros(0)
    t, events, max_util, changed = 0.0, 0, 0.0 if check else np.nan, False
    retired = [0]

    def retire(ids: IntArray, now: float) -> None:
        retired[0] += len(ids)
        delivered[ids] += remaining[ids]
        remaining[ids] = 0.0
        drained[ids] = now
        finish[ids] = now + fs.latency[ids]
        st.flows_done(fs.stage[ids], finish[ids])

    while len(act) or st.heap:
        if changed:
            pos[act] = np.arange(len(act))
            ef = pos[eo]
            rate = max_min_rates(capacity, el, ef, ew, len(act), solo[act])
            if check and len(el):
                load = link_loads(num_links, el, ef, ew, rate)
                max_util = max(max_util, float((load / capacity).max()))
            events += 1
            changed = False
            report("simulating", retired[0], n)
        ttf = remaining[act] / rate if len(act) else np.zeros(0)
        t_drain = t + float(ttf.min()) if len(act) else np.inf
        t_next = min(t_drain, st.next_time())
        if not np.isfinite(t_next):
            raise SpecError("flows cannot progress: a link on their path has no capacity", field="capacity")
        dt = t_next - t
        if len(act):
            moved = rate * dt
            delivered[act] += moved
            remaining[act] -= moved
            done = ttf <= dt + SAME_TIME_RTOL * t_next
            if t_drain <= t_next:
                done[np.argmin(ttf)] = True  # progress even when t + ttf rounds back to t
            if done.any():
                retire(act[done], t_next)
                stay = ~done[pos[eo]]
                el, eo, ew, act = el[stay], eo[stay], ew[stay], act[~done]
                changed = True
        t = t_next
        horizon = t * (1 + SAME_TIME_RTOL) + 1e-300
        arrivals: list[IntArray] = []
        while st.heap and st.heap[0][0] <= horizon:
            _, kind, stage = heapq.heappop(st.heap)
            if kind == _COMPLETE:
                st.complete(stage, t)
                continue
            st.start[stage] = t
            ids = st.flows_of(stage)
            start[ids] = t
            if len(ids) == 0:
                st.finish[stage] = t
                heapq.heappush(st.heap, (t, _COMPLETE, stage))
                continue
            instant = (remaining[ids] == 0) | (path_len[ids] == 0)
            st.finish[stage] = t
            arrivals.append(ids[~instant])
            if instant.any():
                retire(ids[instant], t)
        if arrivals:
            new = np.concatenate(arrivals)
            if len(new):
                act = np.concatenate([act, new])
                idx = gather_entries(fs.indptr, new)
                el = np.concatenate([el, fs.links[idx]])
                eo = np.concatenate([eo, owner[idx]])
                ew = np.concatenate([ew, fs.weights[idx]])
                changed = True
    if np.isnan(st.start).any():
        raise SpecError("flow dependencies form a cycle", field="deps")
    # every flow delivers all its bytes over every link of its path (weighted by its share of each)
    link_bytes = np.bincount(fs.links, weights=fs.weights * fs.size[owner], minlength=num_links).astype(np.float64)
    return FlowResult(start, drained, finish, delivered, st.start, st.finish, link_bytes, events, max_util)
