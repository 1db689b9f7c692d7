"""Max-min fair rates of concurrent flows over capacitated links, by progressive filling (water-filling).

All flows not yet frozen share one water level; a round finds the links whose remaining capacity divided by
their (weighted) unfrozen flows is smallest, freezes every flow that crosses one of them at that level, and takes
their rates off the remaining capacities. Rounds run in parallel where it is exact: every link whose share is the
lowest level seen by all of its flows freezes in the same round (shares only rise as flows freeze below them),
so independent bottlenecks at different levels cost one round, not one each. Links that cannot saturate even
with every flow at its solo rate are left out (the solo rate caps the flow instead). A round is a handful of numpy
passes over the unfrozen incidence entries (flow, link, weight); no Python loop over flows.
A weight below 1 is the fraction of a flow's rate that crosses the link (a flow split over several paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    pass

FloatArray = np.ndarray[tuple[Any, ...], np.dtype[np.float64]]
IntArray = np.ndarray[tuple[Any, ...], np.dtype[np.int64]]

def index_dtype(count: int) -> type[np.signedinteger[Any]]:
    """int32 for ids below 2^31 (links, flows: half the memory of the largest index arrays), else int64."""
    return np.int32 if count < 2**31 else np.int64


LEVEL_RTOL = 1e-9
"""links whose fair share is within this relative distance of the lowest are bottlenecks of the same round"""


def max_min_rates(capacity: FloatArray, entry_link: IntArray, entry_flow: IntArray, entry_weight: FloatArray,
                  flows: int, solo: FloatArray | None = None) -> FloatArray:
    """Max-min fair rate of each of `flows` flows; flow f loads link l with weight w for every entry (l, f, w).

    A flow with no entries is unconstrained: its rate is +inf. Links that cannot saturate even if every flow on
    them ran at its solo rate (its slowest link) are left out of the filling, and each flow is capped at that solo
    rate instead: the same allocation, but the rounds only touch contended links. Pass `solo` (each flow's
    tightest capacity / weight) when it is already known.
    """
    rate = np.full(flows, np.inf)
    if flows == 0 or len(entry_link) == 0:
        return rate
    ef = np.asarray(entry_flow, dtype=np.int64)
    ew = np.asarray(entry_weight, dtype=np.float64)
    if solo is None:
        solo = np.full(flows, np.inf)
        np.minimum.at(solo, ef, capacity[entry_link] / ew)
    worst = np.bincount(entry_link, weights=ew * solo[ef], minlength=len(capacity))
    contended = worst > capacity * (1 + LEVEL_RTOL)
    keep = contended[entry_link]
    rate[np.isfinite(solo)] = solo[np.isfinite(solo)]
    if not keep.any():
        return rate
    el, ef, ew = entry_link[keep], ef[keep], ew[keep]
    present = np.zeros(len(capacity), dtype=bool)
    present[el] = True
    used = np.flatnonzero(present)
    lut = np.cumsum(present) - 1  # global link id -> compact index
    el = lut[el]
    remaining: FloatArray = capacity[used].astype(np.float64, copy=True)
    m = len(used)
    frozen = np.zeros(flows, dtype=bool)
    frozen[ef] = True
    members = np.flatnonzero(frozen)  # flows still in the filling
    frozen[members] = False
    while len(el):
        demand = np.bincount(el, weights=ew, minlength=m)
        nz = demand > 0
        share = np.full(m, np.inf)
        share[nz] = np.maximum(remaining[nz], 0.0) / demand[nz]
        # a flow's level: the lowest share on its path, or its solo rate; a link whose share is the lowest level
        # of all its flows is a bottleneck now, whatever happens elsewhere (shares only rise as flows freeze)
        level = np.full(flows, np.inf)
        level[members] = solo[members]
        np.minimum.at(level, ef, share[el])
        lowest = np.full(m, np.inf)
        np.minimum.at(lowest, el, level[ef])
        bottleneck = share <= lowest * (1 + LEVEL_RTOL)
        capped = members[solo[members] <= level[members] * (1 + LEVEL_RTOL)]
        hit = np.concatenate([ef[bottleneck[el]], capped])
        frozen[hit] = True
        rate[hit] = level[hit]
        gone = frozen[ef]
        remaining -= np.bincount(el[gone], weights=(ew * rate[ef])[gone], minlength=m)
        keep = ~gone
        el, ef, ew = el[keep], ef[keep], ew[keep]
        members = members[~frozen[members]]
        if len(el) < m // 4:  # shrink the link set as the filling empties it
            present = np.zeros(m, dtype=bool)
            present[el] = True
            lut = np.cumsum(present) - 1
            remaining, el, m = remaining[present], lut[el], int(present.sum())
    return rate


def link_loads(num_links: int, entry_link: IntArray, entry_flow: IntArray, entry_weight: FloatArray,
               rate: FloatArray) -> FloatArray:
    """Bytes/s on every link when flow f runs at rate[f]."""
    return np.bincount(entry_link, weights=entry_weight * rate[entry_flow], minlength=num_links).astype(np.float64)


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
