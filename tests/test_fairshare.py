"""The compiled heap filling (`fairshare`) equals the reference round-parallel filling (`maxmin`), fully and
incrementally; the simulator's incremental events equal full refills at every event."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.network.fairshare import fair_rates, unload
from fabricsim.network.flowsim import FlowSet, simulate
from fabricsim.network.maxmin import max_min_rates


@st.composite
def _instances(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Random links, flows over 1-3 of them with split weights, and solo caps on some flows."""
    nlinks = draw(st.integers(1, 8))
    cap = np.array(draw(st.lists(st.floats(0.5, 10), min_size=nlinks, max_size=nlinks)))
    n = draw(st.integers(1, 25))
    paths = [sorted(set(draw(st.lists(st.integers(0, nlinks - 1), min_size=1, max_size=3)))) for _ in range(n)]
    lens = np.array([len(p) for p in paths])
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(lens)
    links = np.array([link for p in paths for link in p], dtype=np.int64)
    weights = np.array(draw(st.lists(st.sampled_from([1.0, 0.5, 0.25]), min_size=len(links),
                                     max_size=len(links))))
    owner = np.repeat(np.arange(n), lens)
    solo = np.full(n, np.inf)
    np.minimum.at(solo, owner, cap[links] / weights)
    caps = draw(st.lists(st.one_of(st.none(), st.floats(0.05, 5)), min_size=n, max_size=n))
    solo = np.array([s if c is None else min(s, c) for s, c in zip(solo, caps, strict=True)])
    return cap, indptr, links, weights, solo


@settings(max_examples=200, deadline=None)
@given(_instances())
def test_heap_filling_equals_the_reference(case: tuple[np.ndarray, ...]) -> None:
    cap, indptr, links, weights, solo = case
    n = len(indptr) - 1
    owner = np.repeat(np.arange(n), np.diff(indptr))
    ref = max_min_rates(cap, links, owner, weights, n, solo)
    got = fair_rates(cap, indptr, links, weights, np.arange(n), solo)
    assert got == pytest.approx(ref, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(_instances(), st.data())
def test_incremental_filling_after_departures_equals_a_full_one(case: tuple[np.ndarray, ...],
                                                                data: st.DataObject) -> None:
    """Flows leave (any set): refilling only those at or above the lowest rate that left gives the full answer."""
    cap, indptr, links, weights, solo = case
    n = len(indptr) - 1
    everyone = np.arange(n)
    load = np.zeros(len(cap))
    rate = fair_rates(cap, indptr, links, weights, everyone, solo, load=load)
    gone = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n))), dtype=np.int64)
    stay = np.setdiff1d(everyone, gone)
    unload(load, indptr, links, weights, gone, rate[gone])
    keep_below = float(rate[gone].min())
    incremental = fair_rates(cap, indptr, links, weights, stay, solo[stay], rate[stay], keep_below, load)
    full = fair_rates(cap, indptr, links, weights, stay, solo[stay])
    assert incremental == pytest.approx(full, rel=1e-9)
    owner = np.repeat(np.arange(len(stay)), np.diff(indptr)[stay])
    idx = np.concatenate([np.arange(indptr[f], indptr[f + 1]) for f in stay]) if len(stay) else np.zeros(0, int)
    expect = np.bincount(links[idx], weights=weights[idx] * full[owner], minlength=len(cap))
    assert load == pytest.approx(expect, rel=1e-9, abs=1e-9)  # the load kept in place is the survivors'


@settings(max_examples=100, deadline=None)
@given(_instances(), st.data())
def test_incremental_events_equal_full_refills(case: tuple[np.ndarray, ...], data: st.DataObject) -> None:
    cap, indptr, links, weights, _ = case
    n = len(indptr) - 1
    size = np.array(data.draw(st.lists(st.floats(0.0, 50.0), min_size=n, max_size=n)))
    stages = data.draw(st.integers(1, 3))
    stage = np.array(data.draw(st.lists(st.integers(0, stages - 1), min_size=n, max_size=n)), dtype=np.int64)
    release = np.array(data.draw(st.lists(st.floats(0.0, 5.0), min_size=stages, max_size=stages)))
    fs = FlowSet(indptr, links, weights, size, np.zeros(n), stage, release)
    a = simulate(fs, cap, check=True)
    b = simulate(fs, cap, check=True, incremental=False)
    assert a.flow_drained == pytest.approx(b.flow_drained, rel=1e-9, abs=1e-12)
    assert a.stage_finish == pytest.approx(b.stage_finish, rel=1e-9, abs=1e-12)
    assert a.max_utilisation <= 1 + 1e-9
    assert a.delivered == pytest.approx(size, rel=1e-9, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=70), st.data())
def test_min_tree_answers_as_numpy(values: list[float], data: st.DataObject) -> None:
    """The simulator's min tree: lowest value, every slot at or below a threshold, after point updates."""
    from fabricsim.network.mintree import MinTree

    v = np.array(values)
    negate = data.draw(st.booleans())
    tree = MinTree(v, negate=negate)
    seen = -v if negate else v.copy()
    for _ in range(3):
        idx = np.array(sorted(data.draw(st.sets(st.integers(0, len(v) - 1), max_size=len(v)))), dtype=np.int64)
        new = np.array(data.draw(st.lists(st.floats(-1e3, 1e3), min_size=len(idx), max_size=len(idx))))
        tree.set(idx, new)
        seen[idx] = new
        assert tree.lowest == seen.min()
        threshold = data.draw(st.floats(-1e3, 1e3))
        assert tree.at_or_below(threshold).tolist() == np.flatnonzero(seen <= threshold).tolist()
