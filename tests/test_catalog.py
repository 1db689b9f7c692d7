"""The catalog: the figures the field quotes, sources everywhere, and clear errors on bad YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.catalog import CATEGORY_MODELS, Catalog, load_catalog
from fabricsim.catalog.loader import load_documents, packaged_documents, read_yaml
from fabricsim.errors import SpecError


def nvlink_per_gpu_both_dirs(catalog: Catalog, gpu_id: str) -> float:
    gpu = catalog.gpu(gpu_id)
    assert gpu.nvlink is not None
    return 2 * gpu.nvlink_links * catalog.link(gpu.nvlink).bytes_per_s


def test_b200_nvlink5_is_18_links_of_100GBps_both_directions(catalog: Catalog) -> None:
    b200 = catalog.gpu("b200")
    link = catalog.link(b200.nvlink or "")
    assert link.generation == "5"
    assert b200.nvlink_links == 18
    assert 2 * link.bytes_per_s == pytest.approx(100e9)
    assert nvlink_per_gpu_both_dirs(catalog, "b200") == pytest.approx(1.8e12)


def test_b200_nvlink_is_about_14x_pcie_gen5_x16(catalog: Catalog) -> None:
    pcie5_both_dirs = 2 * catalog.link("pcie5").bytes_per_s
    ratio = nvlink_per_gpu_both_dirs(catalog, "b200") / pcie5_both_dirs
    assert 13.5 <= ratio <= 14.5


def test_h100_has_18_nvlink4_links_900GBps(catalog: Catalog) -> None:
    h100 = catalog.gpu("h100-sxm")
    assert h100.nvlink == "nvlink4"
    assert h100.nvlink_links == 18
    assert nvlink_per_gpu_both_dirs(catalog, "h100-sxm") == pytest.approx(900e9)


@pytest.mark.parametrize(("gen", "gbps"), [("edr", 100), ("hdr", 200), ("ndr", 400), ("xdr", 800)])
def test_infiniband_port_rates(catalog: Catalog, gen: str, gbps: int) -> None:
    link = catalog.link(f"ib-{gen}")
    assert link.kind == "infiniband"
    assert link.bytes_per_s * 8 == pytest.approx(gbps * 1e9)


def test_infiniband_generations_complete_and_gdr_is_roadmap(catalog: Catalog) -> None:
    gens = {link.generation for link in catalog.links_of_kind("infiniband")}
    assert {"SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR", "XDR", "GDR"} <= gens
    assert catalog.link("ib-gdr").status == "roadmap"
    rates = [catalog.link(f"ib-{g}").bytes_per_s for g in ("sdr", "ddr", "qdr", "fdr", "edr", "hdr", "ndr", "xdr")]
    assert rates == sorted(rates)


def test_nvlink5_domain_reaches_576(catalog: Catalog) -> None:
    assert catalog.link("nvlink5").max_domain_gpus == 576
    assert catalog.system("gb200-nvl72").nvlink_domain_gpus == 72


def test_required_entries_present(catalog: Catalog) -> None:
    for gpu in ("a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200", "gb200", "mi300x"):
        catalog.gpu(gpu)
    for gen in range(1, 6):
        catalog.link(f"nvlink{gen}")
    for gen in range(3, 7):
        catalog.link(f"pcie{gen}")
    for eth in ("eth-100g", "eth-200g", "eth-400g", "eth-800g"):
        catalog.link(eth)
    for switch in ("nvswitch-gen3", "nvlink-switch-gen4", "qm8700", "qm9700", "q3400", "sn5600"):
        catalog.switch(switch)
    for nic in ("cx6", "cx7", "cx8"):
        catalog.nic(nic)
    for system in ("dgx-a100", "dgx-h100", "hgx-h200", "dgx-b200", "gb200-nvl72", "pcie-h100-8gpu"):
        catalog.system(system)
    assert catalog.system("pcie-h100-8gpu").intra == "pcie"


def test_sharp_support(catalog: Catalog) -> None:
    assert catalog.switch("qm9700").sharp
    assert catalog.switch("nvswitch-gen3").sharp
    assert not catalog.switch("nvswitch-gen2").sharp


def test_every_entry_has_a_source(catalog: Catalog) -> None:
    count = 0
    for category in CATEGORY_MODELS:
        for entry in getattr(catalog, category).values():
            assert entry.source.strip(), f"{category}.{entry.id} has no source"
            count += 1
    assert count > 40


def test_unknown_name_suggests_close_match(catalog: Catalog) -> None:
    with pytest.raises(SpecError, match="did you mean 'dgx-h100'"):
        catalog.system("dgx-h10")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


def test_missing_required_field_names_file_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpus:\n  - {id: x1, name: X, vendor: V, source: s, hbm_bytes: 80GiB,"
                            " hbm_bytes_per_s: 3TB/s, tdp_w: 700W, pcie: pcie5}\n")
    with pytest.raises(SpecError) as err:
        load_catalog(path)
    assert "bad.yaml" in str(err.value)
    assert "bf16_flops_per_s" in str(err.value)
    assert "missing" in str(err.value)


def test_wrong_unit_names_file_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpus:\n  - {id: x1, name: X, vendor: V, source: s, bf16_flops_per_s: 1PFLOP/s,"
                            " hbm_bytes: 25GB/s, hbm_bytes_per_s: 3TB/s, tdp_w: 700W, pcie: pcie5}\n")
    with pytest.raises(SpecError) as err:
        load_catalog(path)
    assert "bad.yaml" in str(err.value)
    assert "hbm_bytes" in str(err.value)
    assert "size" in str(err.value)


def test_empty_source_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, "nics:\n  - {id: n1, name: N, source: '', link: ib-ndr, ports: 1,"
                            " port_bytes_per_s: 400Gb/s, host_pcie: pcie5}\n")
    with pytest.raises(SpecError, match="source"):
        load_catalog(path)


def test_unknown_field_and_category_rejected(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="unknown field"):
        load_catalog(_write(tmp_path, "nics:\n  - {id: n1, name: N, source: s, link: ib-ndr, ports: 1,"
                                      " port_bytes_per_s: 400Gb/s, host_pcie: pcie5, colour: red}\n"))
    with pytest.raises(SpecError, match="unknown category"):
        load_catalog(_write(tmp_path, "gpuz: []\n"))


def test_dangling_reference_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, "nics:\n  - {id: n1, name: N, source: s, link: ib-zdr, ports: 1,"
                            " port_bytes_per_s: 400Gb/s, host_pcie: pcie5}\n")
    with pytest.raises(SpecError, match="ib-zdr"):
        load_catalog(path)


def test_overlay_replaces_entry_by_id(tmp_path: Path) -> None:
    path = _write(tmp_path, "links:\n  - {id: ib-ndr, name: NDR tuned, kind: infiniband, generation: NDR,"
                            " unit: 4x port, bytes_per_s: 45GB/s, latency_s: 2us, source: calibration}\n")
    tuned = load_catalog(path)
    assert tuned.link("ib-ndr").bytes_per_s == pytest.approx(45e9)
    assert load_catalog().link("ib-ndr").bytes_per_s == pytest.approx(50e9)


def test_invalid_yaml_syntax(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not valid YAML"):
        read_yaml("gpus: [", "bad.yaml")


def test_packaged_documents_all_parse() -> None:
    docs = packaged_documents()
    assert {name for name, _ in docs} >= {"gpus.yaml", "links.yaml", "switches.yaml", "nics.yaml", "systems.yaml"}
    load_documents(docs)


def test_packaged_yaml_parses_the_same_with_the_checked_loader() -> None:
    """The packaged data is read with libyaml's fast parser; the checked loader (duplicate keys, nesting, aliases
    refused) must read every packaged file to the same data."""
    from pathlib import Path

    from fabricsim.inputs import load_packaged_yaml, load_yaml

    root = Path(__file__).resolve().parents[1] / "src" / "fabricsim"
    files = sorted(root.rglob("data/*.yaml"))
    assert len(files) >= 10
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert load_packaged_yaml(text, path.name) == load_yaml(text, path.name), path
