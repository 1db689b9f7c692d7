"""Reading the output (issue 21): tables readable at 80 columns, figures said per what they are, plots whose title
fits, a demo that answers first, a bare `fabricsim` that prints its usage, and a validate exit code explained."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _run(*args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=SRC, COLUMNS=str(columns))
    return subprocess.run([sys.executable, "-m", "fabricsim", *args], capture_output=True, text=True, env=env,
                          check=False, timeout=300)


def test_bare_fabricsim_prints_its_usage() -> None:
    proc = _run()
    assert proc.returncode == 0
    assert proc.stdout.startswith("Usage: ") and "COMMAND [ARGS]" in proc.stdout, proc.stdout[:200] + proc.stderr
    assert "train" in proc.stdout and "size" in proc.stdout


def test_topo_says_nvlink_domains_per_domain_and_in_all() -> None:
    out = _run("topo", "--system", "dgx-h100", "--nodes", "64").stdout
    assert "64 x 8 GPUs; 256 NVSwitch chips in all (4 per domain)" in out
    assert "8 GPUs (256 NVSwitch chips)" not in out
    assert "none (PCIe only)" in _run("topo", "--system", "pcie-h100-8gpu", "--nodes", "2").stdout


@pytest.mark.parametrize("nodes", [1, 2, 16])
def test_topo_sketch_title_inside_the_image(nodes: int) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from fabricsim.topology import build_cluster, sketch_figure

    fig = sketch_figure(build_cluster("dgx-h100", nodes=nodes))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    title = fig.get_suptitle()
    assert f"{nodes} x dgx-h100" in title
    box = fig._suptitle.get_window_extent(renderer)  # type: ignore[union-attr]
    assert box.x0 >= 0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1, (box, fig.bbox)


def test_catalog_at_80_columns_keeps_every_id_whole() -> None:
    from fabricsim.catalog import default_catalog

    proc = _run("catalog", columns=80)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    catalog = default_catalog()
    for ids in (catalog.gpus, catalog.systems, catalog.switches):
        for entry_id in ids:
            assert any(f"│ {entry_id} " in line for line in lines), entry_id
    assert "columns left out at this width" in proc.stdout


def test_catalog_wide_console_keeps_every_column() -> None:
    out = _run("catalog", "gpus", columns=250).stdout
    assert "matmul eff." in out and "verified" in out and "left out" not in out


def test_validate_at_80_columns_fits_and_explains_its_exit_code() -> None:
    proc = _run("validate", "--group", "training", columns=80)
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    # each case id on one line of its own: never folded mid-id
    for case_id in ("mb2511_h100_llama31_405b_fp8", "mb2511_b200_llama3_8b_fp8"):
        assert any(f"│ {case_id} " in line for line in lines), case_id
    tail = " ".join(line.strip() for line in lines[-3:])
    assert f"exit code {proc.returncode}" in tail
    if proc.returncode == 1:
        assert "outside their tolerance (training" in tail and "not an error in the installation" in tail


def test_demo_answers_without_printing_the_catalog() -> None:
    proc = _run("demo")
    assert proc.returncode == 0
    assert "catalog: systems" not in proc.stdout
    assert proc.stdout.lstrip().startswith("demo: llama3-70b")
    assert "bottleneck:" in proc.stdout
