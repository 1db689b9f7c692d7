"""`fabricsim traffic`, issue 21: one-line errors for a negative seed and an empty matrix (no numpy noise), named
endpoints in the hottest links, labelled bandwidth columns, and a plot titled with the run's parameters."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fabricsim.cli import app
from fabricsim.cli.traffic_cmd import plot_title

TOPO = ["traffic", "--nodes", "40", "--ib", "ndr", "--tiers", "2"]


def test_negative_seed_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, [*TOPO, "--seed", "-1", "--placement", "random"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == ["error: --seed: seed must be >= 0, got -1"]
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {gpus: 8, pattern: ring, bytes: 1M, seed: -3}\n")
    result = runner.invoke(app, [*TOPO, "--jobs", str(jobs)])
    assert result.exit_code == 2 and "seed must be >= 0" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_empty_matrix_is_one_line_without_numpy_warning(tmp_path: Path) -> None:
    import subprocess
    import sys

    empty = tmp_path / "empty.csv"
    empty.write_text("")
    out = subprocess.run([sys.executable, "-m", "fabricsim", *TOPO, "--pattern", str(empty), "--gpus", "4"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 2
    lines = (out.stdout + out.stderr).strip().splitlines()
    assert len(lines) == 1 and "is empty" in lines[0] and "Warning" not in lines[0], lines


def test_hottest_links_name_switches_and_nics(runner: CliRunner) -> None:
    result = runner.invoke(app, [*TOPO, "--pattern", "permutation", "--bytes", "64M", "--json"])
    assert result.exit_code == 0, result.output
    hottest = json.loads(result.stdout)["links"]["hottest"]
    assert hottest
    for h in hottest:
        for name in (h["src_name"], h["dst_name"]):
            kind = name.split()[0]
            assert kind in ("leaf", "spine", "node"), name
        if h["tier"] == "leaf->spine":
            assert h["src_name"].startswith("leaf ") and h["dst_name"].startswith("spine ")
    table = runner.invoke(app, [*TOPO, "--pattern", "permutation", "--bytes", "64M"])
    assert " -> spine " in table.output or " -> leaf " in table.output
    assert "sent/s per GPU" in table.output and "% of NIC line rate" in table.output
    assert "per GPU │ of line rate" not in table.output


def test_plot_title_names_the_parameters() -> None:
    inputs = {"system": "dgx-h100", "nodes": 40, "fabric": "fat-tree", "ib": "ndr", "eth": None, "switch": None,
              "tiers": 2, "oversubscription": 2.0, "pattern": "all_to_all", "nbytes": "1G", "routing": "spray",
              "jobs_file": None}
    title = plot_title(inputs, 320)
    for part in ("dgx-h100", "40 nodes", "fat-tree", "ndr", "2 tiers", "2:1", "all_to_all", "1GB", "320 GPUs",
                 "spray"):
        assert part in title, (part, title)


def test_train_cluster_nodes_smaller_than_the_job_is_one_line(runner: CliRunner) -> None:
    result = runner.invoke(app, ["train", "--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--sim", "flow",
                                 "--cluster-nodes", "4"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--cluster-nodes" in lines[0] and "(8 nodes)" in lines[0], lines
