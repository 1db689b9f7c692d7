"""Calibration: fitting model-generated data recovers the parameters; overlays round-trip through the catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.bench.calibration import Measurement, apply_parameters, calibrate, predict_times
from fabricsim.catalog import default_catalog, load_catalog
from fabricsim.collectives import CollectiveModel, group_shape, size_sweep
from fabricsim.errors import SpecError

TRUTH = {"intra_efficiency": 0.6, "net_efficiency": 0.7, "latency_scale": 1.5}


def synthetic(system: str, groups: list[tuple[int, int]], truth: dict[str, float]) -> list[Measurement]:
    cat = default_catalog()
    sysm = cat.system(system)
    tcat = apply_parameters(cat, sysm, None, truth)
    out: list[Measurement] = []
    for nranks, nodes in groups:
        sizes = size_sweep(1024, 8 * 2**30, 4)
        probes = [Measurement("all_reduce", nranks, nodes, s, 1.0) for s in sizes]
        times = predict_times(tcat, sysm, None, probes)
        out += [Measurement("all_reduce", nranks, nodes, s, float(t)) for s, t in zip(sizes, times, strict=True)]
    return out


def test_round_trip_recovers_known_parameters_within_1_percent() -> None:
    result = calibrate(synthetic("dgx-a100", [(8, 1), (16, 2)], TRUTH), "dgx-a100")
    assert set(result.fitted) == set(TRUTH)
    for name, value in TRUTH.items():
        assert result.after[name] == pytest.approx(value, rel=0.01)
    assert max(abs(r.after_error) for r in result.rows) < 0.01


def test_single_node_fits_only_what_it_exercises() -> None:
    result = calibrate(synthetic("dgx-h100", [(8, 1)], {**TRUTH, "net_efficiency": 0.94}), "dgx-h100")
    assert "net_efficiency" not in result.fitted
    assert result.after["intra_efficiency"] == pytest.approx(0.6, rel=0.01)


def test_overlay_file_reproduces_the_fit(tmp_path: Path) -> None:
    result = calibrate(synthetic("dgx-a100", [(8, 1), (16, 2)], TRUTH), "dgx-a100")
    path = result.write(tmp_path / "calib.yaml")
    cat = load_catalog(path)
    assert cat.link("nvlink3").efficiency == pytest.approx(0.6, rel=0.01)
    assert cat.link("ib-hdr").efficiency == pytest.approx(0.7, rel=0.01)
    shape = group_shape("dgx-a100", 16, catalog=cat)
    row = result.rows[-1]
    predicted = CollectiveModel(shape, catalog=cat).predict("all_reduce", [row.size_bytes]).rows[0].busbw_GBps
    assert predicted == pytest.approx(row.after_busbw_GBps, rel=1e-6)


def test_bad_measurements_raise() -> None:
    with pytest.raises(SpecError):
        calibrate([], "dgx-h100")
    with pytest.raises(SpecError):
        calibrate([Measurement("all_reduce", 8, 1, 1024, 0.0)], "dgx-h100")
    with pytest.raises(SpecError, match="unknown parameter"):
        calibrate(synthetic("dgx-h100", [(8, 1)], TRUTH), "dgx-h100", fit=["colour"])


DATA = Path(__file__).resolve().parent / "data" / "nccl-tests"


def _sample_log() -> Path:
    shared = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / "nccl-tests-logs"
    name = "h100-2node-16gpu-all_reduce.log"
    return shared / name if (shared / name).exists() else DATA / name


def test_calibrate_cli_on_sample_log_brings_predictions_within_5_percent(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from fabricsim.cli import app

    runner = CliRunner()
    log = str(_sample_log())
    overlay = tmp_path / "calib.yaml"
    result = runner.invoke(app, ["calibrate", log, "--system", "dgx-h100", "--out", str(overlay), "--json"])
    assert result.exit_code == 0, result.output
    fit = json.loads(result.output)
    assert max(abs(r["after_error"]) for r in fit["rows"]) <= 0.05
    compared = runner.invoke(app, ["compare", log, "--system", "dgx-h100", "--calibration", str(overlay), "--json",
                                   "--plot", str(tmp_path / "cmp.png")])
    assert compared.exit_code == 0, compared.output
    rows = json.loads(compared.output)["rows"]
    assert len(rows) == 5
    assert all(abs(r["error"]) <= 0.05 for r in rows)
    assert (tmp_path / "cmp.png").stat().st_size > 5000


def test_calibrate_cli_errors() -> None:
    from typer.testing import CliRunner

    from fabricsim.cli import app

    runner = CliRunner()
    assert runner.invoke(app, ["calibrate", "/nonexistent.log", "--system", "dgx-h100"]).exit_code == 2
    truncated = str(DATA / "truncated-all_reduce.log")
    assert runner.invoke(app, ["calibrate", truncated, "--system", "dgx-h100"]).exit_code == 2
