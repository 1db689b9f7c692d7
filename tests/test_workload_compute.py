"""Compute time: matmul efficiency from the catalog (sourced), the packaged fallback, HBM time and utilization."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.catalog import Catalog, load_catalog
from fabricsim.errors import SpecError
from fabricsim.model.compute import (
    achievable_flops_per_s,
    compute_time,
    default_matmul_efficiency,
    flops_utilization,
    hbm_time,
    matmul_efficiency,
)

# GPUs with no row in the MAMF table: they run on the packaged default rather than a carried-over figure.
NO_MAMF_MEASUREMENT = {"h800-sxm", "h20", "gb300", "h100-nvl", "rubin", "rubin-ultra", "mi455x"}  # roadmap: none exists


def test_every_packaged_gpu_has_a_sourced_matmul_efficiency(catalog: Catalog) -> None:
    for gpu in catalog.gpus.values():
        eff = gpu.matmul_efficiency
        if gpu.id in NO_MAMF_MEASUREMENT:
            assert eff is None, gpu.id
            assert matmul_efficiency(gpu) == default_matmul_efficiency()
            continue
        assert eff is not None, gpu.id
        assert 0.4 < eff.value <= 0.95
        assert "Maximum Achievable Matmul FLOPS" in eff.source


def test_published_mamf_figures(catalog: Catalog) -> None:
    # stas00/ml-engineering MAMF table: A100 SXM 271.2 / 312, H100 SXM 794.5 / 989 TFLOP/s
    assert achievable_flops_per_s(catalog.gpu("a100-sxm-80gb")) == pytest.approx(271.2e12, rel=0.002)
    assert achievable_flops_per_s(catalog.gpu("h100-sxm")) == pytest.approx(794.5e12, rel=0.002)


def test_compute_time_is_flops_over_peak_times_efficiency(catalog: Catalog) -> None:
    h100 = catalog.gpu("h100-sxm")
    assert compute_time(989.4e12, h100) == pytest.approx(1 / 0.803)
    assert compute_time(989.4e12, h100, efficiency=0.5) == pytest.approx(2.0)
    assert compute_time(0, h100) == 0
    with pytest.raises(SpecError, match="efficiency"):
        compute_time(1e12, h100, efficiency=1.5)
    with pytest.raises(SpecError, match="flops"):
        compute_time(-1, h100)


def test_gpu_without_efficiency_uses_packaged_default(tmp_path: Path) -> None:
    overlay = tmp_path / "gpu.yaml"
    overlay.write_text(
        "gpus:\n  - id: test-gpu\n    name: Test GPU\n    vendor: X\n    bf16_flops_per_s: 100TFLOP/s\n"
        "    hbm_bytes: 10GiB\n    hbm_bytes_per_s: 1TB/s\n    tdp_w: 100W\n    pcie: pcie5\n    source: test\n")
    gpu = load_catalog(overlay).gpu("test-gpu")
    default = default_matmul_efficiency()
    assert matmul_efficiency(gpu) == default
    assert default.value == pytest.approx(0.80) and not default.verified and default.source
    assert compute_time(80e12, gpu) == pytest.approx(1.0)


def test_overlay_efficiency_needs_a_source(tmp_path: Path) -> None:
    overlay = tmp_path / "gpu.yaml"
    overlay.write_text(
        "gpus:\n  - id: test-gpu\n    name: Test GPU\n    vendor: X\n    bf16_flops_per_s: 100TFLOP/s\n"
        "    hbm_bytes: 10GiB\n    hbm_bytes_per_s: 1TB/s\n    tdp_w: 100W\n    pcie: pcie5\n    source: test\n"
        "    matmul_efficiency: {value: 0.7}\n")
    with pytest.raises(SpecError, match=r"matmul_efficiency\.source"):
        load_catalog(overlay)


def test_hbm_time_and_utilization(catalog: Catalog) -> None:
    h100 = catalog.gpu("h100-sxm")
    assert hbm_time(3.35e12, h100) == pytest.approx(1.0)
    assert hbm_time(3.35e12, h100, efficiency=0.5) == pytest.approx(2.0)
    assert flops_utilization(989.4e12 * 8, 2.0, 8, h100) == pytest.approx(0.5)
    with pytest.raises(SpecError):
        hbm_time(-1, h100)
