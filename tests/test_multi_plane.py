"""Multi-plane fat trees (issue 27, item 1, in part): each NIC's bandwidth split over planes, every plane a fat tree
of split switch ports. Counting, bisection against max-flow (and a plane failure's loss), routes that stay in one
plane, flow-level equality with one plane for evenly spread traffic, and the tier a plane saves."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.errors import SpecError
from fabricsim.topology import build_cluster
from fabricsim.traffic import JobSpec, build_traffic, run_traffic
from topology_checks import all_pairs, assert_valid_routes, max_flow_gbps, whatif_llama70b


def _fabric_links(topo):  # type: ignore[no-untyped-def]
    first = topo.num_nodes * topo.node.num_links
    return np.arange(first, topo.num_links)


@pytest.mark.parametrize(("nodes", "planes"), [(4, 2), (16, 2), (40, 2), (24, 4)])
def test_counting_and_routes(nodes: int, planes: int) -> None:
    topo = build_cluster("dgx-h100", nodes=nodes, planes=planes)
    links = _fabric_links(topo)
    src = topo.link_src[links]
    nic = topo.endpoint_kind[topo.nic_endpoint(0)]
    nic_src = src[topo.endpoint_kind[src] == nic]
    assert np.array_equal(np.bincount(nic_src - nic_src.min())[np.unique(nic_src) - nic_src.min()],
                          np.full(nodes * 8, planes))  # every NIC on every plane once
    assert np.allclose(topo.link_capacity[links][topo.endpoint_kind[src] == nic], 50e9 / planes)
    bill = topo.bom()
    assert bill.cables["node-leaf"] == nodes * 8 * planes
    assert bill.nic_bytes_per_s_per_gpu == pytest.approx(50e9)
    s, d = all_pairs(topo)
    routes = topo.route(s, d, np.arange(len(s)) * 31)
    assert_valid_routes(topo, s, d, routes)
    # a flow stays on one plane: its switches all belong to one plane's block of switch ids
    per_plane = topo.fabric.num_switches // planes
    sw = topo.link_dst[routes.links]
    is_sw = topo.endpoint_node[sw] < 0
    plane_of = (sw - topo.num_nodes * topo.node.num_endpoints) // per_plane
    flow = routes.flow_of_entry()
    lo = np.full(len(s), planes), np.full(len(s), -1)
    np.minimum.at(lo[0], flow[is_sw], plane_of[is_sw])
    np.maximum.at(lo[1], flow[is_sw], plane_of[is_sw])
    used = lo[1] >= 0
    assert (lo[0][used] == lo[1][used]).all()


@pytest.mark.parametrize(("nodes", "planes"), [(16, 2), (64, 2), (64, 4)])
def test_bisection_matches_max_flow_and_a_plane_failure_loses_its_share(nodes: int, planes: int) -> None:
    topo = build_cluster("dgx-h100", nodes=nodes, planes=planes)
    half = np.arange(nodes // 2)
    full = max_flow_gbps(topo, half, half + nodes // 2)
    assert full == pytest.approx(topo.bisection_bytes_per_s)
    assert full == pytest.approx(nodes // 2 * 8 * 50e9)
    per_plane = topo.fabric.num_switches // planes
    first_switch = topo.num_nodes * topo.node.num_endpoints
    plane0 = ((topo.link_src >= first_switch) & (topo.link_src < first_switch + per_plane)) | \
        ((topo.link_dst >= first_switch) & (topo.link_dst < first_switch + per_plane))
    capacity = topo.link_capacity.copy()
    capacity[plane0] = 0.0
    import dataclasses

    failed = dataclasses.replace(topo, link_capacity=capacity)
    assert max_flow_gbps(failed, half, half + nodes // 2) == pytest.approx(full * (planes - 1) / planes)


def _makespan(planes: int, pattern: str, routing: str) -> float:
    topo = build_cluster("dgx-h100", nodes=16, planes=planes, tiers=2)
    run = run_traffic(topo, build_traffic(topo, [JobSpec("j", topo.num_gpus, pattern, 2**30)], [], 0), routing)
    return float(run.result.makespan)


@pytest.mark.parametrize("pattern", ["all_reduce", "all_to_all", "permutation"])
def test_planes_at_a_fraction_equal_one_plane_for_evenly_spread_traffic(pattern: str) -> None:
    """Sprayed over every path (planes included), N planes at 1/N of the rate carry what one plane does."""
    one, two = _makespan(1, pattern, "spray"), _makespan(2, pattern, "spray")
    assert two == pytest.approx(one, rel=0.02)


def test_planes_keep_two_tiers_where_one_fabric_needs_three() -> None:
    """512 DGX H100 on NDR: one fabric of 64-port switches needs a core tier; two planes of 128 x 200G ports stay
    at 2 tiers, with fewer switches and the same bisection (the multi-plane argument of DeepSeek-V3's paper)."""
    one = build_cluster("dgx-h100", nodes=512).bom()
    two = build_cluster("dgx-h100", nodes=512, planes=2).bom()
    assert one.tiers == 3 and two.tiers == 2
    assert two.switches_total < one.switches_total
    assert two.bisection_bytes_per_s == pytest.approx(one.bisection_bytes_per_s)


def test_plane_errors() -> None:
    with pytest.raises(SpecError, match="split"):
        build_cluster("dgx-h100", nodes=8, planes=3)
    with pytest.raises(SpecError, match="fat trees"):
        build_cluster("dgx-h100", nodes=8, fabric="torus", planes=2)


def test_whatif_swaps_to_two_planes() -> None:
    """`whatif --swap planes=2`: every NIC keeps its bandwidth (the same step), the bill drops the core tier."""
    result = whatif_llama70b("planes=2")
    (swap,) = result.swaps
    assert swap.step_time_s == pytest.approx(float(result.base.step_time_s))
    assert swap.cost_delta_usd is not None and swap.cost_delta_usd < 0


def test_size_searches_two_planes_beside_the_fat_tree() -> None:
    """`size --fabric-kinds fat-tree,2-plane`: the same plans and step times, and at 512 DGX H100 (where one fabric
    needs a core tier) the 2-plane bill is the smaller."""
    from fabricsim.sizing import SizingSpec, size

    spec = SizingSpec(model="llama3-8b", tokens=1e11, gpus=(4096,), systems=("dgx-h100",), fabrics=("ndr",),
                      oversubscription=(1.0,), fabric_kinds=("fat-tree", "2-plane"), knobs={"tp": (8,), "pp": (1,)})
    frame = size(spec, executor="serial").frame
    one, two = frame[frame["fabric"] == "ndr"], frame[frame["fabric"] == "ndr 2-plane"]
    assert len(one) and len(two)
    assert one["step_time_s"].min() == pytest.approx(two["step_time_s"].min())
    assert two["capex_usd"].iloc[0] < one["capex_usd"].iloc[0]
