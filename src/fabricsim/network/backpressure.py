"""Lossless back-pressure at flow level: head-of-line blocking and congestion spreading.

In a lossless fabric (InfiniBand credits, Ethernet PFC) a flow held at a congested port further along its path is
not dropped: its bytes queue in the switches before that port until the buffers fill, and the fabric then stops the
link that feeds them (credits run out, a PFC pause frame) for every flow of that traffic class on it, not only the
held one. A source without rate control keeps sending at line rate, so the queue and the pause reach back to the
sending NIC (a congestion tree). A link that is paused this way sends its flows first in, first out: each moves at
the rate of the held flow it interleaves with (head-of-line blocking), however free its own egress is. So a victim
that shares only an upstream link with an incast runs at the incast's per-flow rate.

The fluid model of that, per event: fill the rates (max-min), find each unthrottled flow's last bottleneck on its
path (a saturated link where it runs as fast as any flow there, or the link whose pause capped it), mark the fabric
links between its injection (its first network link) and that bottleneck as paused for its class, cap every flow on a
paused link at the slowest held flow's rate there (per unit of its share of the link), and fill again, until no
cap moves (a victim held at a paused link pauses the links upstream of it in turn). Rates never exceed the ideal
max-min rates: the fabric can lose throughput to back-pressure, never gain it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fabricsim.network.maxmin import FloatArray, IntArray

if TYPE_CHECKING:
    pass

BoolArray = np.ndarray[tuple[Any, ...], np.dtype[np.bool_]]
SATURATED_RTOL = 1e-6
"""a link whose load is within this (relative) of its capacity is saturated; a flow within it of the link's
fastest flow is bottlenecked there"""
MAX_ROUNDS = 12
"""refills of the fixed point at most (each adds one hop of the congestion tree; fabric paths have 2-6 hops)"""

Fill = Callable[[FloatArray], FloatArray]
"""rates of the local flows, each capped at the given rate (+inf: none)"""


@dataclass(frozen=True)
class LocalFlows:
    """The flows in flight as a compact CSR over (virtual) links: flow j loads ``links[indptr[j]:indptr[j+1]]``."""

    indptr: IntArray
    links: IntArray
    """the link of every entry: a physical link, or a (link, traffic class) queue when classes are separated"""
    weights: FloatArray
    """share of the flow's rate on each entry's link (all ones for single-path flows)"""
    multiplicity: FloatArray
    """identical flows each local flow stands for"""
    owner: IntArray
    """local flow of every entry"""
    position: IntArray
    """position of every entry on its flow's path (0: the first link)"""
    pausable: BoolArray
    """every entry's link is a fabric link that back-pressure can stop (not a GPU's NVLink or PCIe hop: a NIC
    pulls its data from the GPU, so the injection point is the NIC)"""
    num_links: int

    @property
    def num_flows(self) -> int:
        return len(self.indptr) - 1


def loads(local: LocalFlows, rate: FloatArray) -> FloatArray:
    """Bytes/s on every (virtual) link at the given per-flow rates."""
    out: FloatArray = np.bincount(local.links, weights=local.weights * local.multiplicity[local.owner]
                                  * rate[local.owner], minlength=local.num_links).astype(np.float64)
    return out


def last_bottleneck(local: LocalFlows, capacity: FloatArray, rate: FloatArray, cap: FloatArray,
                    cap_entry: IntArray) -> IntArray:
    """Each flow's last bottleneck on its path, as a position (-1: none, e.g. an empty path): a saturated link
    where it runs as fast as any flow there, or the entry where a pause capped it."""
    load = loads(local, rate)
    saturated = load >= capacity * (1.0 - SATURATED_RTOL)
    fastest = np.zeros(local.num_links)
    np.maximum.at(fastest, local.links, rate[local.owner])
    r = rate[local.owner]
    bound = saturated[local.links] & (r >= fastest[local.links] * (1.0 - SATURATED_RTOL))
    held = np.flatnonzero((cap_entry >= 0) & (rate <= cap * (1.0 + SATURATED_RTOL)))
    bound[cap_entry[held]] = True
    out = np.full(local.num_flows, -1, dtype=np.int64)
    np.maximum.at(out, local.owner[bound], local.position[bound])
    return out


def paused_caps(local: LocalFlows, rate: FloatArray, bottleneck: IntArray,
                unthrottled: BoolArray) -> tuple[FloatArray, IntArray]:
    """(cap, entry that sets it) of every flow from the paused links it crosses: the slowest held flow's rate
    there over the flow's share of the link (+inf, -1: it crosses no paused link). Only `unthrottled` flows (their
    sources not yet slowed by rate control) fill the queues that pause links."""
    owner = local.owner
    injection = np.full(local.num_flows, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(injection, owner[local.pausable], local.position[local.pausable])
    held = local.pausable & (local.position >= injection[owner]) & (local.position < bottleneck[owner]) \
        & unthrottled[owner]
    slowest = np.full(local.num_links, np.inf)
    np.minimum.at(slowest, local.links[held], (local.weights * rate[owner])[held])
    on_paused = np.flatnonzero(np.isfinite(slowest[local.links]) & local.pausable)
    cap = np.full(local.num_flows, np.inf)
    entry = np.full(local.num_flows, -1, dtype=np.int64)
    if len(on_paused) == 0:
        return cap, entry
    per_entry = slowest[local.links[on_paused]] / local.weights[on_paused]
    np.minimum.at(cap, owner[on_paused], per_entry)
    # the entry of each flow that sets its cap (the first such on its path)
    sets = on_paused[per_entry <= cap[owner[on_paused]]]
    first = np.full(local.num_flows, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, owner[sets], sets)
    has = first < np.iinfo(np.int64).max
    entry[has] = first[has]
    return cap, entry


def held_rates(local: LocalFlows, capacity: FloatArray, fill: Fill, unthrottled: BoolArray) -> FloatArray:
    """Rates under lossless back-pressure: the fixed point of the module docstring, each flow at most its ideal
    (uncapped) rate. `unthrottled` marks the flows whose sources rate control has not slowed yet: only they fill
    queues (a throttled source sends at its fair share, which its bottleneck drains)."""
    ideal = fill(np.full(local.num_flows, np.inf))
    cap = np.full(local.num_flows, np.inf)
    cap_entry = np.full(local.num_flows, -1, dtype=np.int64)
    rate = ideal
    for _ in range(MAX_ROUNDS):
        bottleneck = last_bottleneck(local, capacity, rate, cap, cap_entry)
        new_cap, new_entry = paused_caps(local, rate, bottleneck, unthrottled)
        lower = new_cap < cap * (1.0 - SATURATED_RTOL)
        if not lower.any():
            break
        cap[lower], cap_entry[lower] = new_cap[lower], new_entry[lower]
        rate = fill(cap)
    out: FloatArray = np.minimum(rate, ideal)
    return out
