"""`fabricsim topo`: tables, JSON fields, sketch, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from fabricsim.cli import app


def test_topo_json_superpod(runner: CliRunner) -> None:
    result = runner.invoke(app, ["topo", "--system", "dgx-h100", "--nodes", "128", "--fabric", "fat-tree",
                                 "--ib", "ndr", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["gpus"] == 1024 and data["links"] > 0
    assert data["switches"] == {"leaf": 32, "spine": 16, "core": 0}
    assert data["cables"] == {"node-leaf": 1024, "leaf-spine": 1024}
    assert data["bisection_bytes_per_s"] == 512 * 50e9
    for key in ("nodes", "nics", "cables_copper", "cables_optical", "transceivers", "capex_usd", "power_w",
                "nvlink_domain_size", "items", "links_by_kind"):
        assert key in data


def test_topo_json_options(runner: CliRunner) -> None:
    result = runner.invoke(app, ["topo", "--nodes", "64", "--no-rail-optimized", "--oversubscription", "2",
                                 "--tiers", "3", "--eth", "800g", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["switch"] == "sn5600" and data["oversubscription"] == 2 and data["tiers"] == 3
    assert data["links_by_kind"]["ethernet"] > 0 and data["links_by_kind"]["infiniband"] == 0


def test_topo_table_and_plot(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "topo.png"
    result = runner.invoke(app, ["topo", "--nodes", "16", "--plot", str(out)])
    assert result.exit_code == 0, result.output
    assert "rail-optimized fat tree, 2 tiers, qm9700" in result.output
    assert "bill of materials" in result.output
    assert out.stat().st_size > 10_000


def test_topo_torus_dims(runner: CliRunner) -> None:
    result = runner.invoke(app, ["topo", "--nodes", "8", "--fabric", "torus", "--torus-dims", "2x2x2", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["switches"] == {"torus": 8}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricsim", *args], capture_output=True, text=True, check=False)


def test_topo_errors_are_one_line_exit_2() -> None:
    for args in (["--nodes", "0"], ["--nodes", "300", "--tiers", "2"], ["--ib", "ndr", "--eth", "400g"],
                 ["--fabric", "torus", "--torus-dims", "4x4"], ["--nodes", "2048", "--plot", "x.png"]):
        proc = _run("topo", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("error: ") and len(proc.stderr.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr
