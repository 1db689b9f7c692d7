"""`fabricsim validate`: file discovery, groups, metrics, overlays, settings, expressions and failure modes."""

from __future__ import annotations

import filecmp
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from fabricsim.catalog import Catalog
from fabricsim.cli import app
from fabricsim.collectives import CollectiveModel, group_shape
from fabricsim.validation import (
    GROUPS,
    INFERENCE_REASON,
    Case,
    CaseResult,
    NotExpressible,
    ValidationSettings,
    all_cases,
    group_summaries,
    load_settings,
    run_cases,
    run_collective_case,
    shared_validation_dir,
    sweep_sizes,
)
from fabricsim.validation.cases import validation_sources
from fabricsim.validation.overlay import OverlayCatalogs
from fabricsim.validation.settings import Setting, check_config, expression_for, settings_extra, with_settings

DATA = resources.files("fabricsim.validation.data")
SHARED_FILES = ("nccl_tests.yaml", "training.yaml", "more_cases.yaml", "inference.yaml")


def by_id(case_id: str) -> Case:
    return next(c for c in all_cases() if c.id == case_id)


def one(case: Case, catalog: Catalog, settings: ValidationSettings | None = None) -> CaseResult | NotExpressible:
    return run_cases([case], catalog, settings)[0]


@pytest.mark.parametrize("name", SHARED_FILES)
def test_packaged_copy_equals_shared(name: str) -> None:
    shared = shared_validation_dir()
    if shared is None or not (shared / name).is_file():
        pytest.skip("no ../shared/validation here")
    assert filecmp.cmp(shared / name, Path(str(DATA.joinpath(name))), shallow=False)


def test_every_file_loads_and_every_kind_is_present() -> None:
    names = set(validation_sources())
    assert set(SHARED_FILES) <= names and "settings.yaml" not in names
    kinds = {c.kind for c in all_cases()}
    assert kinds == {"collective", "training", "inference"}
    assert len(load_settings().settings) >= 4 and load_settings().expressions


def test_every_case_lands_in_a_group_and_nothing_crashes(catalog: Catalog) -> None:
    results = run_cases(all_cases(), catalog)
    assert len(results) == len(all_cases())
    assert {r.group for r in results} <= set(GROUPS)
    groups = {g.name: g for g in group_summaries(results)}
    assert list(groups) == list(GROUPS)
    assert groups["collective bandwidth"].count >= 15 and groups["collective latency"].count >= 1
    for g in groups.values():
        assert g.count + len(g.not_expressible) == sum(r.group == g.name for r in results)
        assert all(n.reason for n in g.not_expressible)


def test_inference_cases_are_counted_or_not_expressible_with_a_reason(catalog: Catalog) -> None:
    inference = [c for c in all_cases() if c.kind == "inference"]
    assert inference
    results = run_cases(inference, catalog)
    assert all(r.group == ("serving" if c.data.get("group") == "serving" else "inference")
               for c, r in zip(inference, results, strict=True))
    assert any(isinstance(r, CaseResult) for r in results)
    assert all(r.reason.startswith(INFERENCE_REASON + ": ") for r in results if isinstance(r, NotExpressible))


def test_sweep_sizes_follow_nccl_tests_increments() -> None:
    assert sweep_sizes({"start": 8, "step": 16, "max": 48}) == [8, 24, 40]
    assert sweep_sizes({"start": 8, "factor": 2, "max": 64}) == [8, 16, 32, 64]
    assert len(sweep_sizes({"start": 8, "step": 1048576, "max": 134217728})) == 128


@pytest.mark.parametrize("bad", [{"start": 8, "max": 64}, {"start": 64, "step": 8, "max": 8},
                                 {"start": 8, "step": 8, "factor": 2, "max": 64}])
def test_bad_sweep_is_a_spec_error(bad: dict[str, int], catalog: Catalog) -> None:
    case = Case(data={"id": "bad", "system": "dgx-h100", "nodes": 1, "op": "all_reduce",
                      "metric": "avg_busbw_GBps", "sizes": bad, "value": 100}, kind="collective", origin="test")
    result = one(case, catalog)
    assert isinstance(result, NotExpressible) and "sizes" in result.reason


def test_avg_busbw_is_the_mean_over_exactly_the_sweep(catalog: Catalog) -> None:
    case = {"id": "avg", "system": "dgx-h100", "nodes": 1, "op": "all_reduce", "metric": "avg_busbw_GBps",
            "sizes": {"start": 8, "step": 1024, "max": 4096}, "value": 1.0}
    rows = CollectiveModel(group_shape("dgx-h100", 8, catalog=catalog), catalog=catalog).predict(
        "all_reduce", [8, 1032, 2056, 3080]).rows
    expected = sum(r.busbw_GBps for r in rows) / 4
    result = run_collective_case(case, catalog)
    assert result.predicted == pytest.approx(expected)
    peak = run_collective_case({**case, "metric": "peak_busbw_GBps"}, catalog)
    assert peak.predicted == pytest.approx(max(r.busbw_GBps for r in rows))


def test_time_us_metric_and_default_tolerance(catalog: Catalog) -> None:
    case = {"id": "t", "system": "dgx-h100", "nodes": 1, "gpus": 8, "op": "all_reduce", "metric": "time_us",
            "size_bytes": 1024, "time_us": 20.0}
    result = run_collective_case(case, catalog)
    model = CollectiveModel(group_shape("dgx-h100", 8, catalog=catalog), catalog=catalog)
    assert result.predicted == pytest.approx(model.time_s("all_reduce", 1024) * 1e6)
    assert result.tolerance == 0.3 and result.group == "collective latency"
    assert run_collective_case({**case, "tolerance": 0.1}, catalog).tolerance == 0.1


def test_gpus_default_to_whole_nodes(catalog: Catalog) -> None:
    result = run_collective_case({"id": "n", "system": "dgx-h100", "nodes": 2, "op": "all_reduce",
                                  "size_bytes": 2**30, "busbw_GBps": 400}, catalog)
    assert "16 GPUs/2 nodes" in result.detail


def test_overlay_applies_and_is_cached_per_object(catalog: Catalog) -> None:
    case = by_id("a100_3node_hdr_peak")
    result = one(case, catalog)
    assert isinstance(result, CaseResult) and "24 GPUs/3 nodes" in result.detail
    cases = {c.id: c.data for c in all_cases()}
    peak, avg = cases["a100_3node_hdr_peak"], cases["a100_3node_hdr_avg"]
    assert peak["overlay"] is avg["overlay"]  # one YAML anchor ...
    catalogs = OverlayCatalogs(catalog)
    overlaid = catalogs.for_case(peak)
    assert catalogs.for_case(avg) is overlaid  # ... one overlaid catalog
    assert overlaid is not catalog and "dgx-a100-4nic" in overlaid.systems
    assert catalogs.for_case({"id": "plain"}) is catalog


def _zero_ib_overlay(case: Case, catalog: Catalog) -> Case:
    ib = catalog.links["ib-hdr"].model_dump(mode="json")
    ib.update(bytes_per_s=1, signal_bytes_per_s=None)
    overlay: dict[str, Any] = {**case.data["overlay"], "links": [ib]}
    return Case(data={**case.data, "overlay": overlay}, kind=case.kind, origin=case.origin)


def test_multinode_collective_fails_with_zero_network_bandwidth(catalog: Catalog) -> None:
    result = one(_zero_ib_overlay(by_id("a100_3node_hdr_peak"), catalog), catalog)
    assert isinstance(result, CaseResult), result
    assert not result.passed and result.error < -0.9


def _gpu_overlay(case: Case, catalog: Catalog, **fields: Any) -> Case:
    gpu = catalog.gpus["a100-sxm-80gb"].model_dump(mode="json")
    gpu.update(fields)
    return Case(data={**case.data, "overlay": {"gpus": [gpu]}}, kind=case.kind, origin=case.origin)


NO_SETTINGS = ValidationSettings()


@pytest.mark.parametrize("fields", [{"hbm_bytes_per_s": 1}, {"hbm_bytes": 1}], ids=["hbm-bandwidth", "hbm-bytes"])
def test_multinode_training_fails_with_zero_hbm(fields: dict[str, Any], catalog: Catalog) -> None:
    case = by_id("megatron_t1_39.1B")  # 512 GPUs on 64 nodes
    base = one(case, catalog)
    assert isinstance(base, CaseResult) and base.passed
    result = one(_gpu_overlay(case, catalog, **fields), catalog)
    assert isinstance(result, CaseResult), result
    assert not result.passed


def test_spec_error_becomes_not_expressible(catalog: Catalog) -> None:
    case = Case(data={"id": "x", "system": "no-such-system", "nodes": 1, "op": "all_reduce", "size_bytes": 8,
                      "busbw_GBps": 1}, kind="collective", origin="test")
    result = one(case, catalog)
    assert isinstance(result, NotExpressible) and "no-such-system" in result.reason
    training = Case(data={**by_id("megatron_t1_1.7B").data}, kind="training", origin="test")
    bad = ValidationSettings(settings=[Setting(match="megatron_t1_*", extra=["--warp-drive"], source="test")])
    result = one(training, catalog, bad)
    assert isinstance(result, NotExpressible) and "--warp-drive" in result.reason


def test_marked_cases_keep_their_reason(catalog: Catalog) -> None:
    result = one(by_id("gcp_a3mega_2node_ar"), catalog)
    assert isinstance(result, NotExpressible) and "TCPXO" in result.reason


def test_settings_apply_in_order_before_the_case_flags() -> None:
    settings = ValidationSettings(settings=[
        Setting(match="kor_*", extra=["--zero", "0"], source="a"),
        Setting(match="*", extra=["--no-flash-attn"], source="b"),
        Setting(match="sc21_*", extra=["--zero", "3"], source="c"),
    ])
    assert settings_extra("kor_175B", settings) == ["--zero", "0", "--no-flash-attn"]
    case = {"id": "kor_175B", "run": {"gpus": 8, "extra": ["--zero", "1"]}}
    assert with_settings(case, settings)["run"]["extra"] == ["--zero", "0", "--no-flash-attn", "--zero", "1"]
    assert case["run"]["extra"] == ["--zero", "1"]  # the case itself is not modified


def test_packaged_settings_cover_each_publication() -> None:
    settings = load_settings()
    assert "--no-sequence-parallel" in settings_extra("sc21_175B_ptdp_1536gpu", settings)
    assert "--no-sequence-parallel" in settings_extra("megatron_t1_1.7B", settings)  # 2021: before SP existed
    assert "--no-sequence-parallel" not in settings_extra("kor_175B_sp_selective", settings)
    assert "--no-flash-attn" in settings_extra("kor_175B_sp_selective", settings)
    assert settings_extra("tt_a100_llama3_8b_64gpu_selop", settings) == ["--no-tp-comm-overlap", "--kernels", "eager"]
    assert all(s.source for s in settings.settings)


def test_every_expression_matches_its_published_config() -> None:
    settings = load_settings()
    marked = {c.id: c for c in all_cases() if c.data.get("expressible") is False}
    for expr in settings.expressions:
        assert expr.id in marked, f"{expr.id} is not a case marked not expressible"
        check_config(marked[expr.id].data, expr)
    nemo = [i for i in marked if i.startswith("nemo2407_")]
    assert nemo and all(expression_for(i, settings) for i in nemo)


def test_inconsistent_expression_is_reported(catalog: Catalog) -> None:
    settings = load_settings()
    expr = expression_for("nemo2407_GPT3-5B_64gpu", settings)
    assert expr is not None
    broken = expr.model_copy(update={"run": {**expr.run, "tp": 2}})
    result = one(by_id("nemo2407_GPT3-5B_64gpu"), catalog,
                 ValidationSettings(settings=settings.settings, expressions=[broken]))
    assert isinstance(result, NotExpressible) and "TP=1" in result.reason


def test_cli_groups_filter_and_exit_code(runner: CliRunner) -> None:
    result = runner.invoke(app, ["validate", "--json", "--group", "collective latency"])
    data = json.loads(result.output)
    assert list(data["groups"]) == ["collective latency"]
    group = data["groups"]["collective latency"]
    assert {"cases", "median_abs_error", "worst_abs_error", "worst_case", "passed", "count",
            "not_expressible"} <= set(group)
    assert all(c["group"] == "collective latency" for c in data["cases"])
    assert data["all_within_tolerance"] == all(c["passed"] for c in data["cases"])
    assert result.exit_code == (0 if data["all_within_tolerance"] else 1)
    assert runner.invoke(app, ["validate", "--group", "nonsense"]).exit_code == 2


def test_cli_fails_when_the_network_is_cut(runner: CliRunner, tmp_path: Path, catalog: Catalog) -> None:
    links = []
    for link_id in ("ib-hdr", "ib-ndr"):
        link = catalog.links[link_id].model_dump(mode="json")
        link.update(bytes_per_s=1, signal_bytes_per_s=None)
        links.append(link)
    overlay = tmp_path / "cut.yaml"
    overlay.write_text(yaml.safe_dump({"links": links}))
    result = runner.invoke(app, ["validate", "--json", "--group", "collective bandwidth", "--calibration",
                                 str(overlay)])
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    multi = [c for c in data["cases"] if "/1 nodes" not in c["detail"]]
    assert multi and not any(c["passed"] for c in multi)


def test_cli_table_output(runner: CliRunner) -> None:
    result = runner.invoke(app, ["validate"])
    assert result.exit_code in (0, 1)
    for name in GROUPS:
        assert f"{name}:" in result.output
    assert "not expressible" in result.output
