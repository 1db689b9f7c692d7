"""Error bands (issue 24): the error model from the validation residuals, its leave-one-source-out coverage, and a
band on every predicted time or rate the commands print."""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.cli import app
from fabricsim.validation import (
    Band,
    NoBand,
    Regime,
    Residual,
    coverage,
    minimum_cases,
    published_residuals,
    source_key,
)
from fabricsim.validation.error_model import band, conformal_interval

REGIME = Regime("training", "step", (("model", "dense"), ("gpu", "hopper")), essential=1)


def _residuals(logs: list[float], gpu: str = "hopper") -> list[Residual]:
    regime = Regime("training", "step", (("model", "dense"), ("gpu", gpu)), essential=1)
    return [Residual(id=f"c{i}", source=f"doc{i % 3}", regime=regime, log_ratio=x) for i, x in enumerate(logs)]


@given(logs=st.lists(st.floats(-1.5, 1.5), min_size=9, max_size=60), value=st.floats(1e-6, 1e6),
       time_like=st.booleans())
def test_a_band_is_ordered_and_holds_the_estimate_after_bias(logs: list[float], value: float,
                                                             time_like: bool) -> None:
    b = band(value, time_like, REGIME, _residuals(logs))
    assert isinstance(b, Band)
    assert b.low <= b.estimate <= b.high
    assert b.cases == len(logs)
    assert math.isclose(value / b.estimate - 1.0, b.bias, rel_tol=1e-9, abs_tol=1e-12)


@given(logs=st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=80))
def test_the_conformal_interval_needs_nine_cases_at_80_percent_and_widens_as_they_thin(logs: list[float]) -> None:
    interval = conformal_interval(logs, 0.8)
    assert (interval is None) == (len(logs) < minimum_cases(0.8))
    if interval is not None:
        ordered = sorted(logs)
        j = math.floor((len(logs) + 1) * 0.1 + 1e-9)
        assert interval == (ordered[j - 1], ordered[len(logs) - j])
        assert (len(logs) + 1 - 2 * j) / (len(logs) + 1) >= 0.8 - 1e-12  # the distribution-free guarantee


def test_comparable_cases_share_the_most_features_that_leave_enough() -> None:
    hopper = _residuals([0.1] * 9)
    ampere = [Residual(id=f"a{i}", source="a", regime=Regime("training", "step", (("model", "dense"),
                                                                                   ("gpu", "ampere")), 1),
                       log_ratio=-0.5) for i in range(9)]
    found = band(100.0, True, REGIME, hopper + ampere)
    assert isinstance(found, Band) and found.cases == 9 and "hopper" in found.matched
    few = band(100.0, True, REGIME, hopper[:4] + ampere)  # too few on Hopper: every dense case
    assert isinstance(few, Band) and few.cases == 13 and "hopper" not in few.matched


def test_outside_every_validated_regime_says_so() -> None:
    moe = Regime("training", "step", (("model", "moe"), ("gpu", "hopper")), essential=1)
    found = band(1.0, True, moe, _residuals([0.0] * 20))
    assert isinstance(found, NoBand)
    assert "no comparable published measurement" in found.reason and "\n" not in found.reason
    assert found.to_json()["low"] is None


def test_a_paper_named_by_its_arxiv_id_is_its_own_document() -> None:
    assert source_key("arXiv 2310.03294 (Li, Shao, ...), Table 1") == source_key("arXiv:2310.03294 Table 3")
    assert source_key("arXiv 2310.03294 Table 1") != source_key("arXiv 2309.14509 Table 2")


def test_source_keys_name_documents_not_releases() -> None:
    assert source_key("NVIDIA/TensorRT-LLM docs/source/performance.md https://github.com/x") == \
        source_key("https://raw.githubusercontent.com/NVIDIA/TensorRT-LLM/release/0.5.0/docs/source/performance.md")
    assert source_key("https://nvidia.github.io/TensorRT-LLM/0.19.0/performance/perf-overview.html") == \
        source_key("NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md")
    assert source_key("github.com/NVIDIA/nccl/issues/1455") == "nvidia/nccl#1455"
    assert source_key("coreweave/nccl-tests PR #92 test plan") == "coreweave/nccl-tests#92"
    assert source_key("Narayanan et al. SC21 (arXiv:2104.04473) Table 1") == \
        source_key("Narayanan et al., SC21, Efficient Large-Scale")


def test_leaving_each_document_out_the_80_percent_band_covers_65_to_90_percent() -> None:
    found = {c.kind: c for c in coverage(published_residuals())}
    assert set(found) == {"collective", "training", "inference"}
    for kind, c in found.items():
        assert c.banded >= 30, (kind, c)
        assert c.rate is not None and 0.65 <= c.rate <= 0.90, (kind, c)


def _json(runner: CliRunner, *args: str) -> dict[str, object]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.output)
    return data


def _check(found: object) -> None:
    assert isinstance(found, dict)
    assert {"low", "high", "level", "cases", "bias", "estimate", "comparable"} <= set(found)
    if found["low"] is not None:
        assert found["low"] <= found["estimate"] <= found["high"]
        assert found["level"] == 0.8 and found["cases"] >= minimum_cases(0.8)
    else:
        assert "no comparable published measurement" in str(found["reason"])


def test_collective_json_carries_a_band_on_every_row(runner: CliRunner) -> None:
    data = _json(runner, "collective", "--system", "dgx-h100", "--nodes", "2", "--op", "all_reduce",
                 "--min", "8", "--max", "1G", "--step-factor", "64")
    rows = data["rows"]
    assert isinstance(rows, list)
    for row in rows:
        for key in ("time_s", "algbw_bytes_per_s", "busbw_bytes_per_s"):
            _check(row[f"{key}_band"])
    assert rows[0]["time_s_band"]["low"] is None  # 8 B across nodes: latency-bound, too few published cases
    assert rows[-1]["busbw_bytes_per_s_band"]["low"] is not None


def test_train_and_infer_json_carry_bands(runner: CliRunner) -> None:
    train = _json(runner, "train", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "8", "--tp", "1",
                  "--pp", "1", "--seq", "4096", "--gbs", "64")
    for key in ("step_time_s", "tokens_per_s", "model_flops_per_s_per_gpu"):
        _check(train[f"{key}_band"])
    assert train["step_time_s_band"]["low"] is not None
    infer = _json(runner, "infer", "--model", "llama3-70b", "--tp", "4", "--batch", "16", "--weights", "fp8",
                  "--rate", "2", "--duration", "30s")
    for key in ("ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
                "ttft_s_p50", "tpot_s_p99", "served_output_tokens_per_s"):
        _check(infer[f"{key}_band"])
    assert infer["tpot_s_band"]["low"] is not None


def test_validate_reports_band_width_and_coverage(runner: CliRunner) -> None:
    result = runner.invoke(app, ["validate", "--json"])
    data = json.loads(result.output)
    for name in ("collective bandwidth", "training", "inference"):
        band_stats = data["groups"][name]["band"]
        assert band_stats["median_width"] > 0 and band_stats["banded"] > 0
    assert set(data["band_coverage"]) == {"collective", "training", "inference"}


def test_a_calibration_overlay_with_its_measurements_narrows_the_band(runner: CliRunner, tmp_path: Path) -> None:
    """Twelve measured points of the user's own node, 1-3% slower than the model: the band comes from them alone
    (the errors left after calibration), not from the published cases."""
    from fabricsim.catalog import default_catalog
    from fabricsim.collectives import CollectiveModel, group_shape

    cat = default_catalog()
    model = CollectiveModel(group_shape(cat.system("dgx-h100"), 8, catalog=cat), catalog=cat)
    sizes = [2**k for k in range(26, 32)] * 2
    rows = model.predict("all_reduce", sizes).rows
    records = [{"system": "dgx-h100", "op": "all_reduce", "nranks": 8, "nnodes": 1, "size_bytes": s,
                "time_s": r.time_s * (1.01 + 0.02 * (i % 2))} for i, (s, r) in enumerate(zip(sizes, rows, strict=True))]
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(yaml.safe_dump({"measurements": records}))
    args = ["collective", "--system", "dgx-h100", "--op", "all_reduce", "--min", "1G", "--max", "1G"]
    published = _json(runner, *args)["rows"][0]["busbw_bytes_per_s_band"]  # type: ignore[index]
    mine = _json(runner, *args, "--calibration", str(overlay))["rows"][0][  # type: ignore[index]
        "busbw_bytes_per_s_band"]
    assert "your calibration measurements" in mine["comparable"] and mine["cases"] == len(records)
    assert "your calibration" not in published["comparable"]
    assert mine["high"] / mine["low"] < published["high"] / published["low"]
    assert 0.01 <= mine["bias"] <= 0.03  # the node is 1-3% slower than the model: its busbw is 1-3% high


@settings(deadline=None)  # the first example imports pandas
@given(times=st.lists(st.floats(1.0, 1e3), min_size=1, max_size=30), extra=st.floats(0.5, 2e3),
       spread=st.floats(0.0, 0.5))
def test_ties_keep_the_best_and_never_rank_a_plan_above_one_inside_the_band(times: list[float], extra: float,
                                                                           spread: float) -> None:
    import numpy as np
    import pandas as pd

    from fabricsim.sizing.rank import tie_mask

    def ranked(values: list[float]) -> pd.DataFrame:
        return pd.DataFrame({"time_to_train_s": sorted(values)})

    mask = tie_mask(ranked(times), "time", spread)
    assert mask[0] and not (np.diff(mask.astype(int)) > 0).any()  # the best, then a prefix: ties never follow a worse
    best = min(times)
    grown = ranked([*times, extra])
    still = tie_mask(grown, "time", spread)
    assert still[int(np.flatnonzero(grown["time_to_train_s"].to_numpy() == best)[0])] or extra * np.exp(spread) < best


def test_a_swap_pays_only_beyond_the_models_error() -> None:
    from fabricsim.analysis.deltas import SwapDelta

    base_capex = 100e6
    close = SwapDelta("ib=xdr", 0.95, 1.05, 1e6, True, speedup_range=(1.05 * 0.8, 1.05 * 1.25))
    clear = SwapDelta("ib=xdr", 0.95, 1.05, 1e6, True, speedup_range=(1.04, 1.06))
    assert close.pays_as_predicted(base_capex) and not close.worth_it(base_capex) and close.within_error(base_capex)
    assert clear.worth_it(base_capex) and not clear.within_error(base_capex)
    unbounded = SwapDelta("ib=xdr", 0.95, 1.05, 1e6, True)
    assert unbounded.pays_as_predicted(base_capex) and not unbounded.worth_it(base_capex)


def test_whatif_json_carries_the_base_band_and_each_swaps_speedup_band(runner: CliRunner) -> None:
    data = _json(runner, "whatif", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "16", "--tp", "1",
                 "--pp", "1", "--seq", "4096", "--gbs", "64", "--swap", "oversubscription=2")
    _check(data["base_step_s_band"])
    swap = data["swaps"][0]
    assert swap["speedup_band"]["low"] <= swap["speedup"] <= swap["speedup_band"]["high"]
    assert data["comparison_band"]["pairs"] > 0


def _banded(obj: dict[str, object], *keys: str) -> None:
    for key in keys:
        assert key in obj, key
        _check(obj[f"{key}_band"])


def test_every_predicted_time_or_rate_in_size_whatif_and_traffic_json_has_its_band(runner: CliRunner) -> None:
    size = _json(runner, "size", "--model", "llama3-8b", "--tokens", "100B", "--gpus", "16", "--systems", "dgx-h100",
                 "--fabrics", "ndr", "--oversubscription", "1", "--top", "3")
    for key in ("results", "pareto", "best_by_system_fabric"):
        for row in size[key]:  # type: ignore[union-attr]
            _banded(row, "time_to_train_s", "tokens_per_s", "cost_usd", "energy_mwh")
    _banded(size["ties"]["recommended"], "time_to_train_s")  # type: ignore[index]
    assert size["results"][0]["tie"] is True  # type: ignore[index]
    whatif = _json(runner, "whatif", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "16", "--tp", "1",
                   "--pp", "1", "--seq", "4096", "--gbs", "64", "--swap", "ib=hdr")
    for row in [*whatif["layers"], *whatif["swaps"]]:  # type: ignore[misc]
        _banded(row, "step_time_s")
    traffic = _json(runner, "traffic", "--system", "dgx-h100", "--nodes", "2", "--fabric", "fat-tree", "--ib", "ndr",
                    "--pattern", "permutation", "--bytes", "16M")
    _banded(traffic, "makespan_s")
    for job in traffic["jobs"]:  # type: ignore[union-attr]
        _banded(job, "completion_time_s", "bytes_per_s_per_gpu")


def test_inference_sizing_results_carry_bands(runner: CliRunner) -> None:
    data = _json(runner, "size", "--inference", "--model", "llama3-8b", "--rate", "5", "--slo-ttft", "2s",
                 "--slo-tpot", "100ms", "--systems", "dgx-h100")
    row = data["results"][0]  # type: ignore[index]
    _banded(row, "ttft_s_p50", "tpot_s_p90", "usd_per_million_output_tokens")


def test_inference_sizing_marks_ties_within_the_comparison_error_and_recommends_one(runner: CliRunner) -> None:
    data = _json(runner, "size", "--inference", "--model", "llama3-8b", "--rate", "5", "--slo-ttft", "2s",
                 "--slo-tpot", "100ms", "--systems", "dgx-h100")
    ties = data["ties"]
    assert isinstance(ties, dict) and ties["count"] >= 1
    results = data["results"]
    assert isinstance(results, list) and results[0]["tie"] is True
    tied = [r for r in results if r["tie"]]
    assert ties["recommended"] in tied or ties["count"] > len(tied)
    band = ties["comparison_band"]
    cheapest = results[0]["usd_per_million_output_tokens"]
    for r in tied:  # a tie is never costlier than the band allows
        assert r["usd_per_million_output_tokens"] <= cheapest * band["high"] * (1 + 1e-12)
    assert all(not r["tie"] for r in results if not r["simulated"])
