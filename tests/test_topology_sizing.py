"""Fat-tree sizing from the NICs attached (issue 10, item 1): hand counts for 1, 2, 4, 16 and 33 DGX H100 nodes at
1:1, 2:1 and 3:1; capex never grows with fewer nodes or fewer uplinks; the graph matches the bill.

Hand counts (QM9700: radix 64, a leaf gives at most 32 ports to NICs; DGX H100: 8 rails of one NIC):
- 1, 2, 4 nodes (8, 16, 32 NICs <= 64 ports): one switch for every rail, no uplinks; the ratio has nothing to cut.
- 16 nodes: a rail has 16 NICs, two rails fit on a leaf (32 ports): 4 leaves of 32 NICs. 1:1 needs 32 uplinks a
  leaf; 4 leaves x 16 cables fill a spine's 64 ports, so 2 spines x 16 = 32 (128 cables). 2:1: 16 uplinks, one
  spine (4 x 16 = 64 ports, 64 cables). 3:1: ceil(32 / 3) = 11 uplinks, one spine (44 cables).
- 33 nodes: 33 NICs a rail need two leaves a rail; 17 + 16 nodes: 16 leaves, 17 NICs on the fullest. A spine takes
  at most 64 / 16 = 4 cables per leaf. 1:1 needs 17: 6 spines x 3 (18 a leaf, 288 cables) is cheaper than
  5 x 4 (20, 320 cables; one spine costs 18 cables). 2:1 needs 9: 3 x 3 (144). 3:1 needs 6: 2 x 3 (96).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricsim.catalog import Catalog
from fabricsim.topology import Topology, build_cluster

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# nodes, ratio: (leaves, spines, node-leaf cables, leaf-spine cables)
HAND_COUNTS = {
    (1, 1.0): (1, 0, 8, 0), (1, 2.0): (1, 0, 8, 0), (1, 3.0): (1, 0, 8, 0),
    (2, 1.0): (1, 0, 16, 0), (2, 2.0): (1, 0, 16, 0), (2, 3.0): (1, 0, 16, 0),
    (4, 1.0): (1, 0, 32, 0), (4, 2.0): (1, 0, 32, 0), (4, 3.0): (1, 0, 32, 0),
    (16, 1.0): (4, 2, 128, 128), (16, 2.0): (4, 1, 128, 64), (16, 3.0): (4, 1, 128, 44),
    (33, 1.0): (16, 6, 264, 288), (33, 2.0): (16, 3, 264, 144), (33, 3.0): (16, 2, 264, 96),
}


@pytest.mark.parametrize(("nodes", "ratio"), sorted(HAND_COUNTS))
def test_hand_counts(catalog: Catalog, nodes: int, ratio: float) -> None:
    leaves, spines, node_leaf, leaf_spine = HAND_COUNTS[(nodes, ratio)]
    bom = build_cluster("dgx-h100", nodes=nodes, oversubscription=ratio).bom()
    assert bom.switches == {"leaf": leaves, "spine": spines, "core": 0}
    assert bom.cables == ({"node-leaf": node_leaf} | ({"leaf-spine": leaf_spine} if leaf_spine else {}))
    node, switch, cable = catalog.system("dgx-h100"), catalog.switch("qm9700"), catalog.cable("optical-400g")
    assert node.price_usd and switch.price_usd and cable.price_usd
    expected = (nodes * node.price_usd + (leaves + spines) * switch.price_usd
                + (node_leaf + leaf_spine) * cable.price_usd)
    assert bom.capex_usd == pytest.approx(expected)


def test_small_clusters_carry_little_fabric(catalog: Catalog) -> None:
    """Issue 10: 4 nodes had 12 switches and 288 cables ($2.25M in all); one node carried $0.96M of fabric."""
    node = catalog.system("dgx-h100").price_usd
    assert node
    one, four = build_cluster("dgx-h100", nodes=1).bom(), build_cluster("dgx-h100", nodes=4).bom()
    assert one.capex_usd is not None and four.capex_usd is not None
    assert one.capex_usd - node == pytest.approx(36_000 + 8 * 2_000)
    assert four.capex_usd == pytest.approx(1_340_000)
    assert four.fabric.startswith("single switch (all rails), 1 tier")


def test_oversubscription_orders_capex_and_never_builds_one_cable_spines() -> None:
    """Issue 10: 3:1 built 11 spines of one uplink each and cost more than 2:1."""
    boms = {k: build_cluster("dgx-h100", nodes=32, oversubscription=k).bom() for k in (1.0, 2.0, 3.0)}
    capex = [boms[k].capex_usd for k in (1.0, 2.0, 3.0)]
    assert None not in capex
    assert capex[0] > capex[1] > capex[2]  # type: ignore[operator]
    assert boms[3.0].switches["spine"] == 2 and boms[3.0].cables["leaf-spine"] == 96  # 8 leaves x 2 spines x 6


def test_single_switch_notes_an_unused_ratio() -> None:
    bom = build_cluster("dgx-h100", nodes=4, oversubscription=2).bom()
    assert any("does not apply: every NIC is on one switch" in n for n in bom.notes)
    assert bom.oversubscription == 1


@pytest.mark.parametrize(("tiers", "text"), [(2, "spine tier (forced by tiers) carries no traffic"),
                                             (3, "core tier (forced by tiers=3) carries no traffic")])
def test_forced_idle_tiers_are_noted(tiers: int, text: str) -> None:
    bom = build_cluster("dgx-h100", nodes=2, tiers=tiers).bom()
    assert bom.tiers == tiers
    assert any(text in n for n in bom.notes)


def test_superpod_sizes_need_no_notes() -> None:
    for nodes in (31, 127, 512):
        assert build_cluster("dgx-h100", nodes=nodes).bom().notes == [
            "figures are approximate and dated (see items); node prices include GPUs, NICs and NVSwitch chips"]


def _tier_cables(topo: Topology, lower: int, upper: int) -> float:
    """Cables between two switch tiers (or NICs and leaves for lower=-1), from the link capacities."""
    sel = (topo.endpoint_tier[topo.link_src] == lower) & (topo.endpoint_tier[topo.link_dst] == upper)
    if lower == -1:
        sel &= topo.endpoint_kind[topo.link_src] == topo.endpoint_kind[topo.nic_endpoint(0)]
        return float(sel.sum())
    return float(topo.link_capacity[sel].sum() / topo.fabric_switch.port_bytes_per_s)


@st.composite
def fat_trees(draw: st.DrawFn) -> dict[str, object]:
    system = draw(st.sampled_from(["dgx-h100", "pcie-h100-8gpu", "dgx-b200"]))
    return {"system": system, "nodes": draw(st.integers(1, 300)), "rail_optimized": draw(st.booleans()),
            "oversubscription": draw(st.sampled_from([1.0, 1.5, 2.0, 3.0, 4.0]))}


@FAST
@given(cfg=fat_trees())
def test_graph_matches_bill_every_nic_attached_ports_within_radix(cfg: dict[str, object]) -> None:
    topo = build_cluster(**cfg)  # type: ignore[arg-type]
    bom, radix = topo.bom(), topo.fabric_switch.radix
    assert _tier_cables(topo, -1, 0) == bom.cables["node-leaf"] == bom.nics  # every NIC attached, once
    assert _tier_cables(topo, 0, 1) == bom.cables.get("leaf-spine", 0)
    assert _tier_cables(topo, 1, 2) == bom.cables.get("spine-core", 0)
    switches = np.flatnonzero(topo.endpoint_tier >= 0)
    nic = _nic_links(topo)
    nic_ports = np.bincount(topo.link_dst[nic], minlength=topo.num_endpoints)[switches]
    inter = (topo.endpoint_tier[topo.link_src] >= 0) & (topo.endpoint_tier[topo.link_dst] >= 0)
    inter_cap = np.bincount(topo.link_src[inter], weights=topo.link_capacity[inter], minlength=topo.num_endpoints)
    ports = nic_ports + np.rint(inter_cap[switches] / topo.fabric_switch.port_bytes_per_s).astype(int)
    assert (ports <= radix).all()  # ports in use per switch within the radix
    assert (ports >= 2).all()  # no switch with a single cable (no tier count forced here)
    if bom.tiers > 1:
        assert (nic_ports[topo.endpoint_tier[switches] == 0] <= radix // 2).all()  # leaf down-ports


def _nic_links(topo: Topology) -> np.ndarray:
    """Ids of the NIC -> leaf links."""
    return np.flatnonzero((topo.endpoint_tier[topo.link_src] == -1) & (topo.endpoint_tier[topo.link_dst] == 0))


@FAST
@given(cfg=fat_trees(), fewer=st.integers(1, 40))
def test_capex_never_grows_with_fewer_nodes(cfg: dict[str, object], fewer: int) -> None:
    nodes = int(cfg["nodes"])  # type: ignore[call-overload]
    big = build_cluster(**cfg).bom()  # type: ignore[arg-type]
    small = build_cluster(**(cfg | {"nodes": max(1, nodes - fewer)})).bom()  # type: ignore[arg-type]
    assert small.capex_known_usd <= big.capex_known_usd
    assert small.cables["node-leaf"] <= big.cables["node-leaf"]


@FAST
@given(cfg=fat_trees())
def test_capex_never_grows_with_fewer_uplinks_and_orders_strictly(cfg: dict[str, object]) -> None:
    boms = [build_cluster(**(cfg | {"oversubscription": k})).bom()  # type: ignore[arg-type]
            for k in (1.0, 1.5, 2.0, 3.0, 4.0)]
    capex = [b.capex_known_usd for b in boms]
    assert capex == sorted(capex, reverse=True)
    uplinks = [b.cables.get("leaf-spine", 0) for b in boms]
    assert uplinks == sorted(uplinks, reverse=True)
    if boms[0].tiers > 1:
        assert capex[0] > capex[2] > capex[3]  # 1:1 > 2:1 > 3:1


@FAST
@given(nodes=st.integers(2, 64), system=st.sampled_from(["dgx-h100", "pcie-h100-8gpu"]))
def test_rails_share_a_leaf_only_whole(nodes: int, system: str) -> None:
    """A leaf serving several rails (rail tag -1) holds every NIC of those rails: same-rail traffic never leaves it."""
    topo = build_cluster(system, nodes=nodes)
    links = _nic_links(topo)
    nic_rail = topo.endpoint_rail[topo.link_src[links]]
    leaf = topo.link_dst[links]
    for rail in np.unique(nic_rail):
        leaves = np.unique(leaf[nic_rail == rail])
        if (topo.endpoint_rail[leaves] == -1).any():
            assert len(leaves) == 1
        else:
            assert (topo.endpoint_rail[leaves] == rail).all()
