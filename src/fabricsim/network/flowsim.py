"""Event-driven flow-level simulation: flows share links max-min fairly; rates change only at arrivals and departures.

A `FlowSet` is routed flows (a weighted CSR incidence: flow i loads ``links[indptr[i]:indptr[i+1]]`` with
``weights``), their sizes and path latencies, and a DAG of *stages*: every flow belongs to one stage; a stage
starts when all the stages it depends on have finished and its release time has come, and finishes when the last
byte of its last flow has arrived. Collective phases, job steps and background bursts are stages.
A flow occupies its links from its stage's start until its bytes have drained, and completes one path latency
later (so a lone flow takes latency + bytes / slowest link, as `AnalyticalNetwork`).

Between events every active flow runs at its max-min fair rate (`fabricsim.network.fairshare`, tested against the
reference filling in `fabricsim.network.maxmin`); flows whose drain time is within a relative 1e-9 of the next
departure leave together, so symmetric traffic costs one event per wave rather than one per flow. An event that
only sees flows leave refills only the flows at or above the lowest rate that left (every slower flow keeps its
rate: see `fairshare`), and only flows whose rate changed get a new drain time; arrivals refill everything. So
a 1,024-GPU all-to-all under ECMP (1.05M flows, 2,113 events) costs seconds, not one full filling per event.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.network.budget import report
from fabricsim.network.fairshare import fair_rates, unload
from fabricsim.network.maxmin import FloatArray, IntArray, link_loads

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


class _Active:
    """The flows in flight, in aligned arrays: id, rate, solo rate, and the segment since their rate last changed
    (its start time and the bytes left then), so an event touches only the flows whose rate changed: the others'
    drain times stand (`proj`)."""

    def __init__(self, fs: FlowSet, solo: FloatArray) -> None:
        self.fs, self.solo_all = fs, solo
        self.ids = np.zeros(0, dtype=np.int64)
        self.rate, self.solo, self.seg, self.left, self.proj = (np.zeros(0) for _ in range(5))
        self.alive = np.zeros(0, dtype=bool)
        self.dead = 0
        """finished flows still in the arrays (rate 0, never due), compacted away once they are half"""

    def __len__(self) -> int:
        return len(self.ids) - self.dead

    def add(self, new: IntArray, now: float) -> None:
        """Flows starting now (no rate yet: +inf until the next fill)."""
        self.compact()
        k = len(new)
        self.ids = np.concatenate([self.ids, new])
        self.rate = np.concatenate([self.rate, np.full(k, np.inf)])
        self.solo = np.concatenate([self.solo, self.solo_all[new]])
        self.seg = np.concatenate([self.seg, np.full(k, now)])
        self.left = np.concatenate([self.left, self.fs.size[new]])
        self.proj = np.concatenate([self.proj, np.full(k, now)])
        self.alive = np.concatenate([self.alive, np.ones(k, dtype=bool)])

    def bytes_left(self, sel: IntArray | slice, now: float) -> FloatArray:
        rate = self.rate[sel]
        finite = np.isfinite(rate)
        out: FloatArray = self.left[sel].copy()
        out[finite] -= rate[finite] * (now - self.seg[sel][finite])
        return out

    def set_rates(self, rate: FloatArray, now: float, delivered: FloatArray) -> None:
        """New rates from a fill: flows whose rate changed close their segment (bytes delivered) and re-project."""
        changed = np.flatnonzero(rate != self.rate)
        left = self.bytes_left(changed, now)
        delivered[self.ids[changed]] += self.left[changed] - left
        self.left[changed] = left
        self.seg[changed] = now
        self.rate[changed] = rate[changed]
        with np.errstate(divide="ignore"):
            self.proj[changed] = now + left / rate[changed]

    def drop(self, gone: IntArray) -> None:
        """Finished flows: rate 0 (an incremental fill keeps it, and they carry no load), never due."""
        self.rate[gone], self.proj[gone], self.alive[gone] = 0.0, np.inf, False
        self.dead += len(gone)
        if 2 * self.dead > len(self.ids):
            self.compact()

    def compact(self) -> None:
        if self.dead == 0:
            return
        keep = self.alive
        self.alive = self.alive[keep]
        self.ids, self.rate, self.solo = self.ids[keep], self.rate[keep], self.solo[keep]
        self.seg, self.left, self.proj = self.seg[keep], self.left[keep], self.proj[keep]
        self.dead = 0


def simulate(fs: FlowSet, capacity: FloatArray, check: bool = False, incremental: bool = True) -> FlowResult:
    """Run the flows to completion on links of the given capacities (bytes/s); see the module docstring.

    With `check`, every event also records the highest link load over capacity (`FlowResult.max_utilisation`,
    NaN otherwise). `incremental=False` fills every flow again at every event (the reference the incremental
    fills are tested against).
    """
    fs.check(len(capacity))
    n, num_links = fs.num_flows, len(capacity)
    st = _Stages(fs)
    delivered = np.zeros(n)
    start, drained, finish = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    path_len = np.diff(fs.indptr)
    act = _Active(fs, solo_rates(fs, capacity))
    t, events, max_util = 0.0, 0, 0.0 if check else np.nan
    load = np.zeros(num_links)  # bytes/s on each link from the active flows at their current rates
    keep_below = 0.0  # after departures only: flows below the lowest departed rate keep theirs (fairshare)
    changed = False
    retired = [0]

    def retire(ids: IntArray, left: FloatArray, now: float) -> None:
        retired[0] += len(ids)
        delivered[ids] += left
        drained[ids] = now
        finish[ids] = now + fs.latency[ids]
        st.flows_done(fs.stage[ids], finish[ids])

    while len(act) or st.heap:
        if changed:
            if keep_below == 0.0:  # a full fill: forget the previous rates and their load
                act.compact()
                load[:] = 0.0
            prev = np.full(len(act.ids), np.inf) if keep_below == 0.0 else act.rate
            rate = fair_rates(capacity, fs.indptr, fs.links, fs.weights, act.ids, act.solo, prev, keep_below, load)
            act.set_rates(rate, t, delivered)
            if check and len(act):
                idx = gather_entries(fs.indptr, act.ids)
                owner = np.repeat(np.arange(len(act.ids), dtype=np.int64), path_len[act.ids])
                flow_load = link_loads(num_links, fs.links[idx], owner, fs.weights[idx], act.rate)
                max_util = max(max_util, float((flow_load / capacity).max()))
            events += 1
            changed, keep_below = False, np.inf if incremental else 0.0
            report("simulating", retired[0], n)
        first = int(np.argmin(act.proj)) if len(act) else -1
        t_drain = float(act.proj[first]) if len(act) else np.inf
        t_next = min(t_drain, st.next_time())
        if not np.isfinite(t_next):
            raise SpecError("flows cannot progress: a link on their path has no capacity", field="capacity")
        if len(act):
            done = act.proj <= t_next + SAME_TIME_RTOL * t_next
            if t_drain <= t_next:
                done[first] = True  # progress even when the drain time rounds back to now
            if done.any():
                gone = np.flatnonzero(done)
                retire(act.ids[gone], act.left[gone], t_next)  # its last segment's bytes, then none left
                keep_below = min(keep_below, float(act.rate[gone].min()))
                unload(load, fs.indptr, fs.links, fs.weights, act.ids[gone], act.rate[gone])
                act.drop(gone)
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
            instant = (fs.size[ids] == 0) | (path_len[ids] == 0)
            st.finish[stage] = t
            arrivals.append(ids[~instant])
            if instant.any():
                retire(ids[instant], fs.size[ids[instant]], t)
        if arrivals:
            new = np.concatenate(arrivals)
            if len(new):
                act.add(new, t)
                keep_below, changed = 0.0, True  # arrivals can slow every flow: fill them all again
    if np.isnan(st.start).any():
        raise SpecError("flow dependencies form a cycle", field="deps")
    # every flow delivers all its bytes over every link of its path (weighted by its share of each)
    owner = np.repeat(np.arange(n, dtype=np.int64), path_len)
    link_bytes = np.bincount(fs.links, weights=fs.weights * fs.size[owner], minlength=num_links).astype(np.float64)
    return FlowResult(start, drained, finish, delivered, st.start, st.finish, link_bytes, events, max_util)
