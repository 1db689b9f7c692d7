"""`fabricsim catalog` tables and JSON; errors are one line and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fabricsim.cli import app


@pytest.mark.parametrize("category", ["gpus", "links", "switches", "nics", "cables", "systems"])
def test_catalog_table(runner: CliRunner, category: str) -> None:
    result = runner.invoke(app, ["catalog", category])
    assert result.exit_code == 0, result.output
    assert f"catalog: {category}" in result.output


def test_catalog_json_is_si(runner: CliRunner) -> None:
    result = runner.invoke(app, ["catalog", "links", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["inputs"]["category"] == "links"
    rows = data["links"]
    ndr = next(r for r in rows if r["id"] == "ib-ndr")
    assert ndr["bytes_per_s"] == pytest.approx(50e9)
    assert ndr["latency_s"] < 1e-5
    assert all(r["source"] for r in rows)


def test_catalog_json_all_categories(runner: CliRunner) -> None:
    result = runner.invoke(app, ["catalog", "--json"])
    data = json.loads(result.output)
    assert set(data) == {"inputs", "gpus", "links", "switches", "nics", "cables", "systems"}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricsim", *args], capture_output=True, text=True, check=False)


def test_bad_category_is_one_line_exit_2() -> None:
    proc = _run("catalog", "gpuz")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_bad_calibration_file_is_one_line_exit_2() -> None:
    proc = _run("catalog", "gpus", "--calibration", "/nonexistent.yaml")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: /nonexistent.yaml: file not found"
