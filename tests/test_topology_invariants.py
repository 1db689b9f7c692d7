"""Invariants over random cluster sizes, fabrics and ratios (hypothesis): paths exist, chain and never loop; rail
fabrics leave by the GPU's own rail NIC; bisection and oversubscription follow the design and match max-flow;
counts grow as the design says when nodes double."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricsim.errors import SpecError
from fabricsim.topology import LINK_KINDS, Topology, bom, build_cluster
from topology_checks import all_pairs, assert_valid_routes, max_flow_gbps

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FABRIC_KINDS = (LINK_KINDS.index("infiniband"), LINK_KINDS.index("ethernet"))


@st.composite
def small_clusters(draw: st.DrawFn) -> dict[str, Any]:
    fabric = draw(st.sampled_from(["fat-tree", "fat-tree", "torus", "mesh"]))
    system = draw(st.sampled_from(["dgx-h100", "pcie-h100-8gpu", "dgx-a100"]))
    link = "ib-hdr" if system == "dgx-a100" else draw(st.sampled_from(["ib-ndr", "eth-400g", "ib-xdr"]))
    nics = 4 if system == "pcie-h100-8gpu" else 8
    if fabric == "mesh":
        return {"system": system, "nodes": draw(st.integers(1, nics + 1)), "fabric": fabric, "link": link}
    if fabric == "torus":
        return {"system": system, "nodes": draw(st.integers(1, 20)), "fabric": fabric, "link": link}
    return {"system": system, "nodes": draw(st.integers(1, 24)), "fabric": fabric, "link": link,
            "rail_optimized": draw(st.booleans()), "tiers": draw(st.sampled_from([None, 2, 3])),
            "oversubscription": draw(st.sampled_from([1.0, 1.5, 2.0, 3.0, 4.0]))}


@FAST
@given(small_clusters())
def test_every_gpu_pair_has_a_connected_loop_free_path(cfg: dict[str, Any]) -> None:
    topo = build_cluster(**cfg)
    src, dst = all_pairs(topo)
    routes = topo.route(src, dst, np.arange(len(src)) * 7919)
    assert_valid_routes(topo, src, dst, routes)


def test_nvl72_racks_all_pairs() -> None:
    topo = build_cluster("gb200-nvl72", nodes=2)
    src, dst = all_pairs(topo)
    routes = topo.route(src, dst)
    assert_valid_routes(topo, src, dst, routes)
    same_rack = (src // 72 == dst // 72) & (src != dst)
    assert (routes.lengths[same_rack] == 2).all()  # GPU -> NVLink switch -> GPU


@FAST
@given(nodes=st.integers(2, 80), tiers=st.sampled_from([None, 3]), k=st.sampled_from([1.0, 2.0, 4.0]),
       system=st.sampled_from(["dgx-h100", "pcie-h100-8gpu", "gb200-nvl72"]), flow=st.integers(0, 10**6))
def test_rail_optimized_paths_leave_and_arrive_by_own_rail_nic(nodes: int, tiers: int | None, k: float, system: str,
                                                               flow: int) -> None:
    if system == "gb200-nvl72":
        nodes = min(nodes, 6)
    topo = build_cluster(system, nodes=nodes, tiers=tiers, oversubscription=k)
    rng = np.random.default_rng(flow)
    src = rng.integers(0, topo.num_gpus, 400)
    dst = (src + rng.integers(topo.gpus_per_node, topo.num_gpus, 400)) % topo.num_gpus
    inter = src // topo.gpus_per_node != dst // topo.gpus_per_node
    src, dst = src[inter], dst[inter]
    routes = topo.route(src, dst, rng.integers(0, 2**40, len(src)))
    for i in range(len(src)):
        path = routes[i]
        fabric = path[np.isin(topo.link_kind[path], FABRIC_KINDS)]
        first, last = fabric[0], fabric[-1]
        assert topo.link_src[first] == topo.nic_endpoint(int(src[i]))
        rail_src, rail_dst = topo.rail_of_gpu(int(src[i])), topo.rail_of_gpu(int(dst[i]))
        assert rail_src >= 0 and rail_dst >= 0
        # the first switch serves the GPU's rail, or (-1) is shared by whole rails when they fit on one switch
        assert topo.endpoint_rail[topo.link_dst[first]] in (rail_src, -1)
        assert topo.link_dst[last] == topo.nic_endpoint(int(dst[i]))
        assert topo.endpoint_rail[topo.link_src[last]] in (rail_dst, -1)
        assert set(topo.link_kind[path[: list(path).index(first)]]) <= {LINK_KINDS.index("pcie")}


@FAST
@given(nodes=st.integers(1, 40).map(lambda n: 2 * n), rail=st.booleans(), tiers=st.sampled_from([None, 2, 3]),
       system=st.sampled_from(["dgx-h100", "pcie-h100-8gpu"]))
def test_full_bisection_is_half_the_gpus_times_nic_rate(nodes: int, rail: bool, tiers: int | None,
                                                        system: str) -> None:
    topo = build_cluster(system, nodes=nodes, rail_optimized=rail, tiers=tiers)
    assert topo.oversubscription == 1
    expected = topo.num_gpus / 2 * topo.nic_bytes_per_s_per_gpu
    assert topo.bom().bisection_bytes_per_s == pytest.approx(expected)


@settings(max_examples=12, deadline=None)
@given(leaves=st.integers(1, 4).map(lambda n: 2 * n), k=st.sampled_from([1.0, 2.0, 4.0, 8.0]),
       tiers=st.sampled_from([2, 3]))
def test_bisection_matches_max_flow_between_leaf_aligned_halves(leaves: int, k: float, tiers: int) -> None:
    """Plain fat tree of DGX H100 (4 nodes per 32-port leaf): the network carries exactly the bisection."""
    nodes = 4 * leaves
    topo = build_cluster("dgx-h100", nodes=nodes, rail_optimized=False, tiers=tiers, oversubscription=k)
    half = np.arange(nodes // 2)
    flow = max_flow_gbps(topo, half, half + nodes // 2)
    assert flow == pytest.approx(topo.bisection_bytes_per_s)
    assert flow == pytest.approx(topo.num_gpus / 2 * 50e9 / k)


@pytest.mark.parametrize(("k", "tiers"), [(1.0, 2), (2.0, 2), (1.0, 3), (4.0, 3)])
def test_rail_optimized_bisection_matches_max_flow(k: float, tiers: int) -> None:
    topo = build_cluster("dgx-h100", nodes=64, tiers=tiers, oversubscription=k)
    half = np.arange(32)
    assert max_flow_gbps(topo, half, half + 32) == pytest.approx(topo.bisection_bytes_per_s)
    assert topo.bisection_bytes_per_s == pytest.approx(256 * 50e9 / k)


@pytest.mark.parametrize(("nodes", "dims"), [(16, (4, 2, 2)), (32, (4, 4, 2)), (8, (2, 2, 2)), (12, (6, 2, 1))])
def test_torus_bisection_matches_max_flow_across_the_largest_dimension(nodes: int, dims: tuple[int, ...]) -> None:
    topo = build_cluster("dgx-h100", nodes=nodes, fabric="torus", torus_dims=dims)
    x = np.arange(nodes) % dims[0]
    flow = max_flow_gbps(topo, np.flatnonzero(x < dims[0] // 2), np.flatnonzero(x >= dims[0] // 2))
    assert flow == pytest.approx(topo.bisection_bytes_per_s)


@pytest.mark.parametrize("nodes", [2, 3, 5, 9])
def test_mesh_bisection_matches_max_flow(nodes: int) -> None:
    topo = build_cluster("dgx-h100", nodes=nodes, fabric="mesh")
    half = np.arange(nodes // 2)
    flow = max_flow_gbps(topo, half, np.arange(nodes // 2, nodes))
    assert flow == pytest.approx(topo.bisection_bytes_per_s)
    assert flow == pytest.approx((nodes // 2) * (nodes - nodes // 2) * (8 // (nodes - 1)) * 50e9)


def _leaf_uplink_capacity(topo: Topology) -> np.ndarray:
    """Sum of leaf -> higher-tier link capacity per leaf."""
    up = (topo.endpoint_tier[topo.link_src] == 0) & (topo.endpoint_tier[topo.link_dst] > 0)
    leaves = np.flatnonzero(topo.endpoint_tier == 0)
    per = np.bincount(topo.link_src[up], weights=topo.link_capacity[up], minlength=topo.num_endpoints)
    return per[leaves]


def _leaf_nic_capacity(topo: Topology) -> np.ndarray:
    """Sum of NIC -> leaf link capacity per leaf."""
    down = (topo.endpoint_tier[topo.link_src] < 0) & (topo.endpoint_tier[topo.link_dst] == 0)
    leaves = np.flatnonzero(topo.endpoint_tier == 0)
    per = np.bincount(topo.link_dst[down], weights=topo.link_capacity[down], minlength=topo.num_endpoints)
    return per[leaves]


@FAST
@given(k=st.floats(1.0, 32.0), nodes=st.integers(2, 100), rail=st.booleans(), tiers=st.sampled_from([2, 3]))
def test_oversubscription_divides_leaf_uplink_capacity(k: float, nodes: int, rail: bool, tiers: int) -> None:
    """Uplinks are sized from the NICs attached: every leaf meets the asked ratio, whole uplinks, and the reported
    ratio is the worst leaf's (at least 1)."""
    base = build_cluster("dgx-h100", nodes=nodes, rail_optimized=rail, tiers=tiers)
    over = build_cluster("dgx-h100", nodes=nodes, rail_optimized=rail, tiers=tiers, oversubscription=k)
    for topo, ratio in ((base, 1.0), (over, k)):
        nic, up = _leaf_nic_capacity(topo), _leaf_uplink_capacity(topo)
        assert (up * ratio >= nic * (1 - 1e-9)).all()  # the asked ratio is met on every leaf
        assert np.allclose(up / 50e9, np.rint(up / 50e9))  # whole uplinks
        assert topo.oversubscription == pytest.approx(max(1.0, float((nic / up).max())))
    # The builder picks the cheapest design that meets the ratio, which may pack the nodes onto fewer leaves with
    # more uplinks each (17 nodes at 1.125:1: 5 leaves of 30 uplinks against 6 of 24): total uplink capacity can
    # exceed the full-bisection tree's, its cost never does.
    assert bom(over).capex_usd <= bom(base).capex_usd


@FAST
@given(su=st.sampled_from([1, 2, 4]), k=st.sampled_from([1.0, 2.0, 4.0]), rail=st.booleans(),
       system=st.sampled_from(["dgx-h100", "pcie-h100-8gpu"]))
def test_counts_double_with_nodes_in_two_tiers(su: int, k: float, rail: bool, system: str) -> None:
    """Whole leaf groups: leaves, spines and every cable count double with the nodes (2-tier SuperPOD rule)."""
    one = build_cluster(system, nodes=32 * su, rail_optimized=rail, oversubscription=k, tiers=2).bom()
    two = build_cluster(system, nodes=64 * su, rail_optimized=rail, oversubscription=k, tiers=2).bom()
    assert two.switches["leaf"] == 2 * one.switches["leaf"]
    assert {s: 2 * c for s, c in one.cables.items()} == two.cables
    # spines double once the spines are full; with half-empty spines (oversubscribed, small) they may stay
    assert one.switches["spine"] <= two.switches["spine"] <= 2 * one.switches["spine"]
    if k == 1:
        assert two.switches["spine"] == 2 * one.switches["spine"]


@FAST
@given(su=st.sampled_from([1, 2, 4, 8, 16, 32]), rail=st.booleans())
def test_counts_double_with_nodes_in_three_tiers(su: int, rail: bool) -> None:
    """Every count doubles, once the core tier is full: rail fabrics always have 8 rail pods; a plain fabric needs
    two pods (64 leaves, 256 DGX nodes), since one pod's 32 spines each need a core of their own."""
    if not rail:
        su = max(su, 8)
    one = build_cluster("dgx-h100", nodes=32 * su, rail_optimized=rail, tiers=3).bom()
    two = build_cluster("dgx-h100", nodes=64 * su, rail_optimized=rail, tiers=3).bom()
    assert {t: 2 * c for t, c in one.switches.items()} == two.switches
    assert {s: 2 * c for s, c in one.cables.items()} == two.cables


@FAST
@given(cfg=small_clusters(), pair=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), flow=st.integers(0, 2**40))
def test_path_is_one_of_the_equal_cost_paths(cfg: dict[str, Any], pair: tuple[int, int], flow: int) -> None:
    topo = build_cluster(**cfg)
    s, d = pair[0] % topo.num_gpus, pair[1] % topo.num_gpus
    path = topo.path(s, d, flow)
    options = topo.paths(s, d)
    assert any(np.array_equal(path, p) for p in options)
    assert len({len(p) for p in options}) == 1, "equal-cost paths differ in length"
    assert len({p.tobytes() for p in options}) == len(options)
    assert np.array_equal(path, topo.path(s, d, flow)), "routing is not deterministic"


def test_ecmp_spreads_flows_over_spines() -> None:
    topo = build_cluster("dgx-h100", nodes=64)  # 2 tiers, 8 spines
    src, dst = 0, 32 * 8 + 1  # different leaf groups and rails
    assert topo.path_count(src, dst) == 8
    routes = topo.route(np.full(4000, src), np.full(4000, dst), np.arange(4000))
    spines = topo.link_dst[routes.links.reshape(4000, -1)[:, 3]]
    counts = np.unique(spines, return_counts=True)[1]
    assert len(counts) == 8 and counts.min() > 400


def test_three_tier_paths_between_pods_use_every_core() -> None:
    topo = build_cluster("dgx-h100", nodes=2048, tiers=3)  # rail pods of 32 leaves, 256 cores
    paths = topo.paths(0, 1024 * 8)  # rail 0, groups 0 and 32: different pods of rail 0
    assert len(paths) == topo.bom().switches["core"]
    core_tier = 2
    cores = {int(topo.link_dst[p[4]]) for p in paths}  # GPU>PCIe>NIC>leaf>spine>core
    assert all(topo.endpoint_tier[c] == core_tier for c in cores) and len(cores) == len(paths)


def test_gpu_rank_out_of_range_is_a_spec_error() -> None:
    topo = build_cluster("dgx-h100", nodes=2)
    with pytest.raises(SpecError, match=r"0\.\.15"):
        topo.path(0, 16)


def test_pxn_relays_through_the_nics_own_gpu() -> None:
    """A GPU reaching another rail's NIC relays over NVLink through the GPU that owns that NIC (NCCL pairs each NIC
    with its GPU), not through the first GPU under the NIC's PCIe switch: every relay GPU serves one NIC."""
    from fabricsim.catalog import default_catalog
    from fabricsim.topology import build_node

    catalog = default_catalog()
    node = build_node(catalog.system("dgx-h100"), catalog)
    gpu_kind = node.endpoint_kind[0]
    for g in range(node.gpus):
        for n in range(node.nics):
            path = node.gpu_nic_path[g, n]
            path = path[path >= 0]
            transit = [int(node.link_dst[link]) for link in path[:-1] if node.endpoint_kind[node.link_dst[link]] ==
                       gpu_kind]
            assert transit in ([], [int(np.flatnonzero(node.gpu_nic == n)[0])])
