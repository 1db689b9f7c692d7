"""Known fabric effects reproduced by the flow simulator: ECMP collisions vs adaptive routing, leaf
oversubscription, rail alignment of rings, and jobs that share uplinks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fabricsim.topology import build_cluster
from fabricsim.traffic.jobs import JobSpec, Traffic, build_traffic
from fabricsim.traffic.run import job_metrics, link_tiers, run_traffic, slowdowns


def _shift_permutation(gpus: int) -> Traffic:
    """GPU i sends to GPU i + gpus/2: every flow leaves its scalable unit on its own rail."""
    g = np.arange(gpus)
    tr = Traffic()
    tr.add_stage("perm", 0.0, g, (g + gpus // 2) % gpus, np.full(gpus, 2.0**30))
    tr.gpus["perm"] = g
    return tr


def test_permutation_adaptive_reaches_line_rate_ecmp_matches_balls_into_bins() -> None:
    topo = build_cluster("dgx-h100", nodes=64, fabric="fat-tree")  # 2 SUs, full bisection, 8 spines
    tr = _shift_permutation(topo.num_gpus)
    line = topo.nic_bytes_per_s_per_gpu
    adaptive = run_traffic(topo, tr, "adaptive")
    assert job_metrics(adaptive)[0]["fraction_of_line_rate"] >= 0.95
    ecmp = run_traffic(topo, tr, "ecmp")
    assert job_metrics(ecmp)[0]["fraction_of_line_rate"] < 0.75
    res, fs = ecmp.result, ecmp.flowset
    mean_rate = float((fs.size / (res.flow_drained - res.flow_start)).mean()) / line
    # m flows leave each rail leaf over S spine links of m/S NIC rates each; a flow shares its link with X others,
    # X ~ Binomial(m - 1, 1/S), and gets min(1, (m/S) / (1 + X)) of its line rate.
    m, s = 32, topo.path_count(0, topo.num_gpus // 2)
    expect = sum(math.comb(m - 1, x) * (1 / s) ** x * (1 - 1 / s) ** (m - 1 - x) * min(1.0, m / s / (1 + x))
                 for x in range(m))
    assert mean_rate == pytest.approx(expect, rel=0.10)
    assert mean_rate < 0.9


def _cross_leaf_all_to_all(oversubscription: float) -> float:
    """Every GPU of leaf 0 sends to every GPU of leaf 1 and back (plain fat tree, 4 nodes per leaf)."""
    topo = build_cluster("dgx-h100", nodes=8, fabric="fat-tree", rail_optimized=False, tiers=2,
                         oversubscription=oversubscription)
    a, b = np.arange(32), np.arange(32, 64)
    s = np.concatenate([np.repeat(a, 32), np.repeat(b, 32)])
    d = np.concatenate([np.tile(b, 32), np.tile(a, 32)])
    tr = Traffic()
    tr.add_stage("a2a", 0.0, s, d, np.full(len(s), 2.0**25))
    tr.gpus["a2a"] = np.arange(64)
    return float(job_metrics(run_traffic(topo, tr, "spray"))[0]["bytes_per_s_per_gpu"])


def test_two_to_one_oversubscription_halves_cross_leaf_all_to_all() -> None:
    full, half = _cross_leaf_all_to_all(1), _cross_leaf_all_to_all(2)
    assert half / full == pytest.approx(0.5, rel=0.02)


@pytest.mark.parametrize(("placement", "crosses"), [("packed", False), ("random", True)])
def test_rail_aligned_ring_all_reduce_crosses_no_spine(placement: str, crosses: bool) -> None:
    """NCCL-style rings enter every node on the rail they left the previous one by (8 nodes: the wrap too). 16
    nodes: a single switch no longer holds every NIC, so the fabric has a spine tier to cross."""
    topo = build_cluster("dgx-h100", nodes=16, fabric="fat-tree")
    tr = build_traffic(topo, [JobSpec("ring", 64, "all_reduce", 2.0**26, placement=placement, seed=3)], [])
    run = run_traffic(topo, tr, "ecmp")
    tiers = np.asarray(link_tiers(topo))
    spine_bytes = float(run.result.link_bytes[tiers == "leaf->spine"].sum())
    assert (spine_bytes > 0) == crosses


@pytest.mark.parametrize(("placement", "interferes"), [("packed", False), ("scattered", True)])
def test_all_to_all_jobs_interfere_only_when_scattered(placement: str, interferes: bool) -> None:
    topo = build_cluster("dgx-h100", nodes=16, fabric="fat-tree", rail_optimized=False, tiers=2,
                         oversubscription=2)
    jobs = [JobSpec(name, 64, "all_to_all", 2.0**26, placement=placement) for name in ("a", "b")]
    tr = build_traffic(topo, jobs, [])
    slow = slowdowns(topo, run_traffic(topo, tr, "spray"), "spray")
    if interferes:
        assert min(slow.values()) > 1.2
    else:
        assert max(slow.values()) == pytest.approx(1.0, abs=1e-6)
