"""Flow simulator exactness: textbook max-min allocations, agreement with the closed-form network models, and
invariants (capacity, bytes delivered once, latency floor, monotone in capacity) on random cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.collectives import schedule
from fabricsim.errors import SpecError
from fabricsim.network import AnalyticalNetwork, LinkLoadNetwork, schedule_time
from fabricsim.network.flownet import FlowSimNetwork, time_schedule_flow
from fabricsim.network.flowsim import FlowSet, simulate
from fabricsim.network.maxmin import max_min_rates
from fabricsim.topology import build_cluster


def _rates(capacity: list[float], paths: list[list[int]], weights: list[list[float]] | None = None) -> np.ndarray:
    links = np.array([link for p in paths for link in p], dtype=np.int64)
    flows = np.repeat(np.arange(len(paths)), [len(p) for p in paths])
    w = np.ones(len(links)) if weights is None else np.array([x for ws in weights for x in ws])
    return max_min_rates(np.array(capacity, dtype=float), links, flows, w, len(paths))


def test_single_link_shared_equally() -> None:
    assert _rates([12.0], [[0], [0], [0]]) == pytest.approx([4, 4, 4])


def test_bertsekas_gallager_line_network() -> None:
    """Data Networks, 6.5.2: one flow over three unit links, one more flow on each link: every rate is 1/2."""
    assert _rates([1, 1, 1], [[0, 1, 2], [0], [1], [2]]) == pytest.approx([0.5] * 4)


def test_two_bottleneck_levels() -> None:
    """Link B (4) binds flows 2 and 3 at 2 each; link A (10) then gives the rest, 8, to flows 0 and 1."""
    assert _rates([10, 4], [[0], [0], [0, 1], [1]]) == pytest.approx([4, 4, 2, 2])


def test_parking_lot_unequal_capacities() -> None:
    """Link 0 (1) is shared by flows 0 and 1; flow 2 takes what flow 0 leaves on link 1 (2)."""
    assert _rates([1, 2], [[0, 1], [0], [1]]) == pytest.approx([0.5, 0.5, 1.5])


def test_split_flow_weights() -> None:
    """A flow sprayed half/half over links 0 and 1 shares link 0 with a whole flow: both at 2/3."""
    r = _rates([1, 1], [[0, 1], [0]], [[0.5, 0.5], [1.0]])
    assert r == pytest.approx([2 / 3, 2 / 3])


def test_unconstrained_flow_is_infinite() -> None:
    assert np.isinf(max_min_rates(np.ones(1), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), 2)).all()


def _flowset(paths: list[list[int]], size: list[float], latency: list[float] | None = None,
             stage: list[int] | None = None, release: list[float] | None = None,
             deps: tuple[list[int], list[int]] = ([], [])) -> FlowSet:
    indptr = np.concatenate([[0], np.cumsum([len(p) for p in paths])]).astype(np.int64)
    links = np.array([link for p in paths for link in p], dtype=np.int64)
    n = len(paths)
    stages = np.zeros(n, np.int64) if stage is None else np.array(stage, np.int64)
    rel = np.zeros(int(stages.max()) + 1 if n else 1) if release is None else np.array(release, float)
    return FlowSet(indptr, links, np.ones(len(links)), np.array(size, float),
                   np.zeros(n) if latency is None else np.array(latency, float), stages, rel,
                   np.array(deps[0], np.int64), np.array(deps[1], np.int64))


def test_departures_free_capacity_for_the_rest() -> None:
    """Two flows on one link of 1 B/s: the 1-byte flow leaves at 2 s; the 3-byte one then runs alone, ends at 4 s."""
    res = simulate(_flowset([[0], [0]], [1, 3]), np.ones(1))
    assert res.flow_finish == pytest.approx([2, 4])
    assert res.events == 2


def test_stages_wait_for_predecessors_and_release() -> None:
    fs = _flowset([[0], [0], [1]], [2, 2, 1], latency=[0.5, 0.5, 0.0], stage=[0, 0, 1], release=[0, 10],
                  deps=([0], [1]))
    res = simulate(fs, np.array([2.0, 1.0]))
    assert res.stage_finish[0] == pytest.approx(2.5)
    assert res.flow_start[2] == pytest.approx(10.0)
    assert res.makespan == pytest.approx(11.0)


def test_dependency_cycle_is_an_error() -> None:
    with pytest.raises(SpecError, match="cycle"):
        simulate(_flowset([[0], [0]], [1, 1], stage=[0, 1], deps=([0, 1], [1, 0])), np.ones(1))


def test_no_shared_links_equals_analytical() -> None:
    topo = build_cluster("dgx-h100", nodes=2, fabric="fat-tree")
    src = np.arange(8)
    dst = src + 8  # one flow per rail: no two flows share a link
    sizes = np.linspace(1e8, 8e8, 8)
    flow = FlowSimNetwork().phase(topo, src, dst, sizes)
    exact = AnalyticalNetwork().phase(topo, src, dst, sizes)
    assert flow.time_s == pytest.approx(exact.time_s, rel=1e-12)


def test_one_shared_bottleneck_equals_link_load() -> None:
    """Incast of unequal flows into one GPU: its NIC link drains all bytes at line rate, whatever the shares."""
    topo = build_cluster("dgx-h100", nodes=4, fabric="fat-tree")
    src, dst = np.array([8, 16, 24]), np.zeros(3, np.int64)
    sizes = np.array([1e8, 3e8, 5e8])
    flow = FlowSimNetwork().phase(topo, src, dst, sizes)
    bound = LinkLoadNetwork().phase(topo, src, dst, sizes)
    assert flow.time_s == pytest.approx(bound.time_s, rel=1e-9)
    assert flow.bottleneck_kind == "infiniband"


def test_collective_schedule_times_on_flow_simulator() -> None:
    """An 8-channel ring all-reduce on 4 nodes: no link is shared within a phase, so it equals the link-load time."""
    topo = build_cluster("dgx-h100", nodes=4, fabric="fat-tree")
    phases = schedule("ring", "all_reduce", 32, 8, 2.0**30, channels=8)
    total, timings = time_schedule_flow(topo, phases, "ecmp")
    bound, _ = schedule_time(LinkLoadNetwork(), topo, np.arange(32), phases)
    assert len(timings) == len(phases)
    assert total == pytest.approx(bound, rel=1e-9)
    assert sum(t.time_s for t in timings) == pytest.approx(total, rel=1e-9)


def test_in_network_reduction_is_refused() -> None:
    topo = build_cluster("dgx-h100", nodes=1, fabric="fat-tree")
    with pytest.raises(SpecError, match="in-network"):
        time_schedule_flow(topo, schedule("nvls", "all_reduce", 8, 8, 1024.0))


@st.composite
def _cases(draw: st.DrawFn) -> tuple[FlowSet, np.ndarray]:
    nlinks = draw(st.integers(1, 6))
    cap = np.array(draw(st.lists(st.floats(0.5, 10), min_size=nlinks, max_size=nlinks)))
    n = draw(st.integers(1, 12))
    paths = [sorted(set(draw(st.lists(st.integers(0, nlinks - 1), min_size=1, max_size=3)))) for _ in range(n)]
    size = draw(st.lists(st.floats(0, 50), min_size=n, max_size=n))
    latency = draw(st.lists(st.floats(0, 2), min_size=n, max_size=n))
    stages = draw(st.integers(1, 3))
    stage = draw(st.lists(st.integers(0, stages - 1), min_size=n, max_size=n))
    release = draw(st.lists(st.floats(0, 5), min_size=stages, max_size=stages))
    chain = list(range(stages - 1))
    return _flowset(paths, size, latency, stage, release, (chain, [c + 1 for c in chain])), cap


@settings(max_examples=150, deadline=None)
@given(_cases(), st.floats(1.0, 4.0))
def test_invariants(case: tuple[FlowSet, np.ndarray], scale: float) -> None:
    fs, cap = case
    res = simulate(fs, cap, check=True)
    assert res.max_utilisation <= 1 + 1e-9
    assert res.delivered == pytest.approx(fs.size, rel=1e-9, abs=1e-9)
    assert (res.flow_finish >= res.flow_start + fs.latency - 1e-12).all()
    assert (res.flow_start >= fs.stage_release[fs.stage] - 1e-12).all()
    assert res.link_bytes.sum() == pytest.approx(float((np.diff(fs.indptr) * fs.size).sum()), rel=1e-9, abs=1e-9)
    faster = simulate(fs, cap * scale)
    assert (faster.flow_finish <= res.flow_finish + 1e-9).all()


def _reference_max_min(cap: np.ndarray, paths: list[list[int]], weights: list[list[float]]) -> np.ndarray:
    """Textbook progressive filling, one bottleneck level per round, in plain Python."""
    rate = [np.inf if not p else 0.0 for p in paths]
    frozen = [not p for p in paths]
    remaining = list(cap)
    while not all(frozen):
        shares = []
        for link in range(len(cap)):
            demand = sum(w for f, p in enumerate(paths) if not frozen[f]
                         for l2, w in zip(p, weights[f], strict=True) if l2 == link)
            shares.append(remaining[link] / demand if demand > 0 else np.inf)
        level = min(shares)
        hit = {f for f, p in enumerate(paths) if not frozen[f] and any(shares[link] <= level * (1 + 1e-12)
                                                                      for link in p)}
        for f in hit:
            rate[f], frozen[f] = level, True
            for link, w in zip(paths[f], weights[f], strict=True):
                remaining[link] -= w * level
    return np.array(rate)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_max_min_matches_textbook_progressive_filling(data: st.DataObject) -> None:
    nlinks = data.draw(st.integers(1, 6))
    cap = np.array(data.draw(st.lists(st.sampled_from([1.0, 2.0, 3.0, 5.0, 7.5]), min_size=nlinks,
                                      max_size=nlinks)))
    n = data.draw(st.integers(1, 10))
    paths = [sorted(set(data.draw(st.lists(st.integers(0, nlinks - 1), max_size=4)))) for _ in range(n)]
    weights = [[data.draw(st.sampled_from([1.0, 0.5, 0.25])) for _ in p] for p in paths]
    assert _rates(list(cap), paths, weights) == pytest.approx(_reference_max_min(cap, paths, weights), rel=1e-9)
