"""The flow simulator's resource guard (issue 21): the peak-memory estimate bounds tracemalloc's measured peak
within a factor of 2 on random small runs, runs above the memory limit are refused in one line (library and CLI),
and long runs report progress."""

from __future__ import annotations

import tracemalloc
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.catalog import default_catalog
from fabricsim.cli import app
from fabricsim.collectives import predict_on_flow
from fabricsim.errors import SpecError
from fabricsim.network import estimate_flow_run, flow_progress, routed_flowset, simulate
from fabricsim.topology import ClusterSpec, Topology, build_topology
from fabricsim.traffic import JobSpec, build_traffic

FIXED_REGIME = 64 * 1024
PATTERNS = ("permutation", "all_to_all", "ring", "incast", "all_reduce", "all_gather", "reduce_scatter")


@cache
def _topology(nodes: int, tiers: int) -> Topology:
    spec = ClusterSpec(system="dgx-h100", nodes=nodes, fabric="fat-tree", link="ib-ndr", tiers=tiers)
    return build_topology(spec, default_catalog())


def _flows(topo: Topology, jobs: list[JobSpec]) -> tuple[np.ndarray, ...]:
    tr = build_traffic(topo, jobs, [], 0)
    src, dst, size, stage = tr.arrays()
    return (src, dst, size, stage, np.asarray(tr.release, dtype=np.float64),
            np.asarray(tr.dep_before, dtype=np.int64), np.asarray(tr.dep_after, dtype=np.int64))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
# Two runs well inside the factor-2 regime (thousands of flows), whatever hypothesis draws.
@example(nodes=12, tiers=2, patterns=["all_to_all"], nbytes=1e6, routing="ecmp", fraction=1.0, placement="packed",
         seed=0)
@example(nodes=6, tiers=3, patterns=["all_reduce", "permutation"], nbytes=1e8, routing="adaptive", fraction=1.0,
         placement="scattered", seed=1)
@given(nodes=st.sampled_from([1, 2, 4, 6, 12]), tiers=st.sampled_from([2, 3]),
       patterns=st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2),
       nbytes=st.floats(1.0, 2.0**30), routing=st.sampled_from(["ecmp", "spray", "adaptive"]),
       fraction=st.floats(0.2, 1.0), placement=st.sampled_from(["packed", "scattered", "random"]),
       seed=st.integers(0, 100))
def test_estimate_bounds_the_measured_peak_within_2x(nodes: int, tiers: int, patterns: list[str], nbytes: float,
                                                     routing: str, fraction: float, placement: str,
                                                     seed: int) -> None:
    """tracemalloc's peak of routing + simulation <= estimate <= 2 x that peak.

    Precisely: the upper bound (peak <= estimate) holds on every instance; the factor-2 lower side is asserted
    once the estimate passes `FIXED_REGIME` (64 KiB). Below it the run is a few dozen flows and its peak is the
    fixed Python-object overhead (array headers, the result objects: measured 10-20 KB, varying from call to
    call with the interpreter's free lists), which the estimate covers with a constant (BASE_BYTES)."""
    topo = _topology(nodes, tiers)
    per_job = max(2, int(topo.num_gpus * fraction) // len(patterns))
    if per_job * len(patterns) > topo.num_gpus:
        per_job = topo.num_gpus // len(patterns)
    if per_job < 2:
        return
    jobs = [JobSpec(f"j{i}", per_job, p, nbytes, placement, 0.0, seed + i) for i, p in enumerate(patterns)]
    src, dst, size, stage, release, before, after = _flows(topo, jobs)
    est = estimate_flow_run(topo, src, dst, stage, len(release), before, after, routing)
    simulate(routed_flowset(topo, src, dst, size, stage, release, routing, before, after), topo.link_capacity)
    tracemalloc.start()  # measured on the second run: the first fills the topology's and the process's caches
    try:
        fs = routed_flowset(topo, src, dst, size, stage, release, routing, before, after)
        simulate(fs, topo.link_capacity)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert est.flows == fs.num_flows
    assert peak <= est.peak_bytes, (est, peak)
    if est.peak_bytes >= FIXED_REGIME:
        assert est.peak_bytes <= 2 * peak, (est, peak)


def test_entries_are_exact_on_small_runs() -> None:
    topo = _topology(36, 2)
    for routing in ("ecmp", "spray"):
        src, dst, size, stage, release, before, after = _flows(topo, [JobSpec("a", 288, "permutation", 1e6)])
        est = estimate_flow_run(topo, src, dst, stage, len(release), before, after, routing)
        fs = routed_flowset(topo, src, dst, size, stage, release, routing, before, after)
        assert est.entries == len(fs.links)


def test_chained_stages_count_only_the_largest_stage_as_active() -> None:
    """A ring all-reduce runs its steps one after another: only one step's entries are active at once."""
    topo = _topology(2, 2)
    src, dst, _, stage, release, before, after = _flows(topo, [JobSpec("a", 16, "all_reduce", 1e6)])
    est = estimate_flow_run(topo, src, dst, stage, len(release), before, after)
    assert len(release) == 30
    assert est.active_entries * len(release) == pytest.approx(est.entries, rel=0.2)


def test_run_above_the_limit_is_refused_in_one_line() -> None:
    topo = _topology(4, 2)
    src, dst, size, stage, release, before, after = _flows(topo, [JobSpec("a", 32, "all_to_all", 1e6)])
    with pytest.raises(SpecError, match=r"too large for this machine: 992 flows .* MB of memory, 0.1 MB available"):
        routed_flowset(topo, src, dst, size, stage, release, "ecmp", before, after, memory_limit_bytes=100_000)


def test_cli_refuses_in_one_line_with_exit_2(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICSIM_MEMORY_LIMIT", "1M")
    args = ["--nodes", "16", "--ib", "ndr"]
    for cmd in (["traffic", *args, "--tiers", "2", "--pattern", "all_to_all"],
                ["collective", *args, "--op", "all_to_all", "--min", "1G", "--max", "1G", "--sim", "flow"]):
        result = runner.invoke(app, cmd)
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "too large for this machine" in lines[0] and "1.0 MB available" in lines[0]
        assert "fewer" in lines[0] and "FABRICSIM_MEMORY_LIMIT" in lines[0]


def test_traffic_refuses_huge_patterns_before_building_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The old README 256-node all-reduce (2 x 2047 steps x 2048 GPUs x 8 channels) is refused before its
    schedule is built."""
    monkeypatch.setenv("FABRICSIM_MEMORY_LIMIT", "4G")
    topo = _topology(256, 2)
    tracemalloc.start()
    try:
        with pytest.raises(SpecError, match="67,076,096 flows"):
            build_traffic(topo, [JobSpec("a", topo.num_gpus, "all_reduce", 2.0**30)], [], 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50e6


def test_collective_refuses_huge_schedules_before_building_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4096-rank ring all-reduce (2 x 4095 steps x 4096 ranks x 8 channels) is refused from the schedule's
    closed-form size, before its phases are spelled out."""
    monkeypatch.setenv("FABRICSIM_MEMORY_LIMIT", "4G")
    topo = _topology(512, 3)
    tracemalloc.start()
    try:
        with pytest.raises(SpecError, match=r"268,369,920 flows .*drop --sim flow"):
            predict_on_flow(topo, list(range(topo.num_gpus)), "all_reduce", [2**30])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50e6


def test_progress_is_reported() -> None:
    topo = _topology(2, 2)
    src, dst, size, stage, release, before, after = _flows(topo, [JobSpec("a", 16, "all_reduce", 1e6)])
    seen: list[tuple[str, int, int]] = []
    with flow_progress(lambda what, done, total: seen.append((what, done, total))):
        fs = routed_flowset(topo, src, dst, size, stage, release, "ecmp", before, after)
        simulate(fs, topo.link_capacity)
    assert {w for w, _, _ in seen} == {"routing", "simulating"}
    sims = [d for w, d, _ in seen if w == "simulating"]
    assert sims == sorted(sims) and sims[-1] <= fs.num_flows


@pytest.mark.parametrize("pattern", PATTERNS)
def test_pattern_flow_count_matches_the_built_flows(pattern: str) -> None:
    from fabricsim.traffic import pattern_flow_count

    topo = _topology(2, 2)
    for gpus in (2, 5, 16):
        src, *_ = _flows(topo, [JobSpec("a", gpus, pattern, 1e6)])
        assert pattern_flow_count(pattern, gpus, topo.gpus_per_node) == len(src)


def test_path_sample_does_not_alias_on_all_to_all() -> None:
    """The path-length sample sees the pattern's real mix: on 256-node all_to_all its mean path length is within 10%
    of an independent sample of 20,000 flows. (An even stride aliased at 512 nodes, where a stride equals one
    source's row: 3 links a flow instead of ~10, an 8.7 GB estimate for a run past 21 GB; that size is too large
    for a unit test, so this checks the sample's agreement rather than that case.)"""
    from fabricsim.network import budget

    topo = _topology(256, 2)
    src, dst, _, stage, release, before, after = _flows(topo, [JobSpec("a", topo.num_gpus, "all_to_all", 1e6)])
    est = estimate_flow_run(topo, src, dst, stage, len(release), before, after, "ecmp")
    assert est.flows > budget.SAMPLE
    pick = np.random.default_rng(1).choice(len(src), 20_000, replace=False)
    reference = topo.route(src[pick], dst[pick], pick).lengths.mean()
    assert est.hops == pytest.approx(float(reference), rel=0.1)
