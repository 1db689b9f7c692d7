"""`fabricsim collective` and `fabricsim validate` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fabricsim.cli import app


def test_collective_json_schema(runner: CliRunner) -> None:
    result = runner.invoke(app, ["collective", "--system", "dgx-h100", "--nodes", "1", "--op", "all_reduce",
                                 "--min", "8", "--max", "8G", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert len(data["rows"]) == 31
    assert set(data["rows"][0]) == {"size_bytes", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "algorithm",
                                    "protocol", "bound", "time_s_band", "algbw_bytes_per_s_band",
                                    "busbw_bytes_per_s_band"}
    assert data["ranks"] == 8 and data["inputs"]["op"] == "all_reduce" and data["inputs"]["max_size"] == "8G"
    assert data["rows"][-1]["algorithm"] == "nvls"
    assert data["assumptions"]["system"] == "dgx-h100"


def test_collective_table_and_plot(runner: CliRunner, tmp_path: Path) -> None:
    png = tmp_path / "busbw.png"
    result = runner.invoke(app, ["collective", "--system", "dgx-a100", "--nodes", "2", "--gpus", "12",
                                 "--min", "1K", "--max", "1G", "--step-factor", "4", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "busbw (GB/s)" in result.output
    assert png.stat().st_size > 10_000


def test_collective_bad_input(runner: CliRunner) -> None:
    result = runner.invoke(app, ["collective", "--system", "dgx-a100", "--algo", "nvls"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["collective", "--min", "12Q"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["collective", "--system", "dgx-h100", "--gpus", "9"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["collective", "--op", "allreduse"])
    assert result.exit_code == 2


def test_validate_json(runner: CliRunner) -> None:
    result = runner.invoke(app, ["validate", "--json"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.output)
    assert set(data["groups"]) == {"collective bandwidth", "collective latency", "training", "moe", "blackwell",
                                   "fsdp", "long context", "inference", "serving"}
    assert len(data["cases"]) >= 15
    assert result.exit_code == (0 if all(c["passed"] for c in data["cases"]) else 1)


def test_collective_one_rail_across_nodes(runner: CliRunner) -> None:
    result = runner.invoke(app, ["collective", "--system", "dgx-h100", "--nodes", "8", "--ranks-per-node", "1",
                                 "--min", "1G", "--max", "1G", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["assumptions"]["ranks"] == 8 and data["assumptions"]["nodes"] == 8
    assert data["rows"][0]["bound"] == "infiniband"
