"""Max-min fair rates of concurrent flows over capacitated links, by progressive filling (water-filling).

All flows not yet frozen share one water level; each round finds the links whose remaining capacity divided by
their (weighted) unfrozen flows is smallest, freezes every flow that crosses one of them at that level, and takes
their rates off the remaining capacities. Every round is a handful of numpy passes over the incidence entries
(flow, link, weight) still unfrozen, so the cost is O(entries x distinct levels) with no Python loop over flows.
A weight below 1 is the fraction of a flow's rate that crosses the link (a flow split over several paths).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

LEVEL_RTOL = 1e-9
"""links whose fair share is within this relative distance of the lowest are bottlenecks of the same round"""


def max_min_rates(capacity: FloatArray, entry_link: IntArray, entry_flow: IntArray, entry_weight: FloatArray,
                  flows: int) -> FloatArray:
    """Max-min fair rate of each of `flows` flows; flow f loads link l with weight w for every entry (l, f, w).

    A flow with no entries is unconstrained: its rate is +inf.
    """
    rate = np.full(flows, np.inf)
    if flows == 0 or len(entry_link) == 0:
        return rate
    present = np.zeros(len(capacity), dtype=bool)
    present[entry_link] = True
    used = np.flatnonzero(present)
    lut = np.cumsum(present) - 1  # global link id -> compact index
    el = lut[entry_link]
    ef = np.asarray(entry_flow, dtype=np.int64)
    ew = np.asarray(entry_weight, dtype=np.float64)
    remaining: FloatArray = capacity[used].astype(np.float64, copy=True)
    m = len(used)
    frozen = np.zeros(flows, dtype=bool)
    while len(el):
        demand = np.bincount(el, weights=ew, minlength=m)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(demand > 0, np.maximum(remaining, 0.0) / demand, np.inf)
        level = float(share.min())
        bottleneck = share <= level * (1 + LEVEL_RTOL)
        hit = ef[bottleneck[el]]
        frozen[hit] = True
        rate[hit] = level
        gone = frozen[ef]
        remaining -= np.bincount(el[gone], weights=ew[gone], minlength=m) * level
        keep = ~gone
        el, ef, ew = el[keep], ef[keep], ew[keep]
    return rate


def link_loads(num_links: int, entry_link: IntArray, entry_flow: IntArray, entry_weight: FloatArray,
               rate: FloatArray) -> FloatArray:
    """Bytes/s on every link when flow f runs at rate[f]."""
    return np.bincount(entry_link, weights=entry_weight * rate[entry_flow], minlength=num_links).astype(np.float64)
