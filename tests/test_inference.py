"""The inference model's physics as tests: HBM floor of decode, PCIe vs NVLink, the InfiniBand pipeline hop, FP8
weights, the KV-cache closed form, the step cost, and the `fabricsim infer` CLI's output and one-line errors."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.catalog import Catalog
from fabricsim.cli import app
from fabricsim.comm.cluster import Cluster
from fabricsim.errors import SpecError
from fabricsim.inference.experts import touched_experts
from fabricsim.inference.memory import decode_step_floor_s, kv_bytes_per_token_gpu, weight_bytes_per_gpu
from fabricsim.inference.params import kernel_latency_s
from fabricsim.inference.plan import InferencePlan
from fabricsim.inference.predict import predict_inference
from fabricsim.inference.stage import _gemm_rate, _stage, _stage_work, gemm_waves_s
from fabricsim.inference.stepcost import step_cost
from fabricsim.model import gemm_tile
from fabricsim.model.compute import fp4_matmul_efficiency, fp8_matmul_efficiency, hbm_efficiency
from fabricsim.model.formats import KV_BYTES, kv_bytes_per_token
from fabricsim.model.presets import load_model

MODELS = ("llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b")


def _cluster(catalog: Catalog, system: str, fabric: str | None = None) -> Cluster:
    return Cluster(catalog.system(system), fabric=fabric, catalog=catalog)


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(MODELS), tp=st.sampled_from([1, 2, 4, 8]), weights=st.sampled_from(["bf16", "fp8"]),
       system=st.sampled_from(["dgx-h100", "hgx-h200", "dgx-b200"]), prompt=st.sampled_from([128, 2048]))
def test_decode_tpot_never_beats_streaming_the_weights(catalog: Catalog, model: str, tp: int, weights: str,
                                                       system: str, prompt: int) -> None:
    spec = load_model(model)
    plan = InferencePlan(tp=tp, batch=1, prompt_tokens=prompt, output_tokens=64, weights=weights)
    cluster = _cluster(catalog, system)
    gpu = catalog.gpu(cluster.system.gpu)
    pred = predict_inference(spec, cluster, plan)
    floor = weight_bytes_per_gpu(spec, plan, gpu) * tp / (tp * gpu.hbm_bytes_per_s)
    if spec.moe is not None:  # batch 1 touches only top_k experts: the floor is the weights it reads
        floor = 0.0
    assert pred.tpot_s >= floor
    assert pred.tpot_s > 0 and pred.ttft_s > 0


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from((*MODELS, "deepseek-v3")), batch=st.sampled_from([1, 8, 64, 512]),
       weights=st.sampled_from(["bf16", "fp8", "fp4"]), kv=st.sampled_from(["bf16", "fp8"]),
       system=st.sampled_from(["hgx-h200", "dgx-b200"]), prompt=st.sampled_from([128, 2048]))
def test_decode_step_never_beats_its_hbm_floor(catalog: Catalog, model: str, batch: int, weights: str, kv: str,
                                               system: str, prompt: int) -> None:
    """The floor that flags impossible measurements (validation) is a true lower bound of the model's own decode
    step: the step streams the same bytes at an achievable fraction of the peak and pays compute besides."""
    assume(weights != "fp4" or system == "dgx-b200")  # FP4 tensor cores: Blackwell only
    spec = load_model(model)
    moe = spec.moe is not None
    plan = InferencePlan(tp=1 if moe else 8, ep=8 if moe else 1, dp=8 if moe else 1, batch=batch * 8 if moe else batch,
                         prompt_tokens=prompt, output_tokens=64, weights=weights, kv=kv)
    cluster = _cluster(catalog, system)
    gpu = catalog.gpu(cluster.system.gpu)
    floor = decode_step_floor_s(spec, plan, gpu)
    assert 0.0 < floor <= predict_inference(spec, cluster, plan).tpot_s
    fuller = replace(plan, batch=plan.batch * 2)  # more sequences stream more KV and touch no fewer experts
    assert decode_step_floor_s(spec, fuller, gpu) > floor


def test_dense_decode_floor_is_the_whole_model_over_the_group_bandwidth(catalog: Catalog) -> None:
    spec = load_model("llama3-70b")
    for tp in (1, 2, 4, 8):
        plan = InferencePlan(tp=tp, batch=1, prompt_tokens=128, output_tokens=16, weights="fp8")
        pred = predict_inference(spec, _cluster(catalog, "hgx-h200"), plan)
        gpu = catalog.gpu("h200-sxm")
        assert pred.tpot_s >= spec.parameters().total * 1.0 * 0.9 / (tp * gpu.hbm_bytes_per_s)


def test_tp8_decode_on_pcie_is_slower_and_names_pcie(catalog: Catalog) -> None:
    spec = load_model("llama3-70b")
    plan = InferencePlan(tp=8, batch=8, prompt_tokens=1024, output_tokens=128, weights="fp8")
    nvlink = predict_inference(spec, _cluster(catalog, "dgx-h100"), plan)
    pcie = predict_inference(spec, _cluster(catalog, "pcie-h100-8gpu"), plan)
    assert pcie.tpot_s > nvlink.tpot_s
    comm = {k: pcie.breakdown_s[k] for k in ("nvlink", "pcie", "infiniband", "ethernet")}
    assert max(comm, key=lambda k: comm[k]) == "pcie"
    assert pcie.breakdown_s["pcie"] > nvlink.breakdown_s["nvlink"]
    assert nvlink.breakdown_s["pcie"] == 0.0


def test_pipeline_across_nodes_pays_the_infiniband_hop_in_ttft(catalog: Catalog) -> None:
    spec = load_model("llama3-405b")
    plan = InferencePlan(tp=8, pp=2, batch=4, prompt_tokens=2048, output_tokens=16, weights="fp8")
    slow = predict_inference(spec, _cluster(catalog, "dgx-h100", "hdr"), plan)
    fast = predict_inference(spec, _cluster(catalog, "dgx-h100", "xdr"), plan)
    assert slow.prefill_s["infiniband"] > 0
    assert slow.prefill_s["infiniband"] > fast.prefill_s["infiniband"]
    assert slow.ttft_s > fast.ttft_s
    assert slow.ttft_s - slow.prefill_s["infiniband"] == pytest.approx(fast.ttft_s - fast.prefill_s["infiniband"])
    one_node = predict_inference(spec, _cluster(catalog, "hgx-h200"),
                                 InferencePlan(tp=4, pp=2, batch=4, prompt_tokens=2048, output_tokens=16,
                                               weights="fp8"))
    assert one_node.prefill_s["infiniband"] == 0.0  # two stages of four GPUs share a node


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("batch", [1, 16, 256])
def test_fp8_weights_never_slow_decode(catalog: Catalog, model: str, batch: int) -> None:
    spec = load_model(model)
    cluster = _cluster(catalog, "dgx-h100")
    kw = {"tp": 8, "batch": batch, "prompt_tokens": 1024, "output_tokens": 128}
    bf16 = predict_inference(spec, cluster, InferencePlan(**kw, weights="bf16"))  # type: ignore[arg-type]
    fp8 = predict_inference(spec, cluster, InferencePlan(**kw, weights="fp8"))  # type: ignore[arg-type]
    assert fp8.tpot_s <= bf16.tpot_s
    assert fp8.memory.weights_bytes < bf16.memory.weights_bytes


@pytest.mark.parametrize("tp,pp,kv", [(1, 1, "bf16"), (2, 1, "fp8"), (8, 2, "bf16"), (16, 1, "fp8")])
def test_kv_cache_per_token_is_the_closed_form(catalog: Catalog, tp: int, pp: int, kv: str) -> None:
    spec = load_model("llama3-405b")  # 126 layers, 8 KV heads of 128
    closed = 2 * spec.layers * spec.kv_heads * 128 * KV_BYTES[kv] / (min(tp, spec.kv_heads) * pp)
    assert kv_bytes_per_token(spec, tp, pp, kv) == pytest.approx(closed)
    plan = InferencePlan(tp=tp, pp=pp, batch=2, prompt_tokens=1000, output_tokens=24, kv=kv, weights="fp8")
    mem = predict_inference(spec, _cluster(catalog, "gb200-nvl72"), plan).memory
    assert mem.kv_cache_bytes == pytest.approx(2 * 1024 * closed)


def test_max_batch_and_context_are_the_fitting_edge(catalog: Catalog) -> None:
    spec = load_model("llama3-70b")
    cluster = _cluster(catalog, "dgx-h100")
    base = InferencePlan(tp=4, batch=8, prompt_tokens=2048, output_tokens=256, weights="fp8")
    pred = predict_inference(spec, cluster, base)
    assert pred.fits and pred.max_batch > 8
    edge = predict_inference(spec, cluster, InferencePlan(tp=4, batch=pred.max_batch, prompt_tokens=2048,
                                                          output_tokens=256, weights="fp8"))
    beyond = predict_inference(spec, cluster, InferencePlan(tp=4, batch=pred.max_batch + 1, prompt_tokens=2048,
                                                            output_tokens=256, weights="fp8"))
    assert edge.fits and not beyond.fits
    assert pred.max_context >= base.context


def test_moe_decode_reads_only_touched_experts(catalog: Catalog) -> None:
    assert touched_experts(8, 2, 1) == pytest.approx(2.0)
    assert touched_experts(256, 8, 1e6) == pytest.approx(256.0)
    spec = load_model("mixtral-8x7b")
    cluster = _cluster(catalog, "dgx-h100")
    one = predict_inference(spec, cluster, InferencePlan(tp=2, batch=1, prompt_tokens=512, output_tokens=32))
    many = predict_inference(spec, cluster, InferencePlan(tp=2, batch=64, prompt_tokens=512, output_tokens=32))
    assert one.decode_step_s["hbm"] < many.decode_step_s["hbm"]


@pytest.mark.parametrize("tokens", [16.0, 2048.0, 16384.0])
def test_routed_experts_stream_their_weights_beside_their_math(catalog: Catalog, tokens: float) -> None:
    """Grouped (per-expert) GEMMs: a step pays the routed experts' math plus the touched experts' weight traffic
    (model.grouped_gemm_efficiency's mechanism), not only the larger of the two as a dense GEMM does."""
    spec, gpu = load_model("deepseek-v3"), catalog.gpu("h200-sxm")
    stage = _stage(spec, InferencePlan(tp=8, batch=1, prompt_tokens=2048, output_tokens=8, weights="fp8"), gpu)
    with_experts = _stage_work(stage, tokens, tokens, 0.0, 0.0, 0.0, False)
    without = _stage_work(replace(stage, experts=0), tokens, tokens, 0.0, 0.0, 0.0, False)
    delta = sum(with_experts.values()) - sum(without.values())
    math_s = stage.moe_layers * 2.0 * tokens * stage.top_k * stage.expert_share_params / stage.expert_gemm_rate
    weights_s = (stage.moe_layers * touched_experts(stage.experts, stage.top_k, tokens) * stage.expert_share_params
                 * stage.weight_bytes / stage.hbm_rate)
    assert delta >= (math_s + weights_s) * (1 - 1e-9)  # the most loaded expert carries at least the mean
    if min(math_s, weights_s) > 0.2 * max(math_s, weights_s):  # comparable: the sum shows
        assert delta > max(math_s, weights_s) * 1.15


def test_sm80_moe_kernels_slow_only_the_expert_math_on_hopper(catalog: Catalog) -> None:
    """TensorRT-LLM before 0.10 ran MoE GEMMs on Ampere kernels at 16 bits: on Hopper a compute-bound MoE prefill
    slows, weight streaming (decode at batch 1) barely, and an A100 (native SM80, BF16) is unchanged."""
    spec = load_model("mixtral-8x7b")
    h100 = _cluster(catalog, "dgx-h100")
    base = InferencePlan(tp=2, batch=64, prompt_tokens=2048, output_tokens=8, weights="fp8")
    legacy = InferencePlan(tp=2, batch=64, prompt_tokens=2048, output_tokens=8, weights="fp8", moe_sm80_kernels=True)
    fast, slow = predict_inference(spec, h100, base), predict_inference(spec, h100, legacy)
    assert slow.ttft_s > 1.5 * fast.ttft_s
    assert slow.memory.weights_bytes == fast.memory.weights_bytes  # the weights keep their 1-byte format
    one, one_legacy = (predict_inference(spec, h100, InferencePlan(tp=2, batch=1, prompt_tokens=16, output_tokens=64,
                                                                   weights="fp8", moe_sm80_kernels=flag))
                       for flag in (False, True))
    assert one_legacy.tpot_s == pytest.approx(one.tpot_s, rel=0.01)  # its math is a sliver beside the weights
    a100 = _cluster(catalog, "dgx-a100")
    bf16 = InferencePlan(tp=2, batch=64, prompt_tokens=2048, output_tokens=8)
    assert predict_inference(spec, a100, InferencePlan(tp=2, batch=64, prompt_tokens=2048, output_tokens=8,
                                                       moe_sm80_kernels=True)).ttft_s == pytest.approx(
        predict_inference(spec, a100, bf16).ttft_s, rel=1e-9)
    dense = load_model("llama3-8b")
    assert predict_inference(dense, h100, legacy).ttft_s == pytest.approx(predict_inference(dense, h100, base).ttft_s)


def test_bad_plans_are_one_line_errors(catalog: Catalog) -> None:
    spec = load_model("llama3-70b")
    cluster = _cluster(catalog, "dgx-h100")
    with pytest.raises(SpecError, match="heads"):
        predict_inference(spec, cluster, InferencePlan(tp=3))
    with pytest.raises(SpecError, match="pp"):
        predict_inference(spec, cluster, InferencePlan(pp=3))
    with pytest.raises(SpecError, match="dense"):
        predict_inference(spec, cluster, InferencePlan(tp=2, ep=2))
    with pytest.raises(SpecError, match="unknown weight precision"):
        InferencePlan(weights="fp3")
    with pytest.raises(SpecError, match="context window"):
        InferencePlan(prompt_tokens=130000, output_tokens=4096, max_context=131072)
    with pytest.raises(SpecError, match="FP4"):
        predict_inference(spec, cluster, InferencePlan(weights="fp4"))
    with pytest.raises(SpecError, match="FP8"):
        predict_inference(spec, _cluster(catalog, "dgx-a100"), InferencePlan(tp=4, weights="fp8"))


@pytest.mark.parametrize("fixed", [False, True])
def test_step_cost_matches_the_prediction_and_is_cheap(catalog: Catalog, fixed: bool) -> None:
    spec = load_model("llama3-70b")
    cluster = _cluster(catalog, "dgx-h100")
    plan = InferencePlan(tp=4, batch=32, prompt_tokens=1024, output_tokens=256, weights="fp8",
                         fixed_gemm_tiles=fixed, fused_gate_up=not fixed)
    pred = predict_inference(spec, cluster, plan)
    cost = step_cost(spec, cluster, plan)
    ctx = plan.prompt_tokens + plan.output_tokens // 2
    decode = cost.step_s(0, 0.0, plan.batch, plan.batch * ctx)
    assert decode == pytest.approx(pred.tpot_s, rel=0.05)
    prefill = cost.step_s(plan.batch * plan.prompt_tokens, plan.batch * plan.prompt_tokens ** 2 / 2, 0, 0)
    assert prefill == pytest.approx(pred.ttft_s, rel=0.1)
    assert cost.step_s(0, 0.0, 0, 0) == 0.0
    assert cost.kv_capacity_tokens >= pred.max_batch * plan.context
    assert cost.kv_transfer_s(4096, same_node=True) < cost.kv_transfer_s(4096, same_node=False)
    assert cost.kv_transfer_s(8192, same_node=False) > cost.kv_transfer_s(4096, same_node=False)


def test_every_kernel_of_a_layer_pays_the_kernel_latency(catalog: Catalog) -> None:
    """A forward pass pays inference.kernel_latency per kernel: 9 a Llama GQA layer (10 with gate and up apart), 13 a
    Mixtral MoE layer, 20 a DeepSeek-V3 MoE layer and 13 its dense ones (inference.yaml layer_kernels)."""
    h100 = catalog.gpu("h100-sxm")
    llama = load_model("llama3-70b")
    assert _stage(llama, InferencePlan(tp=4, weights="fp8"), h100).kernels == 80 * 9
    assert _stage(llama, InferencePlan(tp=4, weights="fp8", fused_gate_up=False), h100).kernels == 80 * 10
    assert _stage(load_model("mixtral-8x7b"), InferencePlan(tp=2), h100).kernels == 32 * 13
    deepseek = load_model("deepseek-v3")
    assert _stage(deepseek, InferencePlan(dp=8, ep=8, batch=8, weights="fp8"), h100).kernels == 58 * 20 + 3 * 13
    plan = InferencePlan(tp=8, batch=1, prompt_tokens=128, output_tokens=16, weights="fp8")
    pred = predict_inference(llama, _cluster(catalog, "dgx-h100"), plan)
    assert pred.decode_step_s["other"] >= 80 * 9 * kernel_latency_s()


def test_cli_json_keys_and_inputs(runner: CliRunner) -> None:
    result = runner.invoke(app, ["infer", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "8", "--tp", "8",
                                 "--batch", "16", "--prompt", "2048", "--output", "256", "--weights", "fp8", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in ("ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
                "memory_per_gpu_bytes", "fits", "max_batch", "breakdown_s", "bottleneck", "inputs"):
        assert key in data
    assert data["inputs"]["tp"] == 8 and data["inputs"]["weights"] == "fp8" and data["inputs"]["batch"] == 16
    assert data["fits"] is True
    assert data["output_tokens_per_s"] == pytest.approx(16 * 256 / data["e2e_s"])


def test_cli_table_says_does_not_fit(runner: CliRunner) -> None:
    result = runner.invoke(app, ["infer", "--model", "llama3-405b", "--tp", "8", "--batch", "8"])
    assert result.exit_code == 0, result.output
    assert "does not fit: needs" in result.output and "short by" in result.output
    assert "--weights fp8" in result.output
    data = json.loads(runner.invoke(app, ["infer", "--model", "llama3-405b", "--tp", "8", "--json"]).output)
    assert data["fits"] is False


@pytest.mark.parametrize("args,text", [
    (["--prompt", "200000"], "context window"),
    (["--weights", "fp3"], "unknown weight precision"),
    (["--kv", "int8"], "unknown KV-cache precision"),
    (["--tp", "3"], "divisible by tp"),
    (["--gpus", "16", "--tp", "8"], "tp*pp*dp"),
])
def test_cli_bad_input_is_one_line_exit_2(runner: CliRunner, args: list[str], text: str) -> None:
    result = runner.invoke(app, ["infer", "--model", "llama3-70b", *args])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and text in lines[0]


def test_expert_load_peak_waits_for_the_most_loaded_rank() -> None:
    from fabricsim.inference.experts import expected_max_normal, expert_load_peak
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1.0 / math.sqrt(math.pi), rel=1e-4)  # closed form for n = 2
    assert expected_max_normal(8) == pytest.approx(1.4236, abs=1e-3)
    assert expert_load_peak(256, 8, 1, 1000) == 1.0  # no expert parallelism: every GPU holds a slice of each expert
    assert expert_load_peak(0, 0, 8, 1000) == 1.0
    few, many = expert_load_peak(256, 8, 8, 8), expert_load_peak(256, 8, 8, 1e6)
    assert few > many > 1.0  # the multinomial noise averages out; the routing skew stays
    assert expert_load_peak(256, 8, 32, 1e6) > many  # fewer experts a rank: a hotter most-loaded rank


@pytest.mark.parametrize("model", [*MODELS, "deepseek-v3"])
@pytest.mark.parametrize("fused", [True, False])
def test_dense_gemm_shapes_hold_the_common_weights(catalog: Catalog, model: str, fused: bool) -> None:
    spec = load_model(model)
    tp = 8 if spec.mla is not None else 4
    plan = InferencePlan(tp=tp, ep=tp if spec.moe is not None else 1, fused_gate_up=fused)
    st_ = _stage(spec, plan, catalog.gpu("h100-sxm"))
    assert sum(n * k * count for n, k, count in st_.dense_gemms) == pytest.approx(st_.common_params, rel=1e-9)


def test_gemm_waves_are_the_roofline_at_scale_and_slower_when_tiles_are_few() -> None:
    rows, cols = gemm_tile()
    rate, sms = 1e15, 132
    n, k = np.array([8192.0]), np.array([8192.0])
    roof = 2.0 * 65536 * n * k / rate
    waves = gemm_waves_s(65536, n, k, rate, sms)
    assert waves[0] == pytest.approx(roof[0], rel=0.02)  # 32768 tiles: 249 waves of 132, 0.3% idle
    small = gemm_waves_s(128, n, k, rate, sms)  # 64 tiles on 132 SMs: one wave, half the SMs idle
    assert small[0] == pytest.approx(2.0 * rows * cols * 8192 * sms / rate)
    assert small[0] > 2.0 * 2.0 * 128 * n[0] * k[0] / rate
    assert gemm_waves_s(128, n, k, rate, 0)[0] == pytest.approx(2.0 * 128 * n[0] * k[0] / rate)
    assert gemm_waves_s(0, n, k, rate, sms)[0] == 0.0
    many = gemm_waves_s(np.array([1.0, 128.0, 65536.0]), n, k, rate, sms)
    assert many.shape == (3, 1) and many[1, 0] == small[0] and many[2, 0] == waves[0]


def test_fixed_gemm_tiles_slow_a_short_prefill_not_a_long_one(catalog: Catalog) -> None:
    spec = load_model("llama3-70b")
    cluster = _cluster(catalog, "dgx-h100")

    def ttft(prompt: int, fixed: bool) -> float:
        plan = InferencePlan(tp=4, batch=1, prompt_tokens=prompt, output_tokens=1, weights="fp8",
                             fixed_gemm_tiles=fixed)
        return predict_inference(spec, cluster, plan).ttft_s

    assert ttft(128, True) > 1.15 * ttft(128, False)  # 128 rows: one wave of 128 x 128 tiles per GEMM
    assert ttft(8192, True) == pytest.approx(ttft(8192, False), rel=0.05)
    assert catalog.gpu("h100-sxm").sms is not None and catalog.gpu("mi300x").sms is None  # None: the roofline


# ---- speculative decoding (MTP drafts verified by the target) ----------------------------------------------------
SPEC_PLANS = (("llama3-70b", "dgx-h100", {"tp": 4, "weights": "fp8"}),
              ("mixtral-8x7b", "dgx-h100", {"tp": 4, "ep": 2}),
              ("deepseek-v3", "dgx-b200", {"tp": 8, "ep": 2, "weights": "fp4"}),
              ("deepseek-v3", "hgx-h200", {"dp": 8, "ep": 8, "weights": "fp8", "batch": 64}),
              ("llama3-70b", "dgx-h100", {"tp": 4, "pp": 2, "batch": 8, "weights": "fp8"}))


@pytest.mark.parametrize(("model", "system", "kw"), SPEC_PLANS)
def test_no_drafts_accepting_one_token_is_the_plain_model(catalog: Catalog, model: str, system: str,
                                                         kw: dict[str, object]) -> None:
    """d = 0 with acceptance length 1 prices exactly what the plan without speculative decoding does."""
    spec, cluster = load_model(model), _cluster(catalog, system)
    base = InferencePlan(prompt_tokens=1024, output_tokens=64, **kw)  # type: ignore[arg-type]
    same = replace(base, draft_tokens=0, acceptance_length=1.0)
    plain, spec0 = predict_inference(spec, cluster, base), predict_inference(spec, cluster, same)
    assert (spec0.ttft_s, spec0.tpot_s, spec0.e2e_s) == (plain.ttft_s, plain.tpot_s, plain.e2e_s)
    assert spec0.memory == plain.memory and not any(spec0.draft_step_s.values())
    c0, c1 = step_cost(spec, cluster, base), step_cost(spec, cluster, same)
    for args in ((0, 0.0, 16, 16 * 1100), (512, 512.0**2 / 2, 8, 8 * 900), (2048, 2048.0**2 / 2, 0, 0)):
        assert c1.step_s(*args) == c0.step_s(*args) == c0.iteration_s(*args)


@settings(max_examples=25, deadline=None)
@given(case=st.sampled_from(SPEC_PLANS), drafts=st.integers(1, 5), low=st.floats(0.0, 1.0), high=st.floats(0.0, 1.0),
       seqs=st.sampled_from([1, 8, 64]))
def test_more_accepted_tokens_are_never_slower_per_token(catalog: Catalog, case: tuple[str, str, dict[str, object]],
                                                         drafts: int, low: float, high: float, seqs: int) -> None:
    model, system, kw = case
    spec, cluster = load_model(model), _cluster(catalog, system)
    a_low, a_high = 1.0 + drafts * min(low, high), 1.0 + drafts * max(low, high)
    plans = [InferencePlan(prompt_tokens=1024, output_tokens=128, draft_tokens=drafts, acceptance_length=a,
                           **kw) for a in (a_low, a_high)]  # type: ignore[arg-type]
    slow, fast = (predict_inference(spec, cluster, p) for p in plans)
    assert fast.tpot_s <= slow.tpot_s and fast.e2e_s <= slow.e2e_s
    assert fast.decode_step_s == slow.decode_step_s  # the step is the same work; it only yields more tokens
    cost_slow, cost_fast = (step_cost(spec, cluster, p) for p in plans)
    for args in ((0, 0.0, seqs, seqs * 1100), (256, 256.0**2 / 2, seqs, seqs * 1100)):
        assert cost_fast.step_s(*args) <= cost_slow.step_s(*args)
    batches = np.array([1.0, 8.0, 64.0])
    assert np.all(cost_fast.step_s_many(0 * batches, 0 * batches, batches, batches * 1100)
                  <= cost_slow.step_s_many(0 * batches, 0 * batches, batches, batches * 1100))


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(("llama3-8b", "llama3-70b", "mixtral-8x7b", "deepseek-v3")),
       tp=st.sampled_from([4, 8]), drafts=st.integers(1, 7), batch=st.sampled_from([1, 2, 4]))
def test_decode_with_drafts_reads_the_weights_at_most_once_a_step(catalog: Catalog, model: str, tp: int,
                                                                  drafts: int, batch: int) -> None:
    """The target verifies 1 + d tokens a sequence in one pass: its HBM time never exceeds streaming every weight
    on the GPU once plus the batch's KV cache; for a dense model at small batch (weight-bound) it is the plain
    decode's plus only the drafts' own KV."""
    spec, cluster = load_model(model), _cluster(catalog, "dgx-h100")
    gpu = catalog.gpu(cluster.system.gpu)
    weights = "fp8"
    plain_plan = InferencePlan(tp=tp, ep=2 if spec.moe else 1, batch=batch, prompt_tokens=1024, output_tokens=64,
                               weights=weights)
    plan = replace(plain_plan, draft_tokens=drafts, acceptance_length=1.0 + drafts / 2)
    pred, plain = predict_inference(spec, cluster, plan), predict_inference(spec, cluster, plain_plan)
    verify = {k: pred.decode_step_s[k] - pred.draft_step_s[k] for k in pred.decode_step_s}
    rate = gpu.hbm_bytes_per_s * hbm_efficiency(gpu).value
    kv = batch * (plan.prompt_tokens + plan.output_tokens / 2.0 + drafts) * kv_bytes_per_token_gpu(spec, plain_plan)
    copies = 0.0  # MoE: the routed copies of each token's hidden state (k rows written and read, plus the token)
    if spec.moe is not None:
        moe_layers = spec.layers - spec.moe.dense_layers
        copies = moe_layers * 2.0 * batch * (1 + drafts) * (spec.moe.top_k + 1) * spec.hidden * 2
    assert verify["hbm"] <= (weight_bytes_per_gpu(spec, plain_plan, gpu) + kv + copies) / rate * (1 + 1e-9)
    if spec.moe is None:
        extra_kv = batch * drafts * kv_bytes_per_token_gpu(spec, plain_plan) / rate
        assert verify["hbm"] == pytest.approx(plain.decode_step_s["hbm"] + extra_kv, rel=1e-9)
    assert sum(pred.draft_step_s.values()) > 0


def test_speculative_step_cost_matches_the_prediction(catalog: Catalog) -> None:
    """The serving iteration with drafts (verify 1 + d a sequence, then d draft forwards) is the prediction's step,
    and a decode-only ``step_s`` is that iteration over the acceptance length."""
    spec, cluster = load_model("deepseek-v3"), _cluster(catalog, "dgx-b200")
    plan = InferencePlan(tp=8, ep=2, batch=4, prompt_tokens=1024, output_tokens=256, weights="fp4", draft_tokens=3,
                         acceptance_length=2.82)
    pred = predict_inference(spec, cluster, plan)
    cost = step_cost(spec, cluster, plan)
    kv = plan.batch * (plan.prompt_tokens + plan.output_tokens // 2)
    assert cost.iteration_s(0, 0.0, plan.batch, kv) == pytest.approx(sum(pred.decode_step_s.values()), rel=0.05)
    assert cost.step_s(0, 0.0, plan.batch, kv) == pytest.approx(cost.iteration_s(0, 0.0, plan.batch, kv) / 2.82)
    assert cost.step_s(0, 0.0, plan.batch, kv) == pytest.approx(pred.tpot_s, rel=0.05)
    prefill = (plan.batch * plan.prompt_tokens, plan.batch * plan.prompt_tokens ** 2 / 2, 0, 0)
    assert cost.step_s(*prefill) == pytest.approx(pred.ttft_s, rel=0.1)
    many = cost.step_s_many(np.array([0.0, 512.0]), np.array([0.0, 512.0**2 / 2]), np.array([4.0, 4.0]),
                            np.array([kv, kv]))
    assert many == pytest.approx([cost.step_s(0, 0.0, 4, kv), cost.step_s(512, 512.0**2 / 2, 4, kv)])
    mtp = weight_bytes_per_gpu(spec, plan, catalog.gpu("b200")) - weight_bytes_per_gpu(
        spec, replace(plan, draft_tokens=0, acceptance_length=1.0), catalog.gpu("b200"))
    assert mtp > 0  # the MTP module's layer is held on the GPU beside the model


@pytest.mark.parametrize(("args", "message"), [
    (["--draft-tokens", "3"], "--acceptance: speculative decoding needs"),
    (["--draft-tokens", "3", "--acceptance", "4.5"], "--acceptance: mean accepted tokens per step must lie in"),
    (["--draft-tokens", "-1", "--acceptance", "1"], "--draft-tokens: must be an integer >= 0"),
    (["--acceptance", "2"], "--acceptance: 2.0 tokens a step needs draft tokens"),
])
def test_infer_cli_speculative_errors_are_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["infer", "--model", "llama3-8b", "--batch", "1", *args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_infer_cli_speculative_json() -> None:
    result = CliRunner().invoke(app, ["infer", "--model", "deepseek-v3", "--system", "dgx-b200", "--tp", "8",
                                      "--ep", "2", "--weights", "fp4", "--batch", "1", "--draft-tokens", "2",
                                      "--acceptance", "2.2", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["plan"]["draft_tokens"] == 2 and data["plan"]["acceptance_length"] == 2.2
    assert data["tokens_per_step"] == 2.2 and sum(data["draft_step_s"].values()) > 0


@settings(max_examples=20, deadline=None)
@given(model=st.sampled_from(("deepseek-v3", "llama3-70b")), batch=st.sampled_from([1, 16, 256]),
       prompt=st.sampled_from([128, 2048]), out=st.sampled_from([None, "fp4", "bf16"]))
def test_bf16_attention_weights_are_never_faster_than_fp4_ones(catalog: Catalog, model: str, batch: int,
                                                                prompt: int, out: str | None) -> None:
    """Attention projections in BF16 (NVIDIA's NVFP4 DeepSeek checkpoints) stream 2 bytes a weight at the BF16 rate:
    never faster than the same projections in FP4, in the prediction and the step cost, and they hold more memory."""
    spec, cluster, gpu = load_model(model), _cluster(catalog, "dgx-b200"), catalog.gpu("b200")
    tp = 8
    fp4 = InferencePlan(tp=tp, batch=batch, prompt_tokens=prompt, output_tokens=64, weights="fp4")
    bf16 = replace(fp4, attention_weights="bf16", attention_out_weights=out)
    p4, p16 = predict_inference(spec, cluster, fp4), predict_inference(spec, cluster, bf16)
    assert p16.tpot_s >= p4.tpot_s * (1 - 1e-12)
    assert p16.ttft_s >= p4.ttft_s * (1 - 1e-12)
    assert weight_bytes_per_gpu(spec, bf16, gpu) > weight_bytes_per_gpu(spec, fp4, gpu)
    kv = batch * (prompt + 32)
    c4, c16 = step_cost(spec, cluster, fp4), step_cost(spec, cluster, bf16)
    assert c16.step_s(0, 0.0, batch, kv) >= c4.step_s(0, 0.0, batch, kv) * (1 - 1e-12)
    assert bf16.to_json()["attention_out_weights"] == (out or "bf16")


def test_attention_formats_default_to_the_weights(catalog: Catalog) -> None:
    """Unset attention formats are the plan's weights: predictions equal the plain plan's exactly."""
    spec, cluster = load_model("deepseek-v3"), _cluster(catalog, "dgx-b200")
    plan = InferencePlan(tp=8, ep=2, batch=8, prompt_tokens=512, output_tokens=64, weights="fp4")
    same = replace(plan, attention_weights="fp4", attention_out_weights="fp4")
    assert predict_inference(spec, cluster, same).tpot_s == predict_inference(spec, cluster, plan).tpot_s
    with pytest.raises(SpecError, match="attention-weights"):
        InferencePlan(attention_weights="fp3")
    with pytest.raises(SpecError, match="FP4"):
        predict_inference(spec, _cluster(catalog, "dgx-h100"), replace(plan, weights="fp8", attention_weights="fp4"))


@settings(max_examples=20, deadline=None)
@given(batch=st.sampled_from([1, 64, 1024]), prompt=st.sampled_from([1024, 8192]),
       system=st.sampled_from(["hgx-h200", "dgx-b200"]), weights=st.sampled_from(["fp8", "fp4"]))
def test_fp8_mla_decode_is_never_slower_and_only_moves_fp8_mla_decode(catalog: Catalog, batch: int, prompt: int,
                                                                       system: str, weights: str) -> None:
    """FP8 MLA generation (TensorRT-LLM with an FP8 KV cache) runs decode attention at the FP8 rate: never slower,
    prefill unchanged, and no effect with a BF16 cache or on GQA attention; the step cost agrees."""
    cluster = _cluster(catalog, system)
    if weights == "fp4" and catalog.gpu(cluster.system.gpu).fp4_flops_per_s is None:
        weights = "fp8"
    spec = load_model("deepseek-v3")
    plan = InferencePlan(dp=8, ep=8, batch=8 * batch, prompt_tokens=prompt, output_tokens=256, weights=weights,
                         kv="fp8")
    fast = replace(plan, fp8_mla_decode=True)
    p0, p1 = predict_inference(spec, cluster, plan), predict_inference(spec, cluster, fast)
    assert p1.tpot_s <= p0.tpot_s
    assert p1.ttft_s == pytest.approx(p0.ttft_s, rel=1e-12)
    kv = plan.batch * (prompt + 128)
    assert step_cost(spec, cluster, fast).step_s(0, 0.0, plan.batch, kv) <= step_cost(spec, cluster, plan).step_s(
        0, 0.0, plan.batch, kv)
    for other_spec, other in ((spec, replace(plan, kv="bf16")),
                              (load_model("llama3-70b"), InferencePlan(tp=8, batch=batch, prompt_tokens=prompt,
                                                                       output_tokens=256, weights="fp8", kv="fp8"))):
        a = predict_inference(other_spec, cluster, other).tpot_s
        assert predict_inference(other_spec, cluster, replace(other, fp8_mla_decode=True)).tpot_s == a


def test_mixed_precision_step_cost_matches_the_prediction(catalog: Catalog) -> None:
    """With BF16 attention beside FP4 weights (wo in FP4) and FP8 MLA decode, the serving step cost is still the
    prediction's decode step and prefill."""
    spec, cluster = load_model("deepseek-v3"), _cluster(catalog, "dgx-b200")
    plan = InferencePlan(dp=4, ep=4, batch=256, prompt_tokens=1024, output_tokens=256, weights="fp4", kv="fp8",
                         attention_weights="bf16", attention_out_weights="fp4", fp8_mla_decode=True)
    pred = predict_inference(spec, cluster, plan)
    cost = step_cost(spec, cluster, plan)
    kv = plan.batch * (plan.prompt_tokens + plan.output_tokens // 2)
    assert cost.step_s(0, 0.0, plan.batch, kv) == pytest.approx(pred.tpot_s, rel=0.05)
    prefill = (plan.batch * plan.prompt_tokens, plan.batch * plan.prompt_tokens ** 2 / 2, 0, 0)
    assert cost.step_s(*prefill) == pytest.approx(pred.ttft_s, rel=0.1)


def test_fp4_gemm_rate_uses_the_gpus_own_fp4_efficiency(catalog: Catalog) -> None:
    """FP4 weight GEMMs run at the FP4 peak x the GPU's measured FP4 fraction, not its FP8 one, where it has one."""
    b200 = catalog.gpu("b200")
    assert b200.fp4_matmul_efficiency is not None and b200.fp4_flops_per_s is not None
    assert fp4_matmul_efficiency(b200).value != fp8_matmul_efficiency(b200).value
    rate, precision = _gemm_rate(b200, "fp4")
    assert precision == "fp4"
    assert rate == pytest.approx(b200.fp4_flops_per_s * b200.fp4_matmul_efficiency.value)
    bare = b200.model_copy(update={"fp4_matmul_efficiency": None})
    assert fp4_matmul_efficiency(bare).value == fp8_matmul_efficiency(bare).value
