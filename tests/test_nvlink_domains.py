"""Multi-rack NVLink domains (issue 27, item 1, in part): GB200 NVL576 as a roadmap system of 8 NVL72 racks under a
second NVLink switch tier. A GPU reaches any GPU of its 576 over NVLink at its full rate (through the second tier
between racks); the domain is one node to the scale-out fabric; roadmap systems are priced and named, and searched
only when asked for."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.catalog import default_catalog
from fabricsim.collectives import group_shape
from fabricsim.sizing.space import priced_systems
from fabricsim.topology import build_cluster, link_kind_name

CATALOG = default_catalog()


def test_gpus_of_one_domain_talk_over_nvlink_through_two_tiers() -> None:
    topo = build_cluster("gb200-nvl72@576", nodes=2)
    per_gpu = 18 * 50e9
    same_rack, other_rack = topo.path(0, 10), topo.path(0, 100)
    assert [link_kind_name(int(topo.link_kind[link])) for link in same_rack] == ["nvswitch"] * 2
    assert [link_kind_name(int(topo.link_kind[link])) for link in other_rack] == ["nvswitch"] * 4
    assert topo.link_capacity[other_rack].min() == pytest.approx(per_gpu)
    # a rack's uplink to the second tier carries all its GPUs at their full rate: non-blocking
    assert topo.link_capacity[other_rack[1]] == pytest.approx(72 * per_gpu)
    other_domain = topo.path(0, 576 + 5)
    kinds = {link_kind_name(int(topo.link_kind[link])) for link in other_domain}
    assert "infiniband" in kinds  # between domains: the scale-out fabric


def test_nvl576_bill_and_roadmap_status() -> None:
    bill = build_cluster("gb200-nvl72@576", nodes=2).bom()
    assert bill.capex_usd is not None and bill.nvlink_domain_size == 576
    assert any("roadmap system" in note for note in bill.notes)
    assert "gb200-nvl72@576" not in priced_systems(CATALOG)  # not a default candidate
    assert "gb200-nvl72" in priced_systems(CATALOG)


def test_collectives_inside_the_domain_stay_on_nvlink() -> None:
    shape = group_shape("gb200-nvl72@576", 576, catalog=CATALOG)
    assert shape.nnodes == 1
    nvl72 = group_shape("gb200-nvl72", 576, catalog=CATALOG)
    assert nvl72.nnodes == 8  # the same GPUs on NVL72 racks cross the scale-out network


@pytest.mark.parametrize(("system", "published_tbps"), [("gb200-nvl72", 130.0), ("gb200-nvl72@576", 1036.8)])
def test_nvlink_domain_bandwidth_matches_nvidia(system: str, published_tbps: float) -> None:
    """NVIDIA's figures: an NVL72 rack's NVLink carries 130 TB/s (NVLink page: '130 TB/s in one NVL72', 72 GPUs x
    1.8 TB/s both directions); a 576-GPU domain the same 1.8 TB/s per GPU (576 x 1.8 = 1,036.8 TB/s). The built
    topology's GPU-to-switch links sum to that, both directions, and a 576-GPU domain's second tier carries it all
    (non-blocking)."""
    topo = build_cluster(system, nodes=1)
    gpu = topo.endpoint_kind == topo.endpoint_kind[topo.gpu_endpoints()[0]]
    nvs = np.array([link_kind_name(int(k)) == "nvswitch" for k in topo.link_kind])
    from_gpu = nvs & gpu[topo.link_src]
    both_ways = 2 * topo.link_capacity[from_gpu].sum() / 1e12
    assert both_ways == pytest.approx(published_tbps, rel=0.01)
    if system == "gb200-nvl72@576":
        uplinks = nvs & ~gpu[topo.link_src] & ~gpu[topo.link_dst]
        assert topo.link_capacity[uplinks].sum() / 1e12 == pytest.approx(published_tbps, rel=1e-9)  # both ways


def test_racks_join_into_domains_of_144_to_576() -> None:
    """Any rack-scale system joins into domains of whole racks up to NVLink 5's 576 GPUs: 2 racks make 144, with
    a folded-Clos second tier (tier 1 doubled, tier 2 one rack's chips per rack) priced from the switch entry."""
    rack = CATALOG.system("gb200-nvl72")
    tier = CATALOG.switch("nvlink-switch-gen4").second_tier
    assert tier is not None and rack.price_usd is not None and rack.power_w is not None
    joined = CATALOG.system("gb200-nvl72@144")
    assert (joined.gpus_per_node, joined.nvlink_domain_gpus, joined.nvlink_rack_gpus) == (144, 144, 72)
    assert joined.nvswitch_chips == 3 * 2 * rack.nvswitch_chips and joined.status == "roadmap"
    assert joined.price_usd == pytest.approx(2 * rack.price_usd * (1 + tier.price_fraction.value))
    assert joined.power_w == pytest.approx(2 * (rack.power_w + tier.power_w_per_rack.value))
    assert CATALOG.system("gb200-nvl72@144/128").gpus_per_node == 128  # partly used, as any node
    topo = build_cluster("gb200-nvl72@144", nodes=2)
    assert topo.link_capacity[topo.path(0, 100)].min() == pytest.approx(18 * 50e9)  # across racks at full rate
    assert "gb200-nvl72@144" not in priced_systems(CATALOG)


@pytest.mark.parametrize(("system", "message"), [
    ("gb200-nvl72@100", "multiple of the 72 GPUs"),
    ("gb200-nvl72@1152", "largest domain of 576"),
    ("gb200-nvl72@72", "from 144"),
    ("gb200-nvl72@x", "after '@'"),
    ("dgx-h100@16", "not a rack-scale NVLink system"),
    ("dgx-b200@16", "not a rack-scale NVLink system"),  # NVLink switch gen4, but two chips on an HGX board
    ("pcie-h100-8gpu@16", "no NVLink switches to join"),
])
def test_joined_domain_errors(system: str, message: str) -> None:
    from fabricsim.errors import SpecError

    with pytest.raises(SpecError, match=message):
        CATALOG.system(system)


def test_racks_without_second_tier_figures_are_not_joined() -> None:
    from fabricsim.errors import SpecError

    switch = CATALOG.switch("nvlink-switch-gen4").model_copy(update={"second_tier": None})
    bare = CATALOG.model_copy(update={"switches": {**CATALOG.switches, switch.id: switch}})
    with pytest.raises(SpecError, match="no second-tier figures"):
        bare.system("gb200-nvl72@144")
    assert bare.why_not_joinable(bare.system("gb200-nvl72")) is not None
    assert CATALOG.why_not_joinable(CATALOG.system("gb200-nvl72")) is None


def test_topo_nvlink_domain_option() -> None:
    import json

    from typer.testing import CliRunner

    from fabricsim.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["topo", "--system", "gb200-nvl72", "--nvlink-domain", "144", "--nodes", "2", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["system"] == "gb200-nvl72@144" and data["nvlink_domain_size"] == 144
    bad = runner.invoke(app, ["topo", "--system", "gb200-nvl72@144", "--nvlink-domain", "288"])
    assert bad.exit_code == 2 and "already names its NVLink domain" in bad.output
