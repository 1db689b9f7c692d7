"""A min segment tree over an array (compiled, numba): the lowest value, point updates and every index at or
below a threshold in O(log n) per index touched.

The flow simulator keeps two over its flows in flight: drain times (which flows leave next) and negated rates
(which flows run at or above a level and so are filled again after departures), so an event costs the flows it
touches, not a pass over all of them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from fabricsim.network.maxmin import FloatArray, IntArray


@cache
def _kernels() -> tuple[Any, Any, Any]:
    import numba

    @numba.njit(cache=True, nogil=True)
    def build(tree: Any, values: Any, negate: bool) -> None:
        half = tree.shape[0] // 2
        n = values.shape[0]
        for i in range(n):
            tree[half + i] = -values[i] if negate else values[i]
        tree[half + n:] = np.inf
        for i in range(half - 1, 0, -1):
            tree[i] = min(tree[2 * i], tree[2 * i + 1])

    @numba.njit(cache=True, nogil=True)
    def update(tree: Any, index: Any, values: Any) -> None:
        half = tree.shape[0] // 2
        for j in range(index.shape[0]):
            i = half + index[j]
            tree[i] = values[j]
            i //= 2
            while i >= 1:
                v = min(tree[2 * i], tree[2 * i + 1])
                if tree[i] == v:
                    break
                tree[i] = v
                i //= 2

    @numba.njit(cache=True, nogil=True)
    def at_or_below(tree: Any, threshold: float) -> Any:
        half = tree.shape[0] // 2
        out = np.empty(16, dtype=np.int64)
        count = 0
        stack = np.empty(64, dtype=np.int64)
        depth = 0
        if tree[1] <= threshold:
            stack[0] = 1
            depth = 1
        while depth:
            depth -= 1
            i = stack[depth]
            if i >= half:
                if count == out.shape[0]:
                    bigger = np.empty(2 * count, dtype=np.int64)
                    bigger[:count] = out
                    out = bigger
                out[count] = i - half
                count += 1
                continue
            for c in (2 * i + 1, 2 * i):
                if tree[c] <= threshold:
                    stack[depth] = c
                    depth += 1
        result = out[:count].copy()
        result.sort()
        return result

    return build, update, at_or_below



class MinTree:
    """Min over slots holding `values` (negated with `negate`; slots past them are +inf)."""

    def __init__(self, values: FloatArray, negate: bool = False) -> None:
        self.tree: FloatArray = np.zeros(0)
        self.rebuild(values, negate)

    def rebuild(self, values: FloatArray, negate: bool = False) -> None:
        """Hold `values` now (the tree's memory is reused when they fit)."""
        n = max(1, len(values))
        size = 2 * (1 << (n - 1).bit_length())
        if len(self.tree) < size or len(self.tree) > 4 * size:
            self.tree = np.empty(size)
        _kernels()[0](self.tree, np.asarray(values, dtype=np.float64), negate)

    @property
    def lowest(self) -> float:
        return float(self.tree[1])

    def set(self, index: IntArray, values: FloatArray) -> None:
        """Slots `index` take `values`."""
        _kernels()[1](self.tree, np.asarray(index, dtype=np.int64), np.asarray(values, dtype=np.float64))

    def at_or_below(self, threshold: float) -> IntArray:
        """Every slot whose value is <= threshold, ascending."""
        out: IntArray = _kernels()[2](self.tree, float(threshold))
        return out
