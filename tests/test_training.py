"""Training step model: validation against published throughput, consistency, what-if sanity."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricsim.catalog import Catalog, load_catalog
from fabricsim.cli import app
from fabricsim.comm.cluster import Cluster
from fabricsim.errors import SpecError
from fabricsim.model.flops import megatron_step_flops
from fabricsim.model.presets import load_model
from fabricsim.training.flops import step_flops
from fabricsim.training.plan import ParallelPlan
from fabricsim.training.result import LAYERS
from fabricsim.training.step import predict_training
from fabricsim.validation import TRAINING_TOLERANCE, load_cases, predict_case, run_training_case
from fabricsim.validation.settings import load_settings, with_settings

_RAW, ORIGIN = load_cases("training.yaml")
CASES = [with_settings(c, load_settings()) for c in _RAW]  # each run as published (2021: no flash attention ...)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_training_case_within_15_percent(case: dict[str, object], catalog: Catalog) -> None:
    result = run_training_case(case, catalog)
    assert abs(result.error) <= TRAINING_TOLERANCE, (
        f"{result.id}: published {result.measured:.0f} tokens/s, "
        f"predicted {result.predicted:.0f} ({result.error:+.1%})")


def test_training_median_error_at_most_8_percent(catalog: Catalog) -> None:
    errors = [abs(run_training_case(c, catalog).error) for c in CASES]
    assert len(errors) >= 5
    assert statistics.median(errors) <= 0.08


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_flops_match_megatron_closed_form(case: dict[str, object]) -> None:
    pred = predict_case(case)  # type: ignore[arg-type]
    model = case["model"]
    run = case["run"]
    assert isinstance(model, dict) and isinstance(run, dict)
    closed = megatron_step_flops(run["gbs"], run["seq"], model["layers"], model["hidden"], model["vocab"])
    ours = pred.tflops_per_gpu * 1e12 * pred.step_time_s * pred.gpus
    assert ours == pytest.approx(closed, rel=0.02)


def _cluster(system: str = "dgx-h100", catalog: Catalog | None = None) -> Cluster:
    cat = catalog or load_catalog()
    return Cluster(cat.system(system), catalog=cat)


def test_breakdown_adds_up_and_names_bottleneck() -> None:
    pred = predict_training(load_model("llama3-70b"), ParallelPlan.build(gpus=512, tp=8, pp=4, seq=8192, gbs=512,
                                                                         recompute="selective"),
                            _cluster())
    assert sum(pred.breakdown.exposed.values()) == pytest.approx(pred.step_time_s)
    assert pred.bottleneck == max(pred.breakdown.exposed, key=lambda k: pred.breakdown.exposed[k])
    assert set(pred.breakdown_s) == set(LAYERS)
    assert 0.2 < pred.mfu < 0.7
    assert pred.memory.fits


def test_plan_that_does_not_fit_says_by_how_much() -> None:
    pred = predict_training(load_model("llama3-70b"), ParallelPlan.build(gpus=64, tp=2, pp=1, seq=8192, gbs=64),
                            _cluster())
    assert not pred.memory.fits
    assert any("does not fit" in w and "short by" in w for w in pred.warnings)


def test_gpu_product_mismatch_names_the_product() -> None:
    with pytest.raises(SpecError, match=r"tp\*pp\*dp\*cp"):
        ParallelPlan.build(gpus=100, tp=8, pp=4, dp=4, seq=2048, gbs=64)


def test_tp_across_nodes_is_slower_and_infiniband_bound() -> None:
    model = load_model("gpt-39.1b")
    inside = ParallelPlan.build(gpus=64, tp=8, pp=1, seq=2048, gbs=512)
    across = ParallelPlan.build(gpus=64, tp=8, pp=1, seq=2048, gbs=512, order="dp-tp-cp-ep-pp")
    fast = predict_training(model, inside, _cluster())
    slow = predict_training(model, across, _cluster())
    assert slow.step_time_s > 1.5 * fast.step_time_s
    assert slow.bottleneck == "infiniband"
    assert any("TP group" in w for w in slow.warnings)


def _double_infiniband(tmp_path: Path) -> Catalog:
    base = load_catalog()
    link = base.link("ib-ndr").model_dump(mode="json")
    nic = base.nic("cx7").model_dump(mode="json")
    pcie = base.link("pcie5").model_dump(mode="json")  # the NICs' host link must feed the doubled port
    for entry, key in ((link, "bytes_per_s"), (nic, "port_bytes_per_s"), (pcie, "bytes_per_s")):
        entry[key] *= 2
    import yaml

    path = tmp_path / "double-ib.yaml"
    path.write_text(yaml.safe_dump({"links": [link, pcie], "nics": [nic]}))
    return load_catalog(path)


def test_double_infiniband_helps_dp_heavy_not_compute_bound(tmp_path: Path) -> None:
    doubled = _double_infiniband(tmp_path)
    model = load_model("llama3-8b")
    dp_heavy = ParallelPlan.build(gpus=128, tp=1, pp=1, seq=2048, gbs=128, zero=0, overlap_grad_reduce=False)
    compute_bound = ParallelPlan.build(gpus=128, tp=8, pp=1, seq=2048, gbs=8192, recompute="full")
    for plan, low, high in ((dp_heavy, 0.10, 1.0), (compute_bound, 0.0, 0.02)):
        before = predict_training(model, plan, _cluster()).step_time_s
        after = predict_training(model, plan, _cluster(catalog=doubled)).step_time_s
        gain = 1 - after / before
        assert low <= gain <= high, (plan, gain)


def test_nvl72_helps_tp_heavy_plan() -> None:
    model = load_model("gpt-145.6b")
    plan = ParallelPlan.build(gpus=144, tp=24, pp=1, seq=3072, gbs=144, recompute="full")  # 24 divides 72
    b200 = predict_training(model, plan, _cluster("dgx-b200"))
    nvl72 = predict_training(model, plan, _cluster("gb200-nvl72"))
    comm = ("nvlink", "infiniband")
    # NVLink 5 gives each GPU ~720 GB/s achievable; a DGX B200 node's 8 NDR NICs ~376 GB/s: about half the time
    assert sum(nvl72.breakdown.exposed[k] for k in comm) < 0.6 * sum(b200.breakdown.exposed[k] for k in comm)
    assert nvl72.step_time_s < b200.step_time_s
    assert b200.breakdown.exposed["infiniband"] > nvl72.breakdown.exposed["infiniband"]


def test_moe_expert_parallel_all_to_all_is_priced() -> None:
    model = load_model("mixtral-8x7b")
    with_ep = predict_training(model, ParallelPlan.build(gpus=64, tp=1, pp=1, ep=8, seq=4096, gbs=256,
                                                         recompute="full"), _cluster())
    assert with_ep.breakdown.exposed["nvlink"] > 0


def test_whole_nodes_required() -> None:
    with pytest.raises(SpecError, match="whole"):
        predict_training(load_model("llama3-8b"), ParallelPlan.build(gpus=12, tp=4, seq=2048, gbs=12), _cluster())


def test_step_flops_of_megatron_case_consistent() -> None:
    model = load_model("gpt-1.7b")
    plan = ParallelPlan.build(gpus=32, tp=1, seq=2048, gbs=512, recompute="full")
    assert step_flops(model, plan).hardware_flops == pytest.approx(
        megatron_step_flops(512, 2048, 24, 2304, 51200), rel=0.02)


def test_train_cli_json(tmp_path: Path) -> None:
    runner = CliRunner()
    png = tmp_path / "step.png"
    result = runner.invoke(app, ["train", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "1024",
                                 "--tp", "8", "--pp", "4", "--dp", "32", "--seq", "8192", "--gbs", "1024",
                                 "--recompute", "selective", "--flash-attn", "--json", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in ("step_time_s", "tokens_per_s", "flops_per_s_per_gpu", "mfu", "memory_per_gpu_bytes", "fits",
                "breakdown_s", "exposed_s", "bottleneck", "warnings"):
        assert key in data
    assert set(data["breakdown_s"]) >= {"compute", "hbm", "nvlink", "pcie", "infiniband", "pipeline_bubble"}
    assert png.stat().st_size > 5000


def test_train_cli_table_and_errors() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["train", "--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--seq", "4096",
                                 "--gbs", "256"])
    assert result.exit_code == 0, result.output
    assert "bottleneck" in result.output
    bad = runner.invoke(app, ["train", "--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--dp", "4"])
    assert bad.exit_code == 2
    typo = runner.invoke(app, ["train", "--model", "lama3-8b", "--gpus", "8", "--tp", "8"])
    assert typo.exit_code == 2


def test_tp_groups_straddling_racks_are_priced_on_the_network() -> None:
    """tp=16 does not divide a 72-GPU rack: one TP group per rack pair straddles two racks and sets the pace."""
    model = load_model("gpt-145.6b")
    aligned = predict_training(model, ParallelPlan.build(gpus=144, tp=24, seq=3072, gbs=144, recompute="full"),
                               _cluster("gb200-nvl72"))
    straddling = predict_training(model, ParallelPlan.build(gpus=144, tp=16, seq=3072, gbs=144, recompute="full"),
                                  _cluster("gb200-nvl72"))
    assert aligned.breakdown.exposed["infiniband"] < straddling.breakdown.exposed["infiniband"]
    assert any("TP group" in w for w in straddling.warnings)
