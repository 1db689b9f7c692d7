"""Rail-only networks (issue 27, item 1, in part): a network per rail and none between (Wang et al. 2023). Counting
(every NIC attached once, radix respected, cables as the links), bisection against max-flow, routing (a flow leaves
by the NIC on its destination's rail, PXN over NVLink), cost against the rail-optimized fat tree, and flow-level
physics (rail-aligned traffic as on the fat tree; traffic between rails costs NVLink, never less time)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricsim.errors import SpecError
from fabricsim.topology import LINK_KINDS, build_cluster
from fabricsim.traffic import JobSpec, build_traffic, run_traffic
from topology_checks import all_pairs, assert_valid_routes, max_flow_gbps, whatif_llama70b

FAST = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NIC_KIND = LINK_KINDS.index("infiniband")


@FAST
@given(nodes=st.integers(1, 24), system=st.sampled_from(["dgx-h100", "pcie-h100-8gpu", "dgx-a100"]),
       k=st.sampled_from([1.0, 2.0]), flow=st.integers(0, 10**6))
def test_every_pair_routes_and_leaves_by_the_destination_rail(nodes: int, system: str, k: float, flow: int) -> None:
    link = "ib-hdr" if system == "dgx-a100" else "ib-ndr"
    topo = build_cluster(system, nodes=nodes, fabric="rail-only", link=link, oversubscription=k, tiers=2 if
                         nodes > 4 else None)
    src, dst = all_pairs(topo)
    routes = topo.route(src, dst, np.arange(len(src)) + flow)
    assert_valid_routes(topo, src, dst, routes)
    inter = np.flatnonzero(src // topo.gpus_per_node != dst // topo.gpus_per_node)
    rail = topo.endpoint_rail
    for i in inter[:: max(1, len(inter) // 300)]:
        path = routes[int(i)]
        fabric = path[path >= topo.num_nodes * topo.node.num_links]
        leave = topo.link_src[fabric[0]]  # the NIC the flow leaves its node by
        assert rail[leave] == topo.rail_of_gpu(int(dst[i]))
        assert topo.endpoint_node[topo.link_dst[fabric[-1]]] == dst[i] // topo.gpus_per_node


@pytest.mark.parametrize("nodes", [2, 16, 64, 65, 96, 200])
def test_counting(nodes: int) -> None:
    """Every NIC on exactly one fabric cable, no switch past its radix, no link between rails, the BOM's cables
    as the links (leaf-spine bundles counted by their cables)."""
    topo = build_cluster("dgx-h100", nodes=nodes, fabric="rail-only")
    first = topo.num_nodes * topo.node.num_links
    src, dst, cap = topo.link_src[first:], topo.link_dst[first:], topo.link_capacity[first:]
    nics = np.flatnonzero(topo.endpoint_kind == topo.endpoint_kind[topo.nic_endpoint(0)])
    assert np.array_equal(np.sort(src[np.isin(src, nics)]), np.sort(nics))  # one cable out of every NIC
    switch = topo.fabric_switch
    ports = np.bincount(src, weights=np.rint(cap / min(cap.min(), switch.port_bytes_per_s)), minlength=
                        topo.num_endpoints)
    sw = np.flatnonzero(topo.endpoint_node < 0)
    assert (ports[sw] <= switch.radix).all()
    rails = topo.endpoint_rail
    both = (rails[src] >= 0) & (rails[dst] >= 0)
    assert (rails[src][both] == rails[dst][both]).all()  # nothing joins two rails
    bill = topo.bom()
    assert bill.cables_total == int(np.rint(cap[0::2] / np.where(np.isin(src[0::2], nics),
                                                                  cap[0::2], switch.port_bytes_per_s)).sum())
    assert bill.cables["node-leaf"] == nodes * 8


@pytest.mark.parametrize(("nodes", "k"), [(16, 1.0), (64, 1.0), (96, 1.0), (128, 2.0)])
def test_bisection_matches_max_flow(nodes: int, k: float) -> None:
    """Between leaf-aligned halves (partly filled leaves can carry more), as for the fat tree."""
    topo = build_cluster("dgx-h100", nodes=nodes, fabric="rail-only", oversubscription=k)
    half = np.arange(nodes // 2)
    assert max_flow_gbps(topo, half, half + nodes // 2) == pytest.approx(topo.bisection_bytes_per_s)
    assert topo.bisection_bytes_per_s == pytest.approx(nodes // 2 * 8 * 50e9 / topo.fabric.oversubscription)


@pytest.mark.parametrize("nodes", [32, 64, 512, 1024, 2048])
def test_cheaper_than_the_rail_optimized_fat_tree(nodes: int) -> None:
    """Rail-only drops the switches that join rails: cheaper where the fat tree needs them (a spine tier over one
    switch per rail, or a core tier over a rail's pods). Where both are 2 tiers the counts match (256 DGX nodes:
    96 switches each); where a rail's spines use part of a switch, they share it with other rails' spines, so
    rail-only never needs more switches (issue 43: 65-96 nodes)."""
    rail_only = build_cluster("dgx-h100", nodes=nodes, fabric="rail-only").bom()
    fat_tree = build_cluster("dgx-h100", nodes=nodes).bom()
    assert rail_only.capex_usd is not None and fat_tree.capex_usd is not None
    assert rail_only.capex_usd < fat_tree.capex_usd
    assert rail_only.switches_total < fat_tree.switches_total


def test_two_tier_sizes_cost_the_same() -> None:
    rail_only = build_cluster("dgx-h100", nodes=256, fabric="rail-only").bom()
    fat_tree = build_cluster("dgx-h100", nodes=256).bom()
    assert rail_only.switches_total == fat_tree.switches_total == 96
    assert rail_only.capex_usd == fat_tree.capex_usd


def test_small_clusters_share_switches_between_rails() -> None:
    """Whole rails that fit on one switch share it, as the fat tree's single switch does: the same bill."""
    for nodes in (2, 8):
        rail_only = build_cluster("dgx-h100", nodes=nodes, fabric="rail-only").bom()
        fat_tree = build_cluster("dgx-h100", nodes=nodes).bom()
        assert rail_only.switches_total == fat_tree.switches_total == 1
        assert rail_only.capex_usd == fat_tree.capex_usd


def _completion(fabric: str, pattern: str, nodes: int = 16) -> tuple[float, float]:
    """(completion time, bytes over NVLink) of one job on every GPU."""
    topo = build_cluster("dgx-h100", nodes=nodes, fabric=fabric, tiers=2)
    run = run_traffic(topo, build_traffic(topo, [JobSpec("j", topo.num_gpus, pattern, 2**30)], [], 0))
    nvlink = np.isin(topo.link_kind, [LINK_KINDS.index("nvlink"), LINK_KINDS.index("nvswitch")])
    return float(run.result.makespan), float(run.result.link_bytes[nvlink].sum())


def test_rail_aligned_traffic_runs_as_on_the_fat_tree() -> None:
    """A ring over all GPUs in rank order crosses nodes only between same-rail GPUs: the same time on both."""
    ring_ro, _ = _completion("rail-only", "all_reduce")
    ring_ft, _ = _completion("fat-tree", "all_reduce")
    assert ring_ro == pytest.approx(ring_ft, rel=0.01)


def test_all_to_all_across_rails_costs_nvlink_and_never_less_time() -> None:
    """Cross-rail bytes cross NVLink to the GPU that owns the destination rail's NIC (PXN); with NVLink to spare
    that costs no time on one leaf group (16 nodes: equal), and never saves any."""
    a2a_ro, nv_ro = _completion("rail-only", "all_to_all")
    a2a_ft, nv_ft = _completion("fat-tree", "all_to_all")
    assert a2a_ro >= a2a_ft * (1 - 1e-9)
    assert nv_ro > nv_ft * 1.5  # cross-rail bytes take the NVLink hop to the destination rail's NIC


def test_rail_only_errors() -> None:
    with pytest.raises(SpecError, match="rail-optimized"):
        build_cluster("dgx-h100", nodes=8, fabric="rail-only", rail_optimized=False)
    with pytest.raises(SpecError, match="at most"):
        build_cluster("dgx-h100", nodes=3000, fabric="rail-only")
    with pytest.raises(SpecError, match="1 or 2 tiers"):
        build_cluster("dgx-h100", nodes=8, fabric="rail-only", tiers=3)


def test_whatif_swaps_to_rail_only() -> None:
    """`whatif --swap fabric=rail-only`: the same step (NCCL keeps inter-node traffic on the destination's rail on
    both, PXN), a smaller bill where the fat tree needs switches to join rails."""
    result = whatif_llama70b("fabric=rail-only")
    (swap,) = result.swaps
    assert swap.step_time_s == pytest.approx(float(result.base.step_time_s))
    assert swap.cost_delta_usd is not None and swap.cost_delta_usd < 0
    with pytest.raises(SpecError, match="fat-tree or rail-only"):
        whatif_llama70b("fabric=torus")


def test_size_searches_rail_only_beside_the_fat_tree() -> None:
    """`size --fabric-kinds fat-tree,rail-only`: the same plans and step times on both designs, each with its own
    bill; rail-only is the cheaper where the fat tree needs switches to join rails (64 DGX nodes)."""
    from fabricsim.sizing import SizingSpec, size

    spec = SizingSpec(model="llama3-8b", tokens=1e11, gpus=(512,), systems=("dgx-h100",), fabrics=("ndr",),
                      oversubscription=(1.0,), fabric_kinds=("fat-tree", "rail-only"))
    frame = size(spec, executor="serial", exhaustive=True).frame
    ft, ro = frame[frame["fabric"] == "ndr"], frame[frame["fabric"] == "ndr rail-only"]
    assert len(ft) and len(ft) == len(ro)
    from fabricsim.sizing.space import Shape

    keys = [*Shape.__dataclass_fields__, "gbs"]
    merged = ft.merge(ro, on=keys, suffixes=("_ft", "_ro"))
    assert len(merged) == len(ft)
    assert np.allclose(merged["step_time_s_ft"], merged["step_time_s_ro"])
    assert (merged["capex_usd_ro"] < merged["capex_usd_ft"]).all()
