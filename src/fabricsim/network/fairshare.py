"""Max-min fair rates by progressive filling with a heap of link shares: one pass, compiled (numba).

The same allocation as `fabricsim.network.maxmin.max_min_rates` (its round-parallel numpy filling is the
reference this is tested against), at a cost that does not grow with the number of distinct levels: that filling
needs one round per link of a dependency chain of bottlenecks (820 rounds over 8.3M incidence entries for a
1,024-GPU all-to-all under ECMP, 26 s), this one pops each link once and touches each entry about twice.

The filling: every link's share is its remaining capacity over the weight of its unfrozen flows; the lowest share
is a bottleneck, so its unfrozen flows freeze at that level and leave their load on their other links, whose shares
can only rise (so a link keeps one heap entry whose key may lag its share, raised when it surfaces). A flow's solo
rate (its tightest link alone) caps it like a private link.

Incremental use: flows whose previous rate is below a level keep it and only the rest are filled again; exact
when every flow that left since ran at or above that level (flows that leave at level L free capacity only on
links that saturate at L or above, so every fill below L is unchanged).
"""

from __future__ import annotations

import heapq
from functools import cache
from typing import Any

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.network.maxmin import LEVEL_RTOL, FloatArray, IntArray


@cache
def _kernels() -> tuple[Any, Any, Any]:
    """Build the compiled kernels on first use (numba is imported only by flow simulations)."""
    import numba

    @numba.njit(cache=True, nogil=True)
    def fill(capacity: Any, indptr: Any, links: Any, weights: Any, mult: Any, free_flows: Any, solo: Any,
             prev: Any, load: Any, remaining: Any, demand: Any, left: Any, pos: Any, share: Any) -> Any:
        # free_flows: the flows to fill (global ids); solo: every flow's cap by id (empty: none); prev: the free
        # flows' previous rates (empty: none, +inf); load: every flow in flight at its previous rate (+inf: not
        # in it), so the others' capacity is capacity - load. remaining, demand, left, pos (-1), share (+inf):
        # per-link scratch, restored on exit; only the free flows' links are touched, so a small refill costs its
        # own flows, not the whole network.
        k_free = free_flows.shape[0]
        unit = weights.shape[0] == 0  # no weights: every entry carries the whole flow (one path)
        has_prev = prev.shape[0] > 0
        many = mult.shape[0] > 0  # a class of `mult` identical flows: each entry carries mult x weight
        used = np.empty(16, dtype=np.int64)
        n_used = 0
        for j in range(k_free):
            f = free_flows[j]
            old = prev[j] if has_prev and np.isfinite(prev[j]) else 0.0
            for k in range(indptr[f], indptr[f + 1]):
                w = (1.0 if unit else weights[k]) * (mult[f] if many else 1.0)
                m = links[k]
                if pos[m] < 0:
                    if n_used == used.shape[0]:
                        bigger = np.empty(2 * n_used, dtype=np.int64)
                        bigger[:n_used] = used
                        used = bigger
                    pos[m] = n_used
                    used[n_used] = m
                    n_used += 1
                    remaining[m] = capacity[m] - load[m]
                remaining[m] += w * old
                load[m] -= w * old
                demand[m] += w
                left[m] += 1
        # used links -> their free flows (counting sort of the entries by link)
        begin = np.empty(n_used + 1, dtype=np.int64)
        begin[0] = 0
        for u in range(n_used):
            begin[u + 1] = begin[u] + left[used[u]]
        fill_at = begin[:-1].copy()
        member = np.empty(begin[n_used], dtype=np.int32)  # free flows' positions (< 2^31: fill_rates checks)
        for j in range(k_free):
            f = free_flows[j]
            for k in range(indptr[f], indptr[f + 1]):
                u = pos[links[k]]
                member[fill_at[u]] = j
                fill_at[u] += 1
        heap = [(np.inf, np.int64(-1))]
        heap.pop()
        for u in range(n_used):
            m = used[u]
            if demand[m] > 0.0:
                share[m] = max(remaining[m], 0.0) / demand[m]
                heap.append((share[m], m))
        heapq.heapify(heap)
        rate = np.full(k_free, np.inf)
        free = np.ones(k_free, dtype=np.bool_)
        capped_flows = solo.shape[0] > 0  # no solo rates: the links alone cap the flows
        own_solo = np.empty(k_free if capped_flows else 0)
        for j in range(own_solo.shape[0]):
            own_solo[j] = solo[free_flows[j]]
        by_solo = np.argsort(own_solo)
        n_solo = own_solo.shape[0]
        s = 0
        touched = np.zeros(n_used, dtype=np.bool_)
        stack = np.empty(n_used, dtype=np.int64)
        while True:
            while heap:  # lazy keys: a link's key is at most its share (shares only rise)
                key, m = heap[0]
                if share[m] == np.inf:
                    heapq.heappop(heap)
                elif key != share[m]:
                    heapq.heapreplace(heap, (share[m], m))
                else:
                    break
            while s < n_solo and not free[by_solo[s]]:
                s += 1
            top = heap[0][0] if heap else np.inf
            capped = own_solo[by_solo[s]] if s < n_solo else np.inf
            if top == np.inf and capped == np.inf:
                break
            depth = 0
            if capped <= top:  # a flow reaches its solo rate before any link saturates
                lo, hi, level, link = s, s + 1, capped, np.int64(-1)
            else:
                level, link = heapq.heappop(heap)
                share[link] = np.inf
                lo, hi = begin[pos[link]], begin[pos[link] + 1]
            for b in range(lo, hi):
                j = by_solo[b] if link < 0 else member[b]
                if not free[j]:
                    continue
                free[j] = False
                rate[j] = level
                f = free_flows[j]
                for k in range(indptr[f], indptr[f + 1]):
                    w = (1.0 if unit else weights[k]) * (mult[f] if many else 1.0)
                    m = links[k]
                    remaining[m] -= w * level
                    load[m] += w * level
                    demand[m] -= w
                    left[m] -= 1
                    u = pos[m]
                    if not touched[u]:
                        touched[u] = True
                        stack[depth] = u
                        depth += 1
            for d in range(depth):
                u = stack[d]
                touched[u] = False
                m = used[u]
                if m == link or share[m] == np.inf:
                    continue
                if left[m] > 0 and demand[m] > 0.0:
                    share[m] = max(remaining[m], 0.0) / demand[m]  # its heap entry catches up when it surfaces
                else:
                    share[m] = np.inf
        for u in range(n_used):  # leave the scratch as found
            m = used[u]
            remaining[m], demand[m], left[m], pos[m], share[m] = 0.0, 0.0, 0, -1, np.inf
        return rate

    @numba.njit(cache=True, nogil=True)
    def unload(load: Any, indptr: Any, links: Any, weights: Any, mult: Any, flows: Any, rates: Any) -> None:
        unit = weights.shape[0] == 0
        many = mult.shape[0] > 0
        for i in range(flows.shape[0]):
            if np.isfinite(rates[i]):
                f = flows[i]
                for k in range(indptr[f], indptr[f + 1]):
                    w = (1.0 if unit else weights[k]) * (mult[f] if many else 1.0)
                    load[links[k]] -= w * rates[i]

    @numba.njit(cache=True, nogil=True)
    def link_bytes(num_links: int, indptr: Any, links: Any, weights: Any, size: Any) -> Any:
        unit = weights.shape[0] == 0
        out = np.zeros(num_links)
        for f in range(indptr.shape[0] - 1):
            for k in range(indptr[f], indptr[f + 1]):
                w = 1.0 if unit else weights[k]
                out[links[k]] += w * size[f]
        return out

    return fill, unload, link_bytes


NONE = np.zeros(0)
"""an empty per-flow array: no multiplicities (every flow is one), no caps, no previous rates"""


class FillScratch:
    """Per-link work arrays of the filling, allocated once per simulation (the kernel restores them)."""

    def __init__(self, num_links: int) -> None:
        self.remaining = np.zeros(num_links)
        self.demand = np.zeros(num_links)
        self.left = np.zeros(num_links, dtype=np.int64)
        self.pos = np.full(num_links, -1, dtype=np.int64)
        self.share = np.full(num_links, np.inf)


def fill_rates(capacity: FloatArray, indptr: IntArray, links: IntArray, weights: FloatArray, free: IntArray,
               solo: FloatArray, previous: FloatArray, load: FloatArray,
               scratch: FillScratch | None = None, multiplicity: FloatArray = NONE) -> FloatArray:
    """Max-min fair rates of the flows `free` (global ids) while every other flow in flight keeps its rate.

    `solo` caps every flow's rate by id (empty: no caps; a flow's own links already hold it to its solo rate);
    `previous` holds the free flows' last rates (empty: none); `load` is each link's bytes/s from all flows in
    flight at their previous rates (a flow with none, +inf, is not in it), updated in place to the new rates.
    `multiplicity` (by flow id; empty: 1) makes a flow a class of that many identical flows: each gets the
    returned rate and together they load its links that many times over."""
    if len(free) >= 2**31:
        raise SpecError(f"{len(free):,} flows in one filling: at most 2^31 - 1", field="flows")
    w = scratch or FillScratch(len(capacity))
    out: FloatArray = _kernels()[0](np.asarray(capacity, dtype=np.float64), indptr, links, weights, multiplicity,
                                    np.asarray(free), np.asarray(solo, dtype=np.float64),
                                    np.asarray(previous, dtype=np.float64), load, w.remaining, w.demand, w.left,
                                    w.pos, w.share)
    return out


def fair_rates(capacity: FloatArray, indptr: IntArray, links: IntArray, weights: FloatArray, flows: IntArray,
               solo: FloatArray, previous: FloatArray | None = None, keep_below: float = 0.0,
               load: FloatArray | None = None) -> FloatArray:
    """Max-min fair rate of each flow in `flows` (ids into the CSR incidence ``links[indptr[f]:indptr[f+1]]``).

    `solo` is each listed flow's rate alone on its path (+inf for an empty path, which stays +inf). Incremental
    use: `previous` (the flows' last rates, +inf for a flow that has none) with `keep_below` > 0 keeps every
    rate below that level; `load` as `fill_rates` (computed here when not given).
    """
    flows = np.asarray(flows, dtype=np.int64)
    prev = np.full(len(flows), np.inf) if previous is None else np.asarray(previous, dtype=np.float64)
    if load is None:
        load = np.zeros(len(capacity))
        unload(load, indptr, links, weights, flows, -prev)
    free = np.flatnonzero(~(prev < keep_below * (1.0 - LEVEL_RTOL)))
    by_id = np.full(int(flows.max(initial=-1)) + 1, np.inf)
    by_id[flows] = solo
    rate = prev.copy()
    rate[free] = fill_rates(capacity, indptr, links, weights, flows[free], by_id, prev[free], load)
    return rate


def unload(load: FloatArray, indptr: IntArray, links: IntArray, weights: FloatArray, flows: IntArray,
           rates: FloatArray, multiplicity: FloatArray = NONE) -> None:
    """Take flows running at `rates` off the per-link `load` (in place; flows at +inf carry none; a class of
    `multiplicity` flows carries that many times its rate)."""
    kernel = _kernels()[1]
    kernel(load, indptr, links, weights, multiplicity, np.asarray(flows, dtype=np.int64),
           np.asarray(rates, dtype=np.float64))


def link_bytes(num_links: int, indptr: IntArray, links: IntArray, weights: FloatArray,
               size: FloatArray) -> FloatArray:
    """Bytes every link carries when every flow delivers `size` over its path (weighted by its share of each)."""
    out: FloatArray = _kernels()[2](num_links, indptr, links, weights, np.asarray(size, dtype=np.float64))
    return out
