"""Schedules spell out the transfers the closed forms price: bytes are conserved."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.collectives import SWITCH, busbw_factor, bytes_sent_per_rank, schedule, schedule_size
from fabricsim.errors import SpecError


@settings(max_examples=50, deadline=None)
@given(n=st.integers(2, 64), op=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]))
def test_ring_bytes_match_busbw_factor(n: int, op: str) -> None:
    size = 1_048_576.0
    sent = bytes_sent_per_rank(schedule("ring", op, n, 8, size), n)
    expected = size * busbw_factor(op, n) if op == "all_reduce" else size * (n - 1) / n
    assert np.allclose(sent, expected)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 48))
def test_all_to_all_sends_n_minus_1_over_n(n: int) -> None:
    size = 4096.0 * n
    phases = schedule("direct", "all_to_all", n, 8, size)
    assert np.allclose(bytes_sent_per_rank(phases, n), size * (n - 1) / n)
    received = np.zeros(n)
    np.add.at(received, phases[0].dst, phases[0].bytes)
    assert np.allclose(received, size * (n - 1) / n)


@pytest.mark.parametrize("n", [2, 4, 8, 16, 64])
def test_halving_doubling_moves_ring_volume(n: int) -> None:
    size = 2.0**20
    sent = bytes_sent_per_rank(schedule("halving_doubling", "all_reduce", n, 8, size), n)
    assert np.allclose(sent, 2 * size * (n - 1) / n)


@pytest.mark.parametrize(("n", "p"), [(16, 8), (32, 8), (64, 4)])
def test_hierarchical_volume(n: int, p: int) -> None:
    size = 2.0**24
    nodes = n // p
    sent = bytes_sent_per_rank(schedule("hierarchical", "all_reduce", n, p, size), n)
    expected = 2 * size * (p - 1) / p + 2 * (nodes - 1) / nodes * size / p
    assert np.allclose(sent, expected)


def test_nvls_uses_the_switch_and_moves_s_times_n_plus_1_over_n() -> None:
    n, size = 8, 2.0**20
    phases = schedule("nvls", "all_reduce", n, 8, size)
    assert any((ph.dst == SWITCH).any() for ph in phases)
    assert np.allclose(bytes_sent_per_rank(phases, n), size * (n + 1) / n)


@pytest.mark.parametrize(("n", "per_node", "channels"), [(13, 8, 1), (32, 8, 4), (16, 4, 2), (3, 1, 1)])
def test_tree_reaches_every_rank(n: int, per_node: int, channels: int) -> None:
    """The pipelined double binary tree: one phase whose edges join every rank, each edge used both ways (reduce
    up, broadcast down) with as many bytes."""
    (phase,) = schedule("tree", "all_reduce", n, per_node, 1024.0, channels=channels)
    assert set(phase.src.tolist()) == set(range(n)) == set(phase.dst.tolist())
    reached, frontier = {0}, [0]
    while frontier:
        r = frontier.pop()
        for nxt in phase.dst[phase.src == r].tolist():
            if nxt not in reached:
                reached.add(nxt)
                frontier.append(nxt)
    assert reached == set(range(n))
    sent = {(int(a), int(b)): float(s) for a, b, s in zip(phase.src, phase.dst, phase.bytes, strict=True)}
    assert all(sent.get((b, a)) is not None for a, b in sent)


def test_unknown_schedule_raises() -> None:
    with pytest.raises(SpecError):
        schedule("nvls", "broadcast", 8, 8, 1024.0)
    with pytest.raises(SpecError):
        schedule("halving_doubling", "all_reduce", 6, 8, 1024.0)


ALGORITHMS = ["ring", "direct", "halving_doubling", "tree", "nvls", "hierarchical", "collnet", "nvls_tree"]
OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv"]


@settings(max_examples=200, deadline=None)
@given(algo=st.sampled_from(ALGORITHMS), op=st.sampled_from(OPS), n=st.integers(2, 40), p=st.integers(1, 9),
       channels=st.integers(1, 4))
def test_schedule_size_counts_the_built_schedule(algo: str, op: str, n: int, p: int, channels: int) -> None:
    """The closed-form (transfers, phases) a flow run is refused on equals the schedule it would build, and both
    refuse the same combinations."""
    try:
        phases = schedule(algo, op, n, p, 1e6, channels)
    except SpecError:
        with pytest.raises(SpecError):
            schedule_size(algo, op, n, p, channels)
        return
    assert schedule_size(algo, op, n, p, channels) == (sum(len(ph.src) for ph in phases), len(phases))
