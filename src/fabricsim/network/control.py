"""How a shared fabric departs from ideal max-min sharing: lossless back-pressure, the time rate control takes
to react, and traffic classes. The flow simulator runs ideal max-min without one (`simulate(control=None)`).

Rate control (InfiniBand congestion control, DCQCN, Spectrum-X's) throttles the sources of a congested port to
their fair share, so queues drain and no link stays paused: its steady state is the max-min allocation. It needs
time to get there. Its state lives with a connection (a queue pair), and a job's later stages reuse the
connections of its first, so a flow's source sends unthrottled, filling queues as without rate control
(`backpressure.held_rates`), for `reaction_s` after its group of stages (`FlowSet.stage_group`: a job) first
sent, and at its fair share after: the exponential approach of a rate-control loop, integrated, moves the same
bytes as a step at its time constant. Without rate control (`reaction_s` infinite) sources stay unthrottled.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from fabricsim.catalog import CongestionControl
from fabricsim.errors import SpecError
from fabricsim.network.arbitration import class_rates
from fabricsim.network.backpressure import BoolArray, LocalFlows, held_rates
from fabricsim.network.fairshare import NONE, FillScratch, fill_rates
from fabricsim.network.maxmin import FloatArray, IntArray, gather_entries
from fabricsim.topology import LINK_KINDS, Topology


@dataclass(frozen=True)
class FabricControl:
    """A fabric's flow control, rate control and traffic classes, as the flow simulator applies them."""

    name: str
    lossless: bool
    """back-pressure (credits, PFC) stops a link for every flow of a class when a queue beyond it fills"""
    reaction_s: float
    """time rate control takes to bring the sources of a congested port to their fair share (0: at once, as
    ideal max-min; +inf: no rate control)"""
    pausable: BoolArray
    """per link of the topology: a fabric link that back-pressure can stop"""
    class_weights: FloatArray = field(default_factory=lambda: np.zeros(0))
    """arbitration weight of every traffic class (empty: QoS off, every class shares one queue)"""

    def __post_init__(self) -> None:
        if not (self.reaction_s >= 0):
            raise SpecError(f"reaction time must be >= 0 s, got {self.reaction_s}", field="reaction_s")
        if len(self.class_weights) and not (np.isfinite(self.class_weights).all()
                                            and (self.class_weights > 0).all()):
            raise SpecError("traffic class weights must be finite and positive", field="qos")

    @property
    def holds(self) -> bool:
        """Whether back-pressure can ever cap a rate below max-min (lossless, and rate control not instant)."""
        return self.lossless and self.reaction_s > 0

    @property
    def classes(self) -> int:
        return len(self.class_weights)

    def throttled_from(self, first_sent_s: float) -> float:
        """When rate control has throttled the sources of a group that first sent at `first_sent_s` (+inf: never;
        -inf: from the start)."""
        return first_sent_s + self.reaction_s if self.holds else -math.inf


def fabric_links(topology: Topology) -> BoolArray:
    """Links back-pressure can stop: links with a switch or NIC port at both ends (InfiniBand, Ethernet)."""
    kinds = [LINK_KINDS.index("infiniband"), LINK_KINDS.index("ethernet")]
    out: BoolArray = np.isin(topology.link_kind, kinds)
    return out


def fabric_control(topology: Topology, behaviour: CongestionControl | None,
                   class_weights: FloatArray | None = None) -> FabricControl | None:
    """The simulator's control for a catalog behaviour on this topology, with traffic-class weights (QoS on); None
    where nothing departs from ideal max-min (no behaviour or an instant one, and at most one class), so the ideal
    simulation runs exactly as without one. A behaviour for the other fabric kind is refused."""
    weights = np.zeros(0) if class_weights is None or len(class_weights) < 2 else np.asarray(class_weights, float)
    if behaviour is not None:
        check_fabric_kind(topology, behaviour)
    if (behaviour is None or not behaviour.lossless or behaviour.reaction_s == 0) and len(weights) == 0:
        return None
    if behaviour is None:
        return FabricControl("ideal", False, 0.0, fabric_links(topology), weights)
    return FabricControl(behaviour.id, behaviour.lossless, behaviour.reaction_or_never_s, fabric_links(topology),
                         weights)


def check_fabric_kind(topology: Topology, behaviour: CongestionControl) -> None:
    """Refuse a behaviour of the other fabric kind (RoCE's PFC and DCQCN on an InfiniBand fabric, IB credits on
    Ethernet): a SpecError naming --cc."""
    kind = topology.fabric_switch.kind
    if not behaviour.runs_on(kind):
        raise SpecError(f"{behaviour.id!r} runs on {behaviour.fabric} fabrics; this cluster's fabric is {kind} "
                        f"({topology.fabric_switch.id}): pick a {kind} behaviour or an {behaviour.fabric} network "
                        "(--ib)", field="--cc")


def local_flows(indptr: IntArray, links: IntArray, weights: FloatArray, multiplicity: FloatArray, ids: IntArray,
                pausable: BoolArray, flow_class: IntArray | None, num_links: int, classes: int) -> LocalFlows:
    """The flows `ids` as a compact CSR; with classes, over (link, class) virtual links."""
    lens = (indptr[ids + 1] - indptr[ids]).astype(np.int64)
    local_ptr = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lens, out=local_ptr[1:])
    rows = gather_entries(indptr, ids)
    owner = np.repeat(np.arange(len(ids), dtype=np.int64), lens)
    position = np.arange(len(rows), dtype=np.int64) - local_ptr[:-1][owner]
    phys = links[rows].astype(np.int64)
    w = weights[rows] if len(weights) else np.ones(len(rows))
    mult = multiplicity[ids] if len(multiplicity) else np.ones(len(ids))
    virtual = phys if flow_class is None else phys * classes + flow_class[owner]
    return LocalFlows(local_ptr, virtual, w, mult, owner, position, pausable[phys],
                      num_links * (1 if flow_class is None else classes))


def controlled_rates(capacity: FloatArray, indptr: IntArray, links: IntArray, weights: FloatArray,
                     multiplicity: FloatArray, ids: IntArray, control: FabricControl, unthrottled: BoolArray | None,
                     flow_class: IntArray | None) -> FloatArray:
    """Rates of the flows `ids` in flight: held by back-pressure where some are `unthrottled` (by position in
    `ids`; None: none are), and by class when the control has traffic classes (`flow_class`: each flow's class by
    id)."""
    k = control.classes if flow_class is not None else 0
    cls = None
    if k and flow_class is not None:
        cls = np.minimum(flow_class[ids].astype(np.int64), k - 1)
        if len(np.unique(cls)) < 2:
            cls, k = None, 0
    local = local_flows(indptr, links, weights, multiplicity, ids, control.pausable, cls, len(capacity), k or 1)
    scratch = FillScratch(local.num_links)
    free = np.arange(local.num_flows, dtype=np.int64)
    unit = local.weights if len(weights) else NONE

    def fill_at(vcap: FloatArray) -> FloatArray:
        def fill(cap: FloatArray) -> FloatArray:
            return fill_rates(vcap, local.indptr, local.links, unit, free, cap, NONE, np.zeros(local.num_links),
                              scratch, local.multiplicity)

        if unthrottled is None or not unthrottled.any():
            return fill(np.full(local.num_flows, np.inf))
        return held_rates(local, vcap, fill, unthrottled)

    if cls is None:
        return fill_at(np.asarray(capacity, dtype=np.float64))

    def entry_load(rate: FloatArray) -> FloatArray:
        out: FloatArray = local.weights * local.multiplicity[local.owner] * rate[local.owner]
        return out

    return class_rates(np.asarray(capacity, dtype=np.float64), k, control.class_weights, local.links, entry_load,
                       fill_at)


HELD_REFILL_SHARE = 0.05
"""while sources are unthrottled or traffic classes share links, departures refill the rates once this share of the
flows in flight at the last fill has left (each such fill costs several full fillings; a 514-GPU all-to-all beside a
checkpoint in two classes took 125 s refilling at every departure): until then the others keep their rates"""


class ReactionClock:
    """Which flows' sources rate control has not throttled yet: a group of stages (a job's connections) sends
    unthrottled from its first send until `FabricControl.reaction_s` later."""

    def __init__(self, control: FabricControl, stage_group: IntArray, num_stages: int) -> None:
        self.control = control
        self.group = np.asarray(stage_group, dtype=np.int64) if len(stage_group) else np.arange(num_stages)
        self.throttled_at = np.full(int(self.group.max(initial=-1)) + 1, np.nan)
        self.ends: list[float] = []

    def started(self, stage: int, now: float) -> None:
        """A stage started sending: its group's clock starts if this is the group's first send."""
        g = self.group[stage]
        if np.isnan(self.throttled_at[g]):
            end = self.control.throttled_from(now)
            self.throttled_at[g] = end
            if math.isfinite(end):
                heapq.heappush(self.ends, end)

    def next_end(self) -> float:
        return self.ends[0] if self.ends else math.inf

    def crossed(self, horizon: float) -> bool:
        """Whether some group became throttled by `horizon` (those ends are consumed)."""
        hit = False
        while self.ends and self.ends[0] <= horizon:
            heapq.heappop(self.ends)
            hit = True
        return hit

    def open(self, now: float) -> bool:
        """Whether some group that has sent is still unthrottled at `now`."""
        started = self.throttled_at[~np.isnan(self.throttled_at)]
        return bool((started > now * (1 + 1e-9)).any())

    def unthrottled(self, stages: IntArray, now: float) -> BoolArray:
        """Per flow (by its stage): its source still sends unthrottled at `now`."""
        out: BoolArray = self.throttled_at[self.group[stages]] > now * (1 + 1e-9)
        return out
