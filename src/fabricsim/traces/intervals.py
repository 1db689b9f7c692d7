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


def coverage(sets: Mapping[str, Intervals], *, disjoint: bool = False) -> Coverage:
    """Sweep over the boundaries of every set at once: each set is first reduced to its union (``disjoint``: the
    sets are unions already), then a running sum marks the segments each covers. Within a union a set's count of
    open intervals is 0 or 1 at every boundary (its intervals neither touch nor overlap, and a start sorts before
    an end at the same time), so one running sum of +-2**k (set k's bit) holds every set's count at once."""
    if len(sets) > 62:
        raise ValueError("at most 62 interval sets")
    merged = dict(sets) if disjoint else {name: union(*iv) for name, iv in sets.items()}
    points = np.concatenate([np.concatenate(iv) for iv in merged.values()] or [np.empty(0)])
    if not len(points):
        return Coverage(np.empty(0), {name: np.empty(0, dtype=bool) for name in merged})
    order = np.argsort(points, kind="stable")
    ordered = points[order]
    del points
    lengths = np.diff(ordered)
    del ordered
    width = np.int8 if len(merged) < 7 else np.int16 if len(merged) < 15 else np.int32 if len(merged) < 31 \
        else np.int64
    delta = np.zeros(len(order), dtype=width)
    offset = 0
    for k, (s, _) in enumerate(merged.values()):
        delta[offset:offset + len(s)] = 1 << k
        delta[offset + len(s):offset + 2 * len(s)] = -(1 << k)
        offset += 2 * len(s)
    bits: np.ndarray = np.cumsum(delta[order], dtype=width)[:-1]
    del delta, order
    covered = {name: (bits & (1 << k)) != 0 for k, name in enumerate(merged)}
    return Coverage(lengths, covered)


def clip(start: np.ndarray, end: np.ndarray, window: Intervals) -> np.ndarray:
    """Per interval, its length inside the (disjoint, sorted) window intervals: by prefix sums of the window's
    covered length, evaluated at each end minus at each start (in place: a few arrays of the intervals' length)."""
    ws, we = window
    if len(ws) == 0:
        return np.zeros(len(start))
    cum = np.concatenate(([0.0], np.cumsum(we - ws)))

    def covered_until(t: np.ndarray) -> np.ndarray:
        at = np.searchsorted(ws, t, side="right")  # windows starting at or before t
        some = at > 0
        at -= 1
        np.maximum(at, 0, out=at)
        inside = we[at]
        np.minimum(t, inside, out=inside)
        inside -= ws[at]
        inside[~some] = 0.0
        np.maximum(inside, 0.0, out=inside)
        out = cum[at]
        del at
        out *= some
        out += inside
        return out

    out: np.ndarray = covered_until(end)
    out -= covered_until(start)
    return out
