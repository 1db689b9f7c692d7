"""Bill of materials: cables by medium with transceivers, cost, power, missing prices, torus and mesh counts."""

from __future__ import annotations

import pytest

from fabricsim.catalog import Catalog
from fabricsim.errors import SpecError
from fabricsim.topology import build_cluster, cable_class


def test_superpod_su_bom_optical_default(catalog: Catalog) -> None:
    bom = build_cluster("dgx-h100", nodes=32).bom()
    assert (bom.cables_optical, bom.cables_copper, bom.transceivers) == (512, 0, 1024)
    assert bom.nvswitch_chips == 128 and bom.nics == 256 and bom.nvlink_domain_size == 8
    node, switch, cable = catalog.system("dgx-h100"), catalog.switch("qm9700"), catalog.cable("optical-400g")
    assert node.price_usd and switch.price_usd and cable.price_usd and node.power_w and switch.power_w
    assert bom.capex_usd == pytest.approx(32 * node.price_usd + 12 * switch.price_usd + 512 * cable.price_usd)
    assert bom.power_w == pytest.approx(32 * node.power_w + 12 * switch.power_w + 512 * (cable.power_w or 0))
    assert bom.missing == []
    dates = {i.item: i.price_date for i in bom.items}
    assert dates["qm9700"] == "2024-08" and dates["dgx-h100"] == "2024-08"


def test_copper_node_cables_are_a_choice() -> None:
    bom = build_cluster("dgx-h100", nodes=32, node_cable="copper").bom()
    assert (bom.cables_copper, bom.cables_optical, bom.transceivers) == (256, 256, 512)
    assert {i.item for i in bom.items if i.role == "node-leaf"} == {"dac-400g"}


def test_cable_class_follows_the_link_rate(catalog: Catalog) -> None:
    assert cable_class(catalog, "optical", 25e9).id == "optical-200g"
    assert cable_class(catalog, "optical", 50e9).id == "optical-400g"
    assert cable_class(catalog, "copper", 100e9).id == "dac-800g"
    assert cable_class(catalog, "optical", 200e9).id == "optical-1600g"  # GDR (roadmap)
    with pytest.raises(SpecError, match=r"no catalog optical cable carries 3\.2Tb/s"):
        cable_class(catalog, "optical", 400e9)
    bom = build_cluster("dgx-a100", nodes=4, link="ib-hdr").bom()
    assert {i.item for i in bom.items if i.category == "cable"} == {"optical-200g"}


def test_unpriced_switch_makes_totals_unknown(catalog: Catalog) -> None:
    """A switch without a catalog price or power (here one taken out) is named in ``missing``; the totals are
    unknown, never a guess, and the priced part is still given."""
    sn5400 = catalog.switch("sn5400").model_copy(update={"price_usd": None, "power_w": None})
    unpriced = catalog.model_copy(update={"switches": {**catalog.switches, "sn5400": sn5400}})
    bom = build_cluster("dgx-h100", nodes=4, link="eth-400g", catalog=unpriced).bom()
    assert bom.switch == "sn5400" and bom.nic == "cx7-eth"
    assert bom.capex_usd is None and bom.power_w is None
    assert "sn5400 price" in bom.missing and bom.capex_known_usd > 4 * 300_000
    assert any("replaces the system's cx7" in n for n in bom.notes)


def test_torus_counts() -> None:
    bom = build_cluster("dgx-h100", nodes=27, fabric="torus").bom()  # 3x3x3, 56 ports left: 9 per direction
    assert bom.switches == {"torus": 27}
    assert bom.cables == {"node-switch": 216, "torus": 27 * 9 * 3}
    assert bom.bisection_bytes_per_s == pytest.approx(min(13 * 8 * 50e9, 2 * 9 * 50e9 * 9))


def test_mesh_counts() -> None:
    bom = build_cluster("dgx-h100", nodes=5, fabric="mesh").bom()  # 2 cables per node pair
    assert bom.switches == {} and bom.switches_total == 0
    assert bom.cables == {"node-node": 10 * 2}
    assert bom.bisection_bytes_per_s == pytest.approx(2 * 3 * 2 * 50e9)


def test_single_node_has_no_bisection() -> None:
    assert build_cluster("dgx-h100", nodes=1).bom().bisection_bytes_per_s == 0


def test_plain_small_cluster_is_one_switch() -> None:
    topo = build_cluster("dgx-h100", nodes=8, rail_optimized=False)
    assert topo.tiers == 1 and topo.bom().switches == {"leaf": 1, "spine": 0, "core": 0}
    assert topo.bisection_bytes_per_s == pytest.approx(32 * 50e9)


def test_xdr_fabric_brings_connectx8_fed_by_the_node_pcie() -> None:
    """An XDR fabric brings the NIC that runs it (ConnectX-8, 800G = 100 GB/s); a DGX B200's PCIe Gen5 x16
    (63 GB/s) feeds each one, a DGX B300's PCIe Gen6 the full port; the system's own NIC generation by default."""
    topo = build_cluster("dgx-b200", nodes=8, link="ib-xdr")
    assert topo.fabric_switch.id == "q3400" and topo.nic.id == "cx8"
    assert topo.nic_link_bytes_per_s == pytest.approx(63e9)
    assert any("replaces the system's cx7" in n for n in topo.bom().notes)
    assert build_cluster("dgx-b300", nodes=8, link="ib-xdr").nic_link_bytes_per_s == pytest.approx(100e9)
    default = build_cluster("dgx-a100", nodes=2)
    assert default.nic.id == "cx6" and default.fabric_switch.link == "ib-hdr"
