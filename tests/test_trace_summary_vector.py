"""Issue 48 item 3: the summary's sweeps, vectorised, give exactly what the per-set and per-row forms they replaced
gave: ``coverage`` (one running sum of set bits, not one per set), ``clip`` (in place) and the grouping of
collective calls (``np.bincount`` in row order, not a Python sum per group)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.traces.intervals import clip, coverage, union
from fabricsim.traces.links import CollectiveCall
from fabricsim.traces.summary import _group

ticks = st.integers(0, 40).map(lambda t: t * 0.25)
spans = st.lists(st.tuples(ticks, st.integers(0, 12).map(lambda d: d * 0.25)), max_size=30)


def _arrays(pairs: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    start = np.array([a for a, _ in pairs], dtype=np.float64)
    return start, start + np.array([d for _, d in pairs], dtype=np.float64)


def coverage_per_set(sets: dict[str, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The form it replaced: a running count per set."""
    merged = {name: union(*iv) for name, iv in sets.items()}
    points = np.concatenate([np.concatenate(iv) for iv in merged.values()] or [np.empty(0)])
    order = np.argsort(points, kind="stable")
    lengths = np.diff(points[order]) if len(points) else np.empty(0)
    covered = {}
    offset = 0
    for name, (s, _) in merged.items():
        delta = np.zeros(len(points), dtype=np.int32)
        delta[offset:offset + len(s)] = 1
        delta[offset + len(s):offset + 2 * len(s)] = -1
        offset += 2 * len(s)
        covered[name] = np.cumsum(delta[order])[:-1] > 0 if len(points) else np.empty(0, dtype=bool)
    return lengths, covered


def clip_by_formula(start: np.ndarray, end: np.ndarray, window: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    ws, we = window
    if len(ws) == 0:
        return np.zeros(len(start))
    cum = np.concatenate(([0.0], np.cumsum(we - ws)))

    def until(t: np.ndarray) -> Any:
        i = np.searchsorted(ws, t, side="right")
        inside = np.where(i > 0, np.minimum(t, we[np.maximum(i - 1, 0)]) - ws[np.maximum(i - 1, 0)], 0.0)
        return cum[np.maximum(i - 1, 0)] * (i > 0) + np.maximum(inside, 0.0)

    return until(end) - until(start)  # type: ignore[no-any-return]


@settings(max_examples=150, deadline=None)
@given(sets=st.lists(spans, min_size=0, max_size=7))
def test_coverage_is_the_per_set_sweep(sets: list[list[tuple[float, float]]]) -> None:
    named = {f"s{k}": _arrays(pairs) for k, pairs in enumerate(sets)}
    got = coverage(named)
    lengths, covered = coverage_per_set(named)
    assert np.array_equal(got.lengths, lengths)
    assert set(got.covered) == set(covered)
    for name in covered:
        assert np.array_equal(got.covered[name], covered[name]), name
    unions = {name: union(*iv) for name, iv in named.items()}
    again = coverage(unions, disjoint=True)
    assert np.array_equal(again.lengths, lengths) and all(np.array_equal(again.covered[n], covered[n]) for n in covered)


@settings(max_examples=150, deadline=None)
@given(pairs=spans, window=spans)
def test_clip_is_the_formula(pairs: list[tuple[float, float]], window: list[tuple[float, float]]) -> None:
    start, end = _arrays(pairs)
    win = union(*_arrays(window))
    assert np.array_equal(clip(start, end, win), clip_by_formula(start, end, win))


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 5), st.floats(1e-9, 1e-2)), max_size=40), steps=st.integers(1, 4))
def test_collectives_are_grouped_as_summed_one_by_one(rows: list[tuple[int, float]], steps: int) -> None:
    """Calls of equal content from different name/argument sets are one group; sums in row order."""
    calls = [CollectiveCall("all_reduce", 1024, 8, "bf16"), CollectiveCall("all_gather", 4096, 8, "bf16"),
             CollectiveCall("all_reduce", 1024, 8, "bf16"), CollectiveCall("all_reduce", 0, 0, None),
             CollectiveCall("broadcast", 64, 2, "fp32"), CollectiveCall("all_gather", 4096, 8, "bf16")]
    inverse = np.array([c for c, _ in rows], dtype=np.int64)
    times = np.array([t for _, t in rows], dtype=np.float64)
    groups: dict[tuple[str, int, int, str | None], list[float]] = {}
    for c, t in rows:
        call = calls[c]
        groups.setdefault((call.op, call.size_bytes, call.nranks, call.dtype), []).append(t)
    want = sorted([(op, size, n, dtype, len(ts) / steps, sum(ts) / steps, sum(ts) / len(ts))
                   for (op, size, n, dtype), ts in groups.items()], key=lambda c: (-c[5], c[0], c[1]))
    got = [(c.op, c.size_bytes, c.nranks, c.dtype, c.count, c.time_s, c.mean_time_s)
           for c in _group(inverse, calls, times, steps)]
    assert got == want
