"""Issue 47 items 1-2: roadmap systems (Vera Rubin NVL72 = the GTC 2025 "NVL144", Rubin Ultra NVL576, AMD Helios),
co-packaged-optics switches, and scale-up domains that are not NVLink (UALink, scale-up Ethernet) priced through the
same collective model as NVLink, with their own parameters."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.catalog import default_catalog, figure_basis
from fabricsim.catalog.models import SCALE_UP_LINK_KINDS
from fabricsim.collectives import CollectiveModel, group_shape
from fabricsim.errors import SpecError
from fabricsim.sizing.space import priced_systems
from fabricsim.topology import build_cluster

CATALOG = default_catalog()
ROADMAP_SYSTEMS = ("vera-rubin-nvl72", "rubin-ultra-nvl576", "helios-mi455x")


def _roadmap_entries() -> list[object]:
    tables = (CATALOG.gpus, CATALOG.links, CATALOG.switches, CATALOG.systems)
    return [e for table in tables for e in table.values() if getattr(e, "status", "") == "roadmap"]


def test_roadmap_entries_are_sourced_dated_and_say_what_is_estimated() -> None:
    entries = _roadmap_entries()
    assert {e.id for e in entries} >= {*ROADMAP_SYSTEMS, "rubin", "rubin-ultra", "mi455x", "nvlink6", "ualink-200g",
                                       "sue-800g", "ualink-switch", "sn6810"}
    for e in entries:
        assert e.source.strip() and not e.verified, e.id  # announced, never measured
        assert e.estimated or e.notes, e.id  # what is estimated, and how, is said
    for sid in ROADMAP_SYSTEMS:
        system = CATALOG.system(sid)
        assert system.price_usd and system.power_w and system.price_date, sid


def test_roadmap_systems_are_searched_only_when_named() -> None:
    default = priced_systems(CATALOG)
    assert not set(default) & set(ROADMAP_SYSTEMS)
    assert "gb200-nvl72" in default
    # named, they build, price and run
    for sid in ROADMAP_SYSTEMS:
        bill = build_cluster(sid, nodes=2).bom()
        assert bill.capex_usd and bill.power_w
        assert f"system:{sid}" in bill.roadmap and any(f.startswith(f"{sid}.") for f in bill.estimated)
        assert any("estimated figures" in note for note in bill.notes)


def test_a_shipping_cluster_rests_on_no_roadmap_part() -> None:
    basis = figure_basis(CATALOG, CATALOG.system("dgx-h100"), "qm9700")
    assert basis.roadmap == () and basis.note() is None


def test_roadmap_switches_are_never_a_networks_default() -> None:
    bill = build_cluster("dgx-b300", nodes=32, link="eth-800g").bom()
    assert bill.switch == "sn5600"  # not the larger, roadmap SN6810 / SN6800
    assert build_cluster("dgx-b300", nodes=32, link="sn6810").bom().switch == "sn6810"  # named: used
    assert build_cluster("dgx-b300", nodes=32, link="xdr").bom().switch == "q3400"


def test_co_packaged_optics_remove_the_switch_end_transceivers_and_their_failures() -> None:
    pluggable = build_cluster("gb300-nvl72", nodes=32, link="q3400").bom()
    cpo = build_cluster("gb300-nvl72", nodes=32, link="q3450-ld").bom()
    assert pluggable.cables_total == cpo.cables_total and pluggable.switches == cpo.switches
    # node-leaf cables keep the NIC end's transceiver, leaf-spine cables keep none
    node_leaf = cpo.cables["node-leaf"]
    assert cpo.transceivers == node_leaf and pluggable.transceivers == 2 * pluggable.cables_total
    assert pluggable.cable_failure_exposure == pluggable.cables_total
    factor = CATALOG.switch("q3450-ld").optics_failure_factor
    assert factor is not None
    expected = node_leaf * (1 - 0.5 * (1 - factor.value)) + (cpo.cables_total - node_leaf) * factor.value
    assert cpo.cable_failure_exposure == pytest.approx(expected)
    assert cpo.power_w is not None and pluggable.power_w is not None and cpo.power_w < pluggable.power_w
    assert any("co-packaged optics" in n for n in cpo.notes)


def _domain_catalog(link: str, switch: str, links: int):  # type: ignore[no-untyped-def]
    """The catalog with a GB200 NVL72 rack whose GPUs' scale-up ports are ``links`` x ``link`` on ``switch``."""
    gpu = CATALOG.gpu("gb200").model_copy(update={"id": f"gb200-{link}", "nvlink": link, "nvlink_links": links})
    system = CATALOG.system("gb200-nvl72").model_copy(update={"id": f"nvl72-{link}", "gpu": gpu.id,
                                                              "nvswitch": switch, "nvswitch_chips": links})
    return CATALOG.model_copy(update={"gpus": {**CATALOG.gpus, gpu.id: gpu},
                                      "systems": {**CATALOG.systems, system.id: system}})


def _models() -> dict[str, CollectiveModel]:
    out = {"nvlink5": CollectiveModel(group_shape("gb200-nvl72", 72, catalog=CATALOG), CATALOG)}
    # equal per-GPU bandwidth: 18 NVLink 5 links of 50 GB/s = 9 UALink / SUE ports of 100 GB/s each way
    for link, switch in (("ualink-200g", "ualink-switch"), ("sue-800g", "tomahawk-ultra")):
        cat = _domain_catalog(link, switch, 9)
        out[link] = CollectiveModel(group_shape(f"nvl72-{link}", 72, catalog=cat), cat)
    return out


def test_a_ualink_or_scale_up_ethernet_domain_runs_the_collective_model_of_nvlink() -> None:
    models = _models()
    shapes = {k: m.shape for k, m in models.items()}
    for k, shape in shapes.items():
        assert shape.intra_kind == "nvlink", k  # the one scale-up mechanism
        assert shape.intra_line_bytes_per_s == pytest.approx(900e9), k
    assert shapes["ualink-200g"].intra_link_id == "ualink-200g" and not shapes["ualink-200g"].nvls
    assert shapes["sue-800g"].nvls and shapes["nvlink5"].nvls  # in-switch reduction where the switch has it
    big = 4 * 2**30
    # all-to-all moves the same bytes over the same per-GPU rate: equal within the path latency's difference
    a2a = {k: m.time_s("all_to_all", big) for k, m in models.items()}
    assert a2a["ualink-200g"] == pytest.approx(a2a["nvlink5"], rel=0.01)
    assert a2a["sue-800g"] == pytest.approx(a2a["nvlink5"], rel=0.01)
    # all-reduce: without in-switch reduction UALink 1.0 pays the ring's 2(n-1)/n bytes; NVLS does not
    ar = {k: m.time_s("all_reduce", big) for k, m in models.items()}
    assert ar["ualink-200g"] > 1.3 * ar["nvlink5"]
    assert ar["sue-800g"] == pytest.approx(ar["nvlink5"], rel=0.01)
    # small messages feel the path: UALink's and SUE's 250 ns switches against NVSwitch's 300 ns
    small = {k: m.time_s("all_to_all", 1024) for k, m in models.items()}
    assert small["ualink-200g"] <= small["nvlink5"] and small["sue-800g"] <= small["nvlink5"]


def test_more_scale_up_bandwidth_is_never_slower() -> None:
    sizes = np.array([2.0**k for k in range(10, 33, 2)])
    for link, switch in (("ualink-200g", "ualink-switch"), ("sue-800g", "tomahawk-ultra")):
        times = []
        for ports in (4, 9, 18):
            cat = _domain_catalog(link, switch, ports)
            model = CollectiveModel(group_shape(f"nvl72-{link}", 72, catalog=cat), cat)
            times.append(np.array([model.time_s(op, s) for op in ("all_reduce", "all_to_all") for s in sizes]))
        assert np.all(times[1] <= times[0] * (1 + 1e-12)) and np.all(times[2] <= times[1] * (1 + 1e-12))


def test_ualink_pods_join_up_to_the_specs_1024_accelerators() -> None:
    assert CATALOG.link("ualink-200g").kind in SCALE_UP_LINK_KINDS
    pod = CATALOG.system("helios-mi455x@1008")
    assert pod.nvlink_domain_gpus == 1008 and pod.status == "roadmap"
    with pytest.raises(SpecError, match="1024"):
        CATALOG.system("helios-mi455x@1080")
    with pytest.raises(SpecError):  # no multi-rack NVLink 6 domain is announced
        CATALOG.system("vera-rubin-nvl72@144")


def test_a_scale_up_link_must_be_a_scale_up_kind() -> None:
    bad = CATALOG.gpu("gb200").model_copy(update={"id": "bad", "nvlink": "ib-ndr"})
    cat = CATALOG.model_copy(update={"gpus": {**CATALOG.gpus, "bad": bad}})
    with pytest.raises(SpecError, match="expected nvlink or ualink or sue"):
        cat.check_references()


def test_helios_three_nics_per_gpu_build() -> None:
    topo = build_cluster("helios-mi455x", nodes=2)
    assert topo.node.nics == 216 and topo.num_gpus == 144
    bill = topo.bom()
    assert bill.nics == 432 and bill.nic == "vulcano"


def test_roadmap_scale_up_links_take_nvlink5s_tuning_figures() -> None:
    for link in ("nvlink6", "nvlink7", "ualink-200g", "sue-800g"):
        assert CATALOG.link(link).tuning_as == "nvlink5", link
    assert group_shape("vera-rubin-nvl72", 72, catalog=CATALOG).tuning_link_id == "nvlink5"
    assert group_shape("gb200-nvl72", 72, catalog=CATALOG).tuning_link_id == "nvlink5"
    assert group_shape("dgx-h100", 8, catalog=CATALOG).tuning_link_id == "nvlink4"


def test_a_systems_domain_moves_to_another_scale_up_technology_at_equal_bandwidth() -> None:
    from fabricsim.catalog import scale_up_variant

    base = group_shape("gb200-nvl72", 72, catalog=CATALOG)
    cat, sid = scale_up_variant(CATALOG, "gb200-nvl72", "ualink")
    assert sid == "gb200-nvl72+ualink-200g" and cat.system(sid).status == "roadmap"
    assert cat.system(sid).price_usd == CATALOG.system("gb200-nvl72").price_usd  # priced as the original
    shape = group_shape(sid, 72, catalog=cat)
    assert shape.intra_line_bytes_per_s == pytest.approx(base.intra_line_bytes_per_s) and not shape.nvls
    size = 256 * 2**20
    ualink = CollectiveModel(shape, cat).time_s("all_reduce", size)
    nvlink = CollectiveModel(base, CATALOG).time_s("all_reduce", size)
    assert ualink > nvlink  # no in-switch reduction
    with pytest.raises(SpecError, match="no switched scale-up domain"):
        scale_up_variant(CATALOG, "pcie-h100-8gpu", "ualink")
    with pytest.raises(SpecError, match="itself"):
        scale_up_variant(CATALOG, "gb200-nvl72@144", "ualink")
    with pytest.raises(SpecError, match="not a scale-up one"):
        scale_up_variant(CATALOG, "gb200-nvl72", "ib-ndr")


def test_whatif_prices_the_scale_up_swap() -> None:
    import fabricsim

    result = fabricsim.whatif(model="llama3-8b", system="gb200-nvl72", gpus=72, tp=8, pp=1, gbs=72, seq=2048,
                              swap=["scale-up=ualink", "scale-up=sue"])
    rows = {s["swap"]: s for s in result.to_dict()["swaps"]}
    assert set(rows) == {"scale-up=ualink", "scale-up=sue"}
    for row in rows.values():
        assert row["step_time_s"] > 0 and row["cost_delta_usd"] == 0 and row["fits"]
    with pytest.raises(SpecError, match="scale-up=nope"):
        fabricsim.whatif(model="llama3-8b", system="gb200-nvl72", gpus=72, tp=8, gbs=72, swap=["scale-up=nope"])


def test_predictions_on_a_roadmap_system_say_so() -> None:
    import fabricsim

    train = fabricsim.train(model="llama3-8b", system="vera-rubin-nvl72", gpus=72, tp=8, pp=1, gbs=72, seq=2048)
    assert any("roadmap system" in w for w in train.to_dict()["warnings"])
    infer = fabricsim.infer(model="llama3-8b", system="helios-mi455x", tp=1, prompt=1024, output=64)
    assert any("roadmap system" in w for w in infer.to_dict()["warnings"])
    shipping = fabricsim.train(model="llama3-8b", system="gb200-nvl72", gpus=72, tp=8, pp=1, gbs=72, seq=2048)
    assert not any("roadmap system" in w for w in shipping.to_dict()["warnings"])
