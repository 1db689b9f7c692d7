"""Interval arithmetic on arrays (sort and sweep, no loop over pairs): the union of many intervals, and the length
of any boolean combination of several interval sets (compute and communication, their overlap, what is exposed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]
"""(starts, ends), seconds"""


def union(start: np.ndarray, end: np.ndarray) -> Intervals:
    """The union of intervals as sorted disjoint intervals: sort by start, running maximum of the ends, a new
    interval wherever a start lies beyond every end before it."""
    if len(start) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    breaks = s[1:] > reach[:-1]
    first = np.concatenate(([True], breaks))
    last = np.concatenate((breaks, [True]))
    return s[first], reach[last]


def total(intervals: Intervals) -> float:
    """Length of disjoint intervals."""
    return float(np.sum(intervals[1] - intervals[0]))


@dataclass(frozen=True)
class Coverage:
    """The elementary segments between every boundary of some named interval sets, and which sets cover each."""

    lengths: np.ndarray
    covered: dict[str, np.ndarray]

    def length(self, mask: np.ndarray) -> float:
        """Total length of the segments where ``mask`` (a combination of ``covered``) holds."""
        return float(np.sum(self.lengths[mask]))

    def any(self, *names: str) -> np.ndarray:
        out = np.zeros(len(self.lengths), dtype=bool)
        for name in names:
            out |= self.covered[name]
        return out


def coverage(sets: Mapping[str, Intervals]) -> Coverage:
    """Sweep over the boundaries of every set at once: each set is first reduced to its union, then a running
    count of its open intervals marks the segments it covers."""
    merged = {name: union(*iv) for name, iv in sets.items()}
    points = np.concatenate([np.concatenate(iv) for iv in merged.values()] or [np.empty(0)])
    order = np.argsort(points, kind="stable")
    lengths = np.diff(points[order]) if len(points) else np.empty(0)
    covered: dict[str, np.ndarray] = {}
    offset = 0
    for name, (s, _) in merged.items():
        delta = np.zeros(len(points), dtype=np.int32)
        delta[offset:offset + len(s)] = 1
        delta[offset + len(s):offset + 2 * len(s)] = -1
        offset += 2 * len(s)
        covered[name] = np.cumsum(delta[order])[:-1] > 0 if len(points) else np.empty(0, dtype=bool)
    return Coverage(lengths, covered)


def clip(start: np.ndarray, end: np.ndarray, window: Intervals) -> np.ndarray:
    """Per interval, its length inside the (disjoint, sorted) window intervals: by prefix sums of the window's
    covered length, evaluated at each end minus at each start."""
    ws, we = window
    if len(ws) == 0:
        return np.zeros(len(start))
    cum = np.concatenate(([0.0], np.cumsum(we - ws)))

    def covered_until(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(ws, t, side="right")  # windows starting at or before t
        inside = np.where(i > 0, np.minimum(t, we[np.maximum(i - 1, 0)]) - ws[np.maximum(i - 1, 0)], 0.0)
        return cum[np.maximum(i - 1, 0)] * (i > 0) + np.maximum(inside, 0.0)

    out: np.ndarray = covered_until(end) - covered_until(start)
    return out
