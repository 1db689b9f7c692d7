"""Memory: Korthikanti et al.'s activation formulas, ZeRO sharding, stage placement, and monotonicity."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.catalog import Catalog
from fabricsim.model.presets import load_model
from fabricsim.model.spec import ModelSpec
from fabricsim.training.memory import (
    layer_activation_bytes,
    memory_report,
    stage_activation_bytes,
    stage_memory,
    stage_params,
)
from fabricsim.training.plan import ParallelPlan

GIB = 2**30


def plan(**kw: Any) -> ParallelPlan:
    base: dict[str, Any] = {"dp": 1, "seq": 2048, "gbs": 64, "flash_attention": False}  # Korthikanti: unfused
    base.update(kw)
    return ParallelPlan.build(**base)


# ---- Korthikanti et al. 2022, Table 2 (GPT: multi-head attention, ungated 4h MLP) -------------------------
GPT = load_model("gpt-39.1b")  # a = 64, h = 8192
S, B, H, A = 2048, 1, 8192, 64
SBH = S * B * H


def test_no_parallelism_is_sbh_34_plus_5as_over_h() -> None:
    assert layer_activation_bytes(GPT, plan(), 0) == pytest.approx(SBH * (34 + 5 * A * S / H))


def test_tensor_plus_sequence_parallel_divides_everything_by_t() -> None:
    t = 8
    got = layer_activation_bytes(GPT, plan(tp=t), 0)
    assert got == pytest.approx(SBH / t * (34 + 5 * A * S / H))


def test_tensor_parallel_alone_keeps_10_sbh_replicated() -> None:
    t = 8
    got = layer_activation_bytes(GPT, plan(tp=t, sequence_parallel=False), 0)
    assert got == pytest.approx(SBH * (10 + 24 / t + 5 * A * S / (H * t)))


def test_selective_and_full_recompute() -> None:
    t = 8
    assert layer_activation_bytes(GPT, plan(tp=t, recompute="selective"), 0) == pytest.approx(34 * SBH / t)
    no_sp = plan(tp=t, recompute="selective", sequence_parallel=False)
    assert layer_activation_bytes(GPT, no_sp, 0) == pytest.approx(SBH * (10 + 24 / t))
    assert layer_activation_bytes(GPT, plan(recompute="full"), 0) == pytest.approx(2 * SBH)
    assert layer_activation_bytes(GPT, plan(tp=t, recompute="full"), 0) == pytest.approx(2 * SBH / t)


def test_context_parallel_splits_the_sequence() -> None:
    one = layer_activation_bytes(GPT, plan(tp=8, recompute="selective"), 0)
    two = layer_activation_bytes(GPT, plan(tp=8, cp=2, recompute="selective"), 0)
    assert two == pytest.approx(one / 2)


def test_first_1f1b_stage_holds_pp_microbatches_of_its_layers() -> None:
    p = plan(tp=8, pp=4, gbs=64, recompute="selective")
    per_layer = 34 * SBH / 8
    extras = SBH / 8  # embedding dropout mask
    assert stage_activation_bytes(GPT, p, 0) == pytest.approx((12 * per_layer + extras) * 4)


def test_interleaving_adds_korthikanti_factor_on_stage_0() -> None:
    base = plan(tp=8, pp=4, gbs=64, recompute="selective")
    inter = plan(tp=8, pp=4, virtual_stages=2, gbs=64, recompute="selective")
    ratio = stage_activation_bytes(GPT, inter, 0) / stage_activation_bytes(GPT, base, 0)
    assert ratio == pytest.approx(1 + 3 / (4 * 2))


# ---- model state -------------------------------------------------------------------------------------------
def test_single_gpu_model_state_is_18_bytes_per_parameter() -> None:
    """Megatron-LM docs/source/distrib_optimizer.md: bf16 params with fp32 grads, 18 bytes/param undistributed,
    6 + 12/d with the distributed optimizer; bf16 grads (NeMo's FP8 recipes) 16 and 4 + 12/d."""
    m = load_model("gpt-1.7b")
    n = m.parameters().total
    assert memory_report(m, plan(), 80 * GIB).model_state_bytes == pytest.approx(18 * n)
    assert memory_report(m, plan(grad_dtype="bf16"), 80 * GIB).model_state_bytes == pytest.approx(16 * n)
    assert memory_report(m, plan(dp=8, zero=1), 80 * GIB).model_state_bytes == pytest.approx((6 + 12 / 8) * n)
    assert memory_report(m, plan(), 80 * GIB).weights_bytes == pytest.approx(2 * n)


def test_zero_stages_shard_optimizer_then_grads_then_weights() -> None:
    m = load_model("gpt-1.7b")
    dp = 8
    r = [memory_report(m, plan(dp=dp, zero=z), 80 * GIB) for z in range(4)]
    n = m.parameters().total
    assert r[1].optimizer_bytes == pytest.approx(12 * n / dp)
    assert r[1].gradients_bytes == r[0].gradients_bytes
    assert r[2].gradients_bytes == pytest.approx(4 * n / dp)
    assert r[3].weights_bytes < r[2].weights_bytes
    assert r[3].weights_bytes > 2 * n / dp  # keeps gathered layers


def test_experts_sharded_by_ep() -> None:
    m = load_model("mixtral-8x7b")
    one, eight = stage_params(m, plan(dp=8), 0), stage_params(m, plan(dp=8, ep=8), 0)
    assert eight.expert == pytest.approx(one.expert / 8)
    assert eight.dense == one.dense
    assert one.expert == pytest.approx(m.parameters().routed_experts)


def test_embedding_first_stage_lm_head_last_stage() -> None:
    m = load_model("llama3-8b")  # untied
    p = plan(pp=4)
    params = [stage_params(m, p, s) for s in range(4)]
    emb = m.vocab * m.hidden
    assert params[0].dense - params[1].dense == pytest.approx(emb)
    assert params[3].dense - params[1].dense == pytest.approx(emb + m.hidden)
    tied = load_model("gpt-7.5b")
    assert stage_params(tied, plan(), 0).dense == pytest.approx(tied.parameters().total)


def test_report_fits_and_shortfall(catalog: Catalog) -> None:
    h100 = catalog.gpu("h100-sxm")
    m = load_model("llama3-70b")
    ok = memory_report(m, ParallelPlan.build(tp=8, pp=4, dp=32, seq=8192, gbs=1024, zero=1,
                                             recompute="selective"), h100)
    assert ok.fits and ok.shortfall_bytes == 0 and ok.summary().startswith("fits: needs")
    assert ok.capacity_bytes == 80 * GIB and len(ok.stage_totals_bytes) == 4
    bad = memory_report(m, ParallelPlan.build(dp=8, seq=8192, gbs=64), h100)
    assert not bad.fits
    assert bad.shortfall_bytes == pytest.approx(bad.total_bytes - 80 * GIB)
    assert bad.summary().startswith(f"does not fit: needs {bad.total_bytes / GIB:.1f} GiB, has 80.0 GiB (short by")


# ---- monotonicity (hypothesis) --------------------------------------------------------------------------------
MODELS = [load_model(n) for n in ("gpt-1.7b", "llama3-8b", "mixtral-8x7b", "gpt-7.5b")]
models = st.sampled_from(MODELS)


@settings(max_examples=80, deadline=None)
@given(model=models, tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]),
       dp=st.sampled_from([1, 2, 8]), recompute=st.sampled_from(["none", "selective", "full"]))
def test_higher_zero_stage_never_increases_memory(model: ModelSpec, tp: int, pp: int, dp: int, recompute: str) -> None:
    totals = []
    for z in range(4):
        p = ParallelPlan.build(tp=tp, pp=pp, dp=dp, seq=2048, gbs=8 * dp, zero=z, recompute=recompute)
        r = memory_report(model, p, 80 * GIB)
        totals.append((r.weights_bytes, r.gradients_bytes, r.optimizer_bytes, r.total_bytes))
    for lower, higher in itertools.pairwise(totals):
        assert all(h <= lo * (1 + 1e-12) for h, lo in zip(higher, lower, strict=True))


@settings(max_examples=80, deadline=None)
@given(model=models, tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 3, 4]),
       zero=st.integers(0, 3), ep=st.sampled_from([1, 2]))
def test_more_tp_or_pp_never_increases_weights(model: ModelSpec, tp: int, pp: int, zero: int, ep: int) -> None:
    ep = ep if model.moe is not None else 1

    def weights(t: int, p: int) -> float:
        plan_ = ParallelPlan.build(tp=t, pp=p, dp=2, ep=ep, seq=2048, gbs=16, zero=zero)
        return memory_report(model, plan_, 80 * GIB).weights_bytes

    base = weights(tp, pp)
    assert weights(2 * tp, pp) <= base * (1 + 1e-12)
    assert weights(tp, pp + 1) <= base * (1 + 1e-12)


@settings(max_examples=80, deadline=None)
@given(model=models, tp=st.sampled_from([1, 2, 4, 8, 16]), pp=st.sampled_from([1, 2, 4]),
       cp=st.sampled_from([1, 2]), sp=st.booleans(), mbs=st.sampled_from([1, 2]), v=st.sampled_from([1, 2]))
def test_recompute_full_le_selective_le_none(model: ModelSpec, tp: int, pp: int, cp: int, sp: bool, mbs: int,
                                             v: int) -> None:
    v = v if pp > 1 else 1
    acts = []
    for recompute in ("full", "selective", "none"):
        p = ParallelPlan.build(tp=tp, pp=pp, cp=cp, dp=1, mbs=mbs, seq=4096, gbs=8 * mbs, virtual_stages=v,
                               sequence_parallel=sp, recompute=recompute)
        acts.append([stage_memory(model, p, s, 80 * GIB).activations_bytes for s in range(pp)])
    for stage in range(pp):
        assert acts[0][stage] <= acts[1][stage] <= acts[2][stage]


def test_kv_heads_replicated_when_tp_exceeds_them() -> None:
    m = load_model("llama3-70b")  # 8 KV heads of 128
    h, kv = m.hidden, m.kv_dim
    assert m.attention_params_per_rank(8) == pytest.approx(2 * h * h / 8 + 2 * h * kv / 8)
    assert m.attention_params_per_rank(16) == pytest.approx(2 * h * h / 16 + 2 * h * kv / 8)
    p8 = stage_params(m, plan(tp=8, seq=8192), 0)
    p16 = stage_params(m, plan(tp=16, seq=8192), 0)
    assert p16.dense < p8.dense
