"""Issue 43, flow-level simulator: a multi-plane NIC stripes its flows over every plane (as NCCL spreads a NIC's
channels over its ports), so N planes at 1/N of the rate carry what one fabric does under ECMP too, and a failed
plane costs its share; on a dragonfly, spray and adaptive spread over the global links (not one fixed sample of
them) and UGAL picks its non-minimal paths by load, so it is never worse than minimal routing."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabricsim.api import collective
from fabricsim.topology import Topology, build_cluster
from fabricsim.traffic import JobSpec, build_traffic, run_traffic

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def _collective_s(nodes: int, op: str, planes: int) -> float:
    result = collective(nodes=nodes, op=op, min_size="64M", max_size="64M", sim="flow", planes=planes)
    return float(result.prediction.rows[0].time_s)


@pytest.mark.parametrize("nodes", [2, 8, 16])
@pytest.mark.parametrize("op", OPS)
def test_flow_collectives_on_planes_match_the_fat_tree(nodes: int, op: str) -> None:
    one = _collective_s(nodes, op, 1)
    for planes in (2, 4):
        assert _collective_s(nodes, op, planes) == pytest.approx(one, rel=0.03), planes


def _makespan(topo: Topology, pattern: str, routing: str = "ecmp", nbytes: float = 2**28) -> float:
    run = run_traffic(topo, build_traffic(topo, [JobSpec("j", topo.num_gpus, pattern, nbytes)], [], 0), routing)
    return float(run.result.makespan)


@pytest.mark.parametrize("pattern", ["ring", "permutation"])
def test_traffic_on_planes_matches_the_fat_tree_under_ecmp(pattern: str) -> None:
    one = _makespan(build_cluster("dgx-h100", nodes=16), pattern)
    for planes in (2, 4):
        assert _makespan(build_cluster("dgx-h100", nodes=16, planes=planes), pattern) == pytest.approx(one, rel=0.03)


def _plane_links(topo: Topology, plane: int, planes: int) -> np.ndarray:
    first = topo.num_nodes * topo.node.num_endpoints
    per_plane = topo.fabric.num_switches // planes
    lo, hi = first + plane * per_plane, first + (plane + 1) * per_plane
    return ((topo.link_src >= lo) & (topo.link_src < hi)) | ((topo.link_dst >= lo) & (topo.link_dst < hi))


@pytest.mark.parametrize("planes", [2, 4])
def test_a_failed_plane_costs_its_share_of_every_nic(planes: int) -> None:
    """A plane down: every flow between nodes moves its share to the live planes, so a NIC-bound ring takes
    N/(N-1) as long (it loses 1/N of the bandwidth), rather than stalling the flows hashed onto the dead plane."""
    topo = build_cluster("dgx-h100", nodes=16, planes=planes)
    capacity = topo.link_capacity.copy()
    capacity[_plane_links(topo, 0, planes)] = 0.0
    failed = dataclasses.replace(topo, link_capacity=capacity)
    healthy, degraded = _makespan(topo, "ring"), _makespan(failed, "ring")
    assert degraded == pytest.approx(healthy * planes / (planes - 1), rel=0.03)


def _dragonfly(routing: str) -> Topology:
    # 4 groups of 50 nodes (radix-40 switches): small enough to simulate in about a second
    return build_cluster("dgx-h100", nodes=200, fabric="dragonfly", link="qm8700", dragonfly_routing=routing)


def test_dragonfly_spray_and_adaptive_spread_over_the_global_links() -> None:
    topo = _dragonfly("minimal")
    ecmp = _makespan(topo, "permutation", "ecmp", 2**30)
    for routing in ("spray", "adaptive"):
        assert _makespan(topo, "permutation", routing, 2**30) <= ecmp * 1.02, routing
    valiant = _dragonfly("valiant")
    assert _makespan(valiant, "permutation", "spray", 2**30) <= _makespan(valiant, "permutation", "ecmp", 2**30)


def test_ugal_is_no_worse_than_minimal() -> None:
    minimal = _makespan(_dragonfly("minimal"), "permutation", "ecmp", 2**30)
    ugal = _dragonfly("ugal")
    assert _makespan(ugal, "permutation", "ecmp", 2**30) <= minimal * 1.02
    for routing in ("spray", "adaptive"):
        assert _makespan(ugal, "permutation", routing, 2**30) <= minimal * 1.02, routing


@pytest.mark.parametrize(("topo_of", "pattern"), [
    (lambda: build_cluster("dgx-h100", nodes=8, planes=2), "all_to_all"),
    (lambda: build_cluster("dgx-h100", nodes=8, planes=4), "ring"),
    (lambda: _dragonfly("ugal"), "permutation"),
])
def test_the_memory_guard_counts_striped_and_ugal_runs(topo_of, pattern: str) -> None:  # type: ignore[no-untyped-def]
    """ECMP striped over planes, or choosing by UGAL, routes several paths a flow and merges them: the guard's
    estimate still bounds tracemalloc's peak within a factor of 2 (as tests/test_flow_guard.py for the rest)."""
    import tracemalloc

    from fabricsim.network import estimate_flow_run, routed_flowset, simulate

    topo = topo_of()
    tr = build_traffic(topo, [JobSpec("j", topo.num_gpus, pattern, 1e6)], [], 0)
    src, dst, size, stage = tr.arrays()
    release = np.asarray(tr.release, dtype=np.float64)
    before, after = np.asarray(tr.dep_before, dtype=np.int64), np.asarray(tr.dep_after, dtype=np.int64)
    est = estimate_flow_run(topo, src, dst, stage, len(release), before, after, "ecmp")
    simulate(routed_flowset(topo, src, dst, size, stage, release, "ecmp", before, after), topo.link_capacity)
    tracemalloc.start()
    try:
        simulate(routed_flowset(topo, src, dst, size, stage, release, "ecmp", before, after), topo.link_capacity)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= est.peak_bytes <= 2 * peak, (est, peak)
