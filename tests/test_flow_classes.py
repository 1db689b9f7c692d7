"""Flow classes (issue 25, item 2): a run with identical flows merged into classes equals the per-flow run
(completion times, stage times, bytes per link), and classes never merge flows that differ."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fabricsim.network.flowclass as flowclass
from fabricsim.network.flowclass import flow_classes
from fabricsim.network.flowsim import FlowSet, simulate


@st.composite
def _with_duplicates(draw: st.DrawFn) -> tuple[FlowSet, np.ndarray]:
    """A few distinct flows (path, size, stage), each repeated 1-4 times with its own latency, shuffled."""
    nlinks = draw(st.integers(1, 6))
    cap = np.array(draw(st.lists(st.floats(0.5, 10), min_size=nlinks, max_size=nlinks)))
    kinds = draw(st.integers(1, 6))
    stages = draw(st.integers(1, 3))
    rows, sizes, stage_of = [], [], []
    for _ in range(kinds):
        path = sorted(set(draw(st.lists(st.integers(0, nlinks - 1), min_size=1, max_size=3))))
        copies = draw(st.integers(1, 4))
        size = draw(st.floats(0.0, 50.0))
        stage = draw(st.integers(0, stages - 1))
        rows += [path] * copies
        sizes += [size] * copies
        stage_of += [stage] * copies
    order = np.array(draw(st.permutations(range(len(rows)))))
    rows = [rows[i] for i in order]
    lens = np.array([len(r) for r in rows])
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(lens)
    links = np.array([link for r in rows for link in r], dtype=np.int64)
    latency = np.array(draw(st.lists(st.floats(0.0, 2.0), min_size=len(rows), max_size=len(rows))))
    release = np.array(draw(st.lists(st.floats(0.0, 5.0), min_size=stages, max_size=stages)))
    chain = np.arange(stages - 1, dtype=np.int64)
    fs = FlowSet(indptr, links, np.zeros(0), np.array(sizes)[order], latency, np.array(stage_of)[order], release,
                 chain, chain + 1)
    return fs, cap


@settings(max_examples=150, deadline=None)
@given(_with_duplicates())
def test_classes_equal_the_per_flow_run(case: tuple[FlowSet, np.ndarray]) -> None:
    fs, cap = case
    merged = simulate(fs, cap, check=True)
    alone = simulate(fs, cap, check=True, aggregate=False)
    for got, want in ((merged.flow_drained, alone.flow_drained), (merged.flow_finish, alone.flow_finish),
                      (merged.flow_start, alone.flow_start), (merged.stage_finish, alone.stage_finish),
                      (merged.link_bytes, alone.link_bytes), (merged.delivered, alone.delivered)):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert merged.max_utilisation <= 1 + 1e-9
    assert merged.events <= alone.events


def test_identical_flows_share_a_class_and_different_ones_do_not() -> None:
    indptr = np.array([0, 2, 4, 6, 8, 9])
    links = np.array([0, 1, 0, 1, 0, 2, 0, 1, 1])
    size = np.array([5.0, 5.0, 5.0, 6.0, 5.0])
    stage = np.array([0, 0, 0, 0, 0])
    found = flow_classes(indptr, links, np.zeros(0), size, stage)
    assert found is not None
    first, cls = found
    assert cls[0] == cls[1] and len(set(cls.tolist())) == 4  # 0 and 1 alike; 2 (path), 3 (size), 4 differ
    assert first[cls[1]] == 0


def test_a_hash_collision_splits_instead_of_merging(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every flow hashes alike: the entry-by-entry check still keeps unlike flows apart."""
    real = flowclass._kernels()

    def constant(*args: object) -> np.ndarray:
        return np.zeros(len(args[0]) - 1, dtype=np.uint64)  # type: ignore[arg-type]

    monkeypatch.setattr(flowclass, "_kernels", lambda: (constant, real[1]))
    monkeypatch.setattr(flowclass, "WORTH", 1.0)
    indptr = np.array([0, 1, 2, 3, 4])
    links = np.array([0, 0, 1, 1])
    found = flow_classes(indptr, links, np.zeros(0), np.ones(4), np.zeros(4, dtype=np.int64))
    assert found is not None
    _, cls = found
    assert cls[0] == cls[1] and cls[2] != cls[0] and cls[3] != cls[0]
    cap = np.array([1.0, 1.0])
    fs = FlowSet(indptr, links, np.zeros(0), np.ones(4), np.zeros(4), np.zeros(4, dtype=np.int64), np.zeros(1))
    assert simulate(fs, cap).flow_drained == pytest.approx(simulate(fs, cap, aggregate=False).flow_drained)


def test_no_duplicates_runs_per_flow() -> None:
    indptr = np.array([0, 1, 2, 3])
    assert flow_classes(indptr, np.array([0, 1, 2]), np.zeros(0), np.ones(3), np.zeros(3, dtype=np.int64)) is None
