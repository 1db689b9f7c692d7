"""Max-min fair rates by progressive filling with a heap of link shares: one pass, compiled (numba).

The same allocation as `fabricsim.network.maxmin.max_min_rates` (its round-parallel numpy filling is the
reference this is tested against), at a cost that does not grow with the number of distinct levels: that filling
needs one round per link of a dependency chain of bottlenecks (820 rounds over 8.3M incidence entries for a
1,024-GPU all-to-all under ECMP, 26 s), this one pops each link once and touches each entry about twice.

The filling: every link's share is its remaining capacity over the weight of its unfrozen flows; the lowest share
is a bottleneck, so its unfrozen flows freeze at that level and leave their load on their other links, whose shares
can only rise (so stale heap entries are skipped, not removed). A flow's solo rate (its tightest link alone) caps
it like a private link. Incremental use (`keep_below`): flows whose previous rate is below that level keep it,
and only the rest are filled again; exact when every flow that left since ran at or above that level (flows that
leave at level L free capacity only on links that saturate at L or above, so every fill below L is unchanged).
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from fabricsim.network.maxmin import LEVEL_RTOL, FloatArray, IntArray

_KERNELS: tuple[Any, Any] | None = None


def _kernels() -> tuple[Any, Any]:
    global _KERNELS
    if _KERNELS is None:
        _KERNELS = _compile()
    return _KERNELS


def _compile() -> tuple[Any, Any]:
    """Build the compiled kernels on first use (numba is imported only by flow simulations)."""
    import numba

    @numba.njit(cache=True, nogil=True)
    def fill(capacity: Any, indptr: Any, links: Any, weights: Any, flows: Any, solo: Any, prev: Any,
             keep_below: float, rtol: float, load: Any) -> Any:
        num_links = capacity.shape[0]
        n = flows.shape[0]
        rate = prev.copy()
        cut = keep_below * (1.0 - rtol)
        free_list = np.empty(n, dtype=np.int64)
        nfree = 0
        for i in range(n):
            if not prev[i] < cut:
                free_list[nfree] = i
                nfree += 1
        free_idx = free_list[:nfree]
        # the links' capacity left by the flows that keep their rates: `load` holds every listed flow at its
        # previous rate (a flow with none, +inf, is not in it)
        remaining = capacity - load
        demand = np.zeros(num_links)
        count = np.zeros(num_links + 1, dtype=np.int64)
        left = np.zeros(num_links, dtype=np.int64)
        for i in free_idx:
            f = flows[i]
            old = prev[i] if np.isfinite(prev[i]) else 0.0
            for k in range(indptr[f], indptr[f + 1]):
                m = links[k]
                remaining[m] += weights[k] * old
                load[m] -= weights[k] * old
                demand[m] += weights[k]
                count[m + 1] += 1
                left[m] += 1
        # links -> their unfrozen flows (counting sort of the entries by link)
        for j in range(num_links):
            count[j + 1] += count[j]
        fill_at = count[:-1].copy()
        member = np.empty(count[num_links], dtype=np.int64)
        free = np.zeros(n, dtype=np.bool_)
        for i in free_idx:
            free[i] = True
            rate[i] = np.inf
            f = flows[i]
            for k in range(indptr[f], indptr[f + 1]):
                member[fill_at[links[k]]] = i
                fill_at[links[k]] += 1
        share = np.full(num_links, np.inf)
        heap = [(np.inf, np.int64(-1))]
        heap.pop()
        for j in range(num_links):
            if left[j] > 0 and demand[j] > 0.0:
                share[j] = max(remaining[j], 0.0) / demand[j]
                heap.append((share[j], np.int64(j)))
        heapq.heapify(heap)
        by_solo = free_idx[np.argsort(solo[free_idx])]
        s = 0
        touched = np.zeros(num_links, dtype=np.bool_)
        stack = np.empty(num_links, dtype=np.int64)
        while True:
            while heap and heap[0][0] != share[heap[0][1]]:
                heapq.heappop(heap)
            while s < nfree and not free[by_solo[s]]:
                s += 1
            top = heap[0][0] if heap else np.inf
            capped = solo[by_solo[s]] if s < nfree else np.inf
            if top == np.inf and capped == np.inf:
                break
            depth = 0
            if capped <= top:  # a flow reaches its solo rate before any link saturates
                batch_lo, batch_hi, level, link = s, s + 1, capped, np.int64(-1)
            else:
                level, link = heapq.heappop(heap)
                share[link] = np.inf
                batch_lo, batch_hi = count[link], count[link + 1]
            for b in range(batch_lo, batch_hi):
                i = by_solo[b] if link < 0 else member[b]
                if not free[i]:
                    continue
                free[i] = False
                rate[i] = level
                f = flows[i]
                for k in range(indptr[f], indptr[f + 1]):
                    m = links[k]
                    remaining[m] -= weights[k] * level
                    load[m] += weights[k] * level
                    demand[m] -= weights[k]
                    left[m] -= 1
                    if not touched[m]:
                        touched[m] = True
                        stack[depth] = m
                        depth += 1
            for d in range(depth):
                m = stack[d]
                touched[m] = False
                if m == link or share[m] == np.inf:
                    continue
                if left[m] > 0 and demand[m] > 0.0:
                    share[m] = max(remaining[m], 0.0) / demand[m]
                    heapq.heappush(heap, (share[m], m))
                else:
                    share[m] = np.inf
        return rate

    @numba.njit(cache=True, nogil=True)
    def unload(load: Any, indptr: Any, links: Any, weights: Any, flows: Any, rates: Any) -> None:
        for i in range(flows.shape[0]):
            if np.isfinite(rates[i]):
                f = flows[i]
                for k in range(indptr[f], indptr[f + 1]):
                    load[links[k]] -= weights[k] * rates[i]

    return fill, unload


def fair_rates(capacity: FloatArray, indptr: IntArray, links: IntArray, weights: FloatArray, flows: IntArray,
               solo: FloatArray, previous: FloatArray | None = None, keep_below: float = 0.0,
               load: FloatArray | None = None) -> FloatArray:
    """Max-min fair rate of each flow in `flows` (ids into the CSR incidence ``links[indptr[f]:indptr[f+1]]``).

    `solo` is each listed flow's rate alone on its path (+inf for an empty path, which stays +inf). Incremental
    use: `previous` (the flows' last rates, +inf for a flow that has none) with `keep_below` > 0 keeps every
    rate below that level, and `load` (each link's bytes/s from the listed flows at their previous rates; kept
    up to date in place) spares a pass over the flows that keep theirs.
    """
    fill, _ = _kernels()
    n = len(flows)
    prev = np.full(n, np.inf) if previous is None else np.asarray(previous, dtype=np.float64)
    if load is None:
        load = np.zeros(len(capacity))
        if keep_below > 0:
            unload(load, indptr, links, weights, flows, -prev)
    out: FloatArray = fill(np.asarray(capacity, dtype=np.float64), indptr, links, weights,
                           np.asarray(flows, dtype=np.int64), np.asarray(solo, dtype=np.float64), prev,
                           float(keep_below), LEVEL_RTOL, load)
    return out


def unload(load: FloatArray, indptr: IntArray, links: IntArray, weights: FloatArray, flows: IntArray,
           rates: FloatArray) -> None:
    """Take flows running at `rates` off the per-link `load` (in place; flows at +inf carry none)."""
    _, kernel = _kernels()
    kernel(load, indptr, links, weights, np.asarray(flows, dtype=np.int64), np.asarray(rates, dtype=np.float64))
