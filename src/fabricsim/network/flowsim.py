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
from fabricsim.network.control import HELD_REFILL_SHARE, FabricControl, ReactionClock, controlled_rates
from fabricsim.network.fairshare import NONE, FillScratch, fill_rates, link_bytes, unload
from fabricsim.network.flowclass import flow_classes
from fabricsim.network.maxmin import LEVEL_RTOL, FloatArray, IntArray, gather_entries, index_dtype, link_loads
from fabricsim.network.mintree import MinTree

SAME_TIME_RTOL = 1e-9
"""departures and stage events this close (relative) to the current event are handled in the same batch"""
CONTROLLED_DRAIN_RTOL = 1e-4
"""under a fabric control, flows that would drain this close (relative) after the current event leave with it:
held rates differ flow by flow, so drain times that ideal sharing keeps in a few waves spread over every flow
(a 1,024-GPU all-to-all under `ib`: 48,015 events at 1e-9, 361 at this; each flow finishes at most this share
of the run early)"""

_ACTIVATE, _COMPLETE = 1, 0  # completions first at equal times, so a successor released now starts now


@dataclass(frozen=True)
class FlowSet:
    """Routed flows, their sizes and path latencies, and the stage DAG that orders them."""

    indptr: IntArray
    links: IntArray
    weights: FloatArray
    """fraction of the flow's rate on each entry's link; empty when every flow takes one path (all 1)"""
    size: FloatArray
    latency: FloatArray
    stage: IntArray
    """stage of every flow"""
    stage_release: FloatArray
    """earliest start of every stage (s)"""
    dep_before: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dep_after: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """stage dep_after[k] waits for stage dep_before[k]"""
    multiplicity: FloatArray = field(default_factory=lambda: np.zeros(0))
    """identical flows each entry stands for (a flow class: `fabricsim.network.flowclass`); empty: one each"""
    stage_class: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """traffic class of every stage (a job's, a background transfer's); empty: all class 0"""
    stage_group: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """connections of every stage (a job's stages reuse its connections, so rate control's state carries over:
    `fabricsim.network.control`); empty: each stage its own"""
    origin: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """row of the traffic each entry was routed from (counted rows: `fabricsim.network.flowcount`); empty: entry i
    is row i"""

    @property
    def total_flows(self) -> int:
        """Flows the entries stand for (their multiplicities summed)."""
        return int(self.multiplicity.sum()) if len(self.multiplicity) else self.num_flows

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
        if len(self.weights) not in (0, len(self.links)) or self.indptr[-1] != len(self.links):
            raise SpecError("flow incidence is inconsistent", field="flows")
        if (self.size < 0).any() or not np.isfinite(self.size).all():
            raise SpecError("flow sizes must be finite and non-negative", field="bytes")
        if len(self.links) and (self.links.min() < 0 or self.links.max() >= num_links):
            raise SpecError("flow crosses an unknown link", field="flows")
        if n and (self.stage.min() < 0 or self.stage.max() >= s):
            raise SpecError("flow in an unknown stage", field="stage")
        if len(self.stage_class) not in (0, s) or (len(self.stage_class) and self.stage_class.min() < 0):
            raise SpecError("every stage needs one traffic class, 0 or more", field="stage_class")
        if len(self.stage_group) not in (0, s) or (len(self.stage_group) and self.stage_group.min() < 0):
            raise SpecError("every stage needs one connection group, 0 or more", field="stage_group")
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


def entry_weights(fs: FlowSet, idx: IntArray) -> FloatArray:
    """The weights of incidence entries `idx` (ones where the flow set has none)."""
    out: FloatArray = np.ones(len(idx)) if len(fs.weights) == 0 else fs.weights[idx]
    return out


class _Stages:
    """Stage bookkeeping: members, remaining flows, unfinished predecessors, the event heap."""

    def __init__(self, fs: FlowSet) -> None:
        s = fs.num_stages
        self.release = fs.stage_release
        self.order = np.argsort(fs.stage, kind="stable").astype(index_dtype(fs.num_flows))
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
    """The flows in flight, in aligned slots: id, rate, and the segment since their rate last changed
    (its start time and the bytes left then), with min trees over their drain times and negated rates: an event
    touches the flows that leave and those whose rate changes, not every flow in flight. Finished flows stay in
    their slots (never due, rate 0) until they are half of them."""

    def __init__(self, fs: FlowSet) -> None:
        self.fs = fs
        self.ids = np.zeros(0, dtype=index_dtype(fs.num_flows))
        self.rate, self.seg, self.left, self.proj = (np.zeros(0) for _ in range(4))
        self.alive = np.zeros(0, dtype=bool)
        self.dead = 0
        self.due_tree, self.rate_tree = MinTree(self.proj), MinTree(self.rate, negate=True)

    def __len__(self) -> int:
        return len(self.ids) - self.dead

    def _trees(self) -> None:
        """Rebuild both trees from the slots (every slot is alive: called after compaction)."""
        self.due_tree.rebuild(self.proj)
        self.rate_tree.rebuild(self.rate, negate=True)

    def add(self, new: IntArray, now: float) -> None:
        """Flows starting now (no rate yet: +inf until the next fill, which must fill every slot)."""
        self.compact(rebuild=False)
        k = len(new)
        fresh = (np.asarray(new, dtype=self.ids.dtype), np.full(k, np.inf), np.full(k, now), self.fs.size[new],
                 np.full(k, now), np.ones(k, dtype=bool))
        if len(self.ids) == 0:
            self.ids, self.rate, self.seg, self.left, self.proj, self.alive = fresh
        else:
            self.ids, self.rate, self.seg, self.left, self.proj, self.alive = (
                np.concatenate([old, add]) for old, add in zip((self.ids, self.rate, self.seg, self.left,
                                                                self.proj, self.alive), fresh, strict=True))
        del fresh
        self._trees()

    def set_all_rates(self, rate: FloatArray, now: float) -> None:
        """Rates from a full fill of every slot (all alive, none with a rate before: nothing delivered yet in
        this segment)."""
        self.rate = rate
        self.seg[:] = now
        with np.errstate(divide="ignore"):
            np.divide(self.left, rate, out=self.proj)
        self.proj += now
        self._trees()

    def due(self, horizon: float) -> IntArray:
        """Slots of the flows that drain by `horizon`."""
        return self.due_tree.at_or_below(horizon)

    def at_or_above(self, level: float) -> IntArray:
        """Slots of the flows in flight running at `level` or faster."""
        return self.rate_tree.at_or_below(-level)

    def set_rates(self, slots: IntArray, rate: FloatArray, now: float, delivered: FloatArray) -> None:
        """New rates from a fill: flows whose rate changed close their segment (bytes delivered) and re-project."""
        moved = rate != self.rate[slots]
        changed, rate = slots[moved], rate[moved]
        old = self.rate[changed]
        left = self.left[changed].copy()
        ran = np.isfinite(old)
        left[ran] -= old[ran] * (now - self.seg[changed][ran])
        delivered[self.ids[changed]] += self.left[changed] - left
        self.left[changed] = left
        self.seg[changed] = now
        self.rate[changed] = rate
        with np.errstate(divide="ignore"):
            self.proj[changed] = now + left / rate
        self.due_tree.set(changed, self.proj[changed])
        self.rate_tree.set(changed, -rate)

    def drop(self, gone: IntArray) -> None:
        """Finished flows: rate 0 (they carry no load), never due."""
        self.rate[gone], self.proj[gone], self.alive[gone] = 0.0, np.inf, False
        self.due_tree.set(gone, np.full(len(gone), np.inf))
        self.rate_tree.set(gone, np.full(len(gone), np.inf))
        self.dead += len(gone)
        if 2 * self.dead > len(self.ids):
            self.compact()

    def settle(self, now: float, delivered: FloatArray) -> None:
        """Close every flow's segment at `now` (bytes delivered so far) and drop finished slots: before a full
        fill, which forgets every rate."""
        self.compact(rebuild=False)
        ran = np.flatnonzero(np.isfinite(self.rate))
        if len(ran):
            moved = self.rate[ran] * (now - self.seg[ran])
            delivered[self.ids[ran]] += moved
            self.left[ran] -= moved
        self.seg[:] = now
        self.rate[:] = np.inf

    def compact(self, rebuild: bool = True) -> None:
        if self.dead == 0:
            return
        keep = self.alive
        self.ids, self.rate = self.ids[keep], self.rate[keep]
        self.seg, self.left, self.proj = self.seg[keep], self.left[keep], self.proj[keep]
        self.alive = self.alive[keep]
        self.dead = 0
        if rebuild:
            self._trees()


def simulate(fs: FlowSet, capacity: FloatArray, check: bool = False, incremental: bool = True,
             aggregate: bool = True, control: FabricControl | None = None, by_members: bool = False) -> FlowResult:
    """Run the flows to completion on links of the given capacities (bytes/s); see the module docstring.

    With `check`, every event also records the highest link load over capacity (`FlowResult.max_utilisation`,
    NaN otherwise). `incremental=False` fills every flow again at every event, and `aggregate=False` runs every
    flow on its own instead of one per class of identical flows (`fabricsim.network.flowclass`): the references
    the faster runs are tested against. `control` applies a fabric's back-pressure, rate-control delay and
    traffic classes (`fabricsim.network.control`); without one, links share ideally (max-min). `by_members`: the
    controlled refill after departures (`HELD_REFILL_SHARE`) counts the flows each entry stands for
    (`FlowSet.multiplicity`), as the run of every flow on its own would, not the entries (a quotient's classes:
    `fabricsim.network.symmetry`).
    """
    fs.check(len(capacity))
    classes = flow_classes(fs.indptr, fs.links, fs.weights, fs.size, fs.stage) \
        if aggregate and len(fs.multiplicity) == 0 else None
    if classes is None:
        return _simulate(fs, capacity, check, incremental, control, by_members)
    first, cls = classes
    rows = gather_entries(fs.indptr, first)
    indptr = np.zeros(len(first) + 1, dtype=np.int64)
    np.cumsum(fs.indptr[first + 1] - fs.indptr[first], out=indptr[1:])
    latency = np.zeros(len(first))
    np.maximum.at(latency, cls, fs.latency)  # a class's stage waits for its slowest member's last byte
    merged = FlowSet(indptr, fs.links[rows], fs.weights[rows] if len(fs.weights) else fs.weights, fs.size[first],
                     latency, fs.stage[first], fs.stage_release, fs.dep_before, fs.dep_after,
                     np.bincount(cls, minlength=len(first)).astype(np.float64), fs.stage_class, fs.stage_group)
    res = _simulate(merged, capacity, check, incremental, control)
    drained = res.flow_drained[cls]
    return FlowResult(res.stage_start[fs.stage], drained, drained + fs.latency, res.delivered[cls], res.stage_start,
                      res.stage_finish, res.link_bytes, res.events, res.max_utilisation)


def _simulate(fs: FlowSet, capacity: FloatArray, check: bool, incremental: bool,
              control: FabricControl | None = None, by_members: bool = False) -> FlowResult:
    """The event loop of `simulate` over flows (or flow classes: `FlowSet.multiplicity`)."""
    n, num_links = fs.num_flows, len(capacity)
    st = _Stages(fs)
    delivered = np.zeros(n)
    drained = np.full(n, np.nan)  # start and finish follow at the end: the stage's start, drained + latency
    act = _Active(fs)
    t, events, max_util = 0.0, 0, 0.0 if check else np.nan
    scratch = FillScratch(num_links)
    load = np.zeros(num_links)  # bytes/s on each link from the active flows at their current rates
    keep_below = 0.0  # after departures only: flows below the lowest departed rate keep theirs (fairshare)
    changed = False
    retired = [0]
    # a fabric control: flows run held by back-pressure while their sources are unthrottled (`ReactionClock`), and
    # by class where classes have weights; both fill every flow (the ideal fill's `load` is stale after them)
    flow_class = fs.stage_class[fs.stage] if control is not None and control.classes and len(fs.stage_class) \
        else None
    clock = ReactionClock(control, fs.stage_group, fs.num_stages) if control is not None and control.holds \
        else None
    controlled_last, held_base, held_gone = False, 0.0, 0.0
    drain_rtol = SAME_TIME_RTOL if control is None else CONTROLLED_DRAIN_RTOL
    members = fs.multiplicity if by_members and len(fs.multiplicity) else None

    def weight(ids: IntArray) -> float:  # flows the entries stand for (by_members) or the entries
        return float(len(ids)) if members is None else float(members[ids].sum())

    def retire(ids: IntArray, left: FloatArray, now: float) -> None:
        retired[0] += len(ids)
        delivered[ids] += left
        drained[ids] = now
        st.flows_done(fs.stage[ids], now + fs.latency[ids])

    while len(act) or st.heap:
        if changed:
            held = clock is not None and clock.open(t)
            if control is not None and (held or flow_class is not None):
                act.settle(t, delivered)
                sources = clock.unthrottled(fs.stage[act.ids], t) if clock is not None and held else None
                act.set_all_rates(controlled_rates(capacity, fs.indptr, fs.links, fs.weights, fs.multiplicity,
                                                   act.ids, control, sources, flow_class), t)
                held_base = float(len(act)) if members is None else weight(act.ids[act.alive])
                controlled_last, held_gone = True, 0.0
            elif keep_below == 0.0 or controlled_last:  # a full fill: forget the previous rates and their load
                controlled_last = False
                act.settle(t, delivered)
                load[:] = 0.0
                act.set_all_rates(fill_rates(capacity, fs.indptr, fs.links, fs.weights, act.ids, NONE,
                                             NONE, load, scratch, fs.multiplicity), t)
            else:
                slots = act.at_or_above(keep_below * (1.0 - LEVEL_RTOL))
                rate = fill_rates(capacity, fs.indptr, fs.links, fs.weights, act.ids[slots], NONE,
                                  act.rate[slots], load, scratch, fs.multiplicity)
                act.set_rates(slots, rate, t, delivered)
            if check and len(act):
                live = np.flatnonzero(act.alive)
                ids = act.ids[live]
                idx = gather_entries(fs.indptr, ids)
                owner = np.repeat(np.arange(len(live), dtype=np.int64), fs.indptr[ids + 1] - fs.indptr[ids])
                many = fs.multiplicity[ids][owner] if len(fs.multiplicity) else 1.0
                flow_load = link_loads(num_links, fs.links[idx], owner, entry_weights(fs, idx) * many,
                                       act.rate[live])
                max_util = max(max_util, float((flow_load / capacity).max()))
            events += 1
            changed, keep_below = False, np.inf if incremental else 0.0
            report("simulating", retired[0], n)
        t_drain = act.due_tree.lowest
        t_next = min(t_drain, st.next_time(), clock.next_end() if clock is not None else np.inf)
        if not np.isfinite(t_next):
            raise SpecError("flows cannot progress: a link on their path has no capacity", field="capacity")
        if len(act):
            gone = act.due(t_next + drain_rtol * t_next)  # the first to drain always among them
            if len(gone):
                retire(act.ids[gone], act.left[gone], t_next)  # its last segment's bytes, then none left
                keep_below = min(keep_below, float(act.rate[gone].min()))
                unload(load, fs.indptr, fs.links, fs.weights, act.ids[gone], act.rate[gone], fs.multiplicity)
                held_gone += weight(act.ids[gone])  # controlled rates are refilled after a share has left
                act.drop(gone)
                controlled = flow_class is not None or (clock is not None and clock.open(t_next))
                changed = changed or not (controlled and held_gone <= HELD_REFILL_SHARE * held_base)
        t = t_next
        horizon = t * (1 + SAME_TIME_RTOL) + 1e-300
        if clock is not None and clock.crossed(horizon):  # rate control throttled a group's sources
            changed, keep_below = True, 0.0
        arrivals: list[IntArray] = []
        while st.heap and st.heap[0][0] <= horizon:
            _, kind, stage = heapq.heappop(st.heap)
            if kind == _COMPLETE:
                st.complete(stage, t)
                continue
            st.start[stage] = t
            if clock is not None:
                clock.started(stage, t)
            ids = st.flows_of(stage)
            if len(ids) == 0:
                st.finish[stage] = t
                heapq.heappush(st.heap, (t, _COMPLETE, stage))
                continue
            instant = (fs.size[ids] == 0) | (fs.indptr[ids + 1] == fs.indptr[ids])
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
    # every flow delivers all its bytes over every link of its path (weighted by its share of each; a class:
    # times its members)
    carried = link_bytes(num_links, fs.indptr, fs.links, fs.weights, fs.size * (fs.multiplicity if len(
        fs.multiplicity) else 1.0))
    start = st.start[fs.stage]
    return FlowResult(start, drained, drained + fs.latency, delivered, st.start, st.finish, carried, events,
                      max_util)
