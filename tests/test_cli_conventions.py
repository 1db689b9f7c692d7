"""The CLI's shared conventions: light start-up, help on every option, narrow tables that never cut numbers, one
JSON schema (inputs echoed, SI keys, `ranks`), --format, nccl-tests output that `bench parse` reads back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from fabricsim.cli import app

SRC = str(Path(__file__).resolve().parents[1] / "src")
HEAVY = ("scipy", "pandas", "matplotlib", "torch", "ray", "numpy", "pydantic", "yaml")


def _run(*args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=SRC)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "fabricsim", *args], capture_output=True, text=True, env=env,
                          check=False, timeout=120)


def test_help_imports_no_heavy_package() -> None:
    code = ("import sys, runpy\nsys.argv = ['fabricsim', '--help']\ntry:\n    runpy.run_module('fabricsim', "
            "run_name='__main__')\nexcept SystemExit:\n    pass\nprint('LOADED', sorted({m.split('.')[0] for m in "
            f"sys.modules}} & set({HEAVY!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=SRC), timeout=60)
    assert "LOADED []" in proc.stdout, proc.stdout[-500:] + proc.stderr


def _commands(group: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            out += _commands(cmd, f"{prefix}{name} ")
        else:
            out.append((prefix + name, cmd))
    return out


def test_every_option_has_help_and_flags_show_no_metavar() -> None:
    root = typer.main.get_command(app)
    commands = _commands(root)
    assert len(commands) >= 14
    for name, cmd in commands:
        for param in cmd.params:
            if param.param_type_name != "option" or param.name == "help":
                continue
            assert (param.help or "").strip(), f"{name} {param.opts[0]} has no help"
    for name in ("train", "size", "topo", "bench collective"):
        assert "<bool>" not in _run(*name.split(), "--help").stdout


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("fabricsim ")


SMALL_SIZE = ["size", "--model", "llama3-8b", "--tokens", "1T", "--gpus", "256", "--gbs", "512", "--systems",
              "dgx-h100", "--fabrics", "ndr", "--oversubscription", "1", "--tp", "1,2", "--pp", "1", "--executor",
              "serial"]
NARROW = {
    "catalog": ["catalog"],
    "collective": ["collective", "--nodes", "2", "--max", "8G"],
    "train": ["train", "--model", "llama3-70b", "--gpus", "1024", "--tp", "8", "--pp", "4", "--seq", "8192",
              "--gbs", "1024"],
    "topo": ["topo", "--nodes", "128", "--ib", "ndr"],
    "whatif": ["whatif", "--model", "llama3-8b", "--gpus", "64", "--seq", "2048", "--gbs", "64", "--swap", "ib=xdr",
               "--swap", "system=gb200-nvl72"],
    "size": SMALL_SIZE,
}


@pytest.mark.parametrize("name", list(NARROW))
def test_tables_at_80_columns_never_cut_numbers(name: str) -> None:
    proc = _run(*NARROW[name], columns=80)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= 80
    assert "…" not in proc.stdout


JSON_COMMANDS = {**NARROW, "catalog": ["catalog", "models"], "validate": ["validate", "--group", "training"],
                 "traffic": ["traffic", "--nodes", "4", "--bytes", "1M"]}


def _keys(data: Any) -> set[str]:
    if isinstance(data, dict):
        return set(data) | {k for v in data.values() for k in _keys(v)}
    if isinstance(data, list):
        return {k for v in data for k in _keys(v)}
    return set()


@pytest.mark.parametrize("name", list(JSON_COMMANDS))
def test_json_echoes_inputs_in_si(name: str) -> None:
    result = CliRunner().invoke(app, [*JSON_COMMANDS[name], "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.output)
    assert isinstance(data, dict) and isinstance(data["inputs"], dict) and data["inputs"]
    keys = _keys({k: v for k, v in data.items() if k != "inputs"})
    assert not {k for k in keys if k.endswith(("_GBps", "_us")) or k in ("nranks", "world_size", "tflops_per_gpu")}


def test_csv_format() -> None:
    result = CliRunner().invoke(app, ["collective", "--max", "1M", "--format", "csv"])
    assert result.exit_code == 0
    header, first = result.output.splitlines()[:2]
    assert header.split(",")[:4] == ["size_bytes", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s"]
    assert first.startswith("8,")


def test_collective_nccl_tests_format_round_trips_through_bench_parse(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["collective", "--nodes", "2", "--min", "1K", "--max", "1G", "--step-factor", "8"]
    log = tmp_path / "model.log"
    out = runner.invoke(app, [*args, "--format", "nccl-tests"])
    assert out.exit_code == 0 and "# Avg bus bandwidth" in out.output
    log.write_text(out.output)
    parsed = json.loads(runner.invoke(app, ["bench", "parse", str(log), "--json"]).output)["results"]
    predicted = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert parsed[0]["op"] == "all_reduce" and parsed[0]["ranks"] == predicted["ranks"] == 16
    rows = [r for r in parsed[0]["rows"] if not r["in_place"]]
    assert [r["size_bytes"] for r in rows] == [r["size_bytes"] for r in predicted["rows"]]
    for got, want in zip(rows, predicted["rows"], strict=True):
        assert got["busbw_bytes_per_s"] == pytest.approx(want["busbw_bytes_per_s"], rel=0.01, abs=0.01e9)


def test_collective_prints_its_regime() -> None:
    result = CliRunner().invoke(app, ["collective", "--nodes", "2", "--max", "1G"])
    assert "regime: latency-bound up to" in result.output and "-bound from" in result.output


def test_fabric_names_are_the_same_everywhere() -> None:
    runner = CliRunner()
    topo = [json.loads(runner.invoke(app, ["topo", "--nodes", "4", *extra, "--json"]).output)
            for extra in (["--ib", "eth-400g"], ["--eth", "400g"], ["--ib", "400g"])]
    assert topo[0]["spec"] == topo[1]["spec"] == topo[2]["spec"]
    assert topo[0]["spec"]["link"] == "eth-400g"
    train = runner.invoke(app, ["train", "--model", "llama3-8b", "--gpus", "16", "--gbs", "16", "--seq", "2048",
                                "--ib", "eth-400g", "--json"])
    assert train.exit_code == 0, train.output
