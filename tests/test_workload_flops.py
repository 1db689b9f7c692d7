"""FLOPs: Megatron's closed form, recompute variants, MoE active work, and per-stage shares adding up."""

from __future__ import annotations

from typing import Any

import pytest

from fabricsim.model.flops import forward_flops, megatron_step_flops
from fabricsim.model.presets import load_model
from fabricsim.training.flops import stage_microbatch_flops, step_flops
from fabricsim.training.plan import ParallelPlan

MEGATRON_GPT = ["gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18.4b", "gpt-39.1b", "gpt-76.1b", "gpt-145.6b",
                "gpt-310.1b", "gpt-529.6b", "gpt-1t"]


def plan(**kw: Any) -> ParallelPlan:
    base: dict[str, Any] = {"dp": 1, "seq": 2048, "gbs": 512, "recompute": "full"}
    base.update(kw)
    return ParallelPlan.build(**base)


@pytest.mark.parametrize("name", MEGATRON_GPT)
@pytest.mark.parametrize(("gbs", "seq"), [(512, 2048), (64, 4096), (1536, 1024)])
def test_full_recompute_matches_megatron_closed_form(name: str, gbs: int, seq: int) -> None:
    m = load_model(name)
    flops = step_flops(m, plan(gbs=gbs, seq=seq)).hardware_flops
    closed = megatron_step_flops(gbs, seq, m.layers, m.hidden, m.vocab)
    assert flops == pytest.approx(closed, rel=0.02)


def test_model_flops_are_three_forwards_and_recompute_adds_one() -> None:
    m = load_model("gpt-7.5b")
    none = step_flops(m, plan(recompute="none"))
    full = step_flops(m, plan(recompute="full"))
    sel = step_flops(m, plan(recompute="selective"))
    fwd = forward_flops(m, 512, 2048)
    assert none.model_flops == pytest.approx(3 * fwd.total)
    assert none.hardware_flops == none.model_flops
    assert full.model_flops == none.model_flops
    assert full.recompute == pytest.approx(fwd.layers)  # the LM head is not recomputed
    assert sel.recompute == pytest.approx(fwd.attention)
    assert none.hardware_flops < sel.hardware_flops < full.hardware_flops


def test_attention_term_and_causal_halving() -> None:
    m = load_model("gpt-7.5b")
    full = forward_flops(m, 1, 2048)
    causal = forward_flops(m, 1, 2048, causal=True)
    assert full.attention == pytest.approx(4 * 2048**2 * 4096 * 36)
    assert causal.attention == pytest.approx(full.attention / 2)
    assert causal.linear == full.linear


def test_dense_linear_flops_are_2_params_per_token() -> None:
    m = load_model("llama3-70b")
    p = m.parameters()
    fwd = forward_flops(m, 1, 4096)
    non_embedding_matrices = p.attention + p.dense_mlp
    assert fwd.linear == pytest.approx(2 * 4096 * non_embedding_matrices)
    assert fwd.lm_head == pytest.approx(2 * 4096 * m.vocab * m.hidden)


def test_moe_forward_uses_active_experts_only() -> None:
    m = load_model("mixtral-8x7b")
    p = m.parameters()
    fwd = forward_flops(m, 1, 4096)
    active_matrices = p.active - p.embedding - p.lm_head - p.norms
    assert fwd.linear == pytest.approx(2 * 4096 * active_matrices)
    dense_like = forward_flops(load_model("llama3-8b"), 1, 4096)  # same attention, one 14336 MLP per layer
    assert fwd.linear > dense_like.linear


@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("gpt-39.1b", {"tp": 8, "pp": 2, "dp": 4, "gbs": 64}),
        ("llama3-405b", {"tp": 8, "pp": 16, "dp": 2, "cp": 2, "gbs": 64, "seq": 8192}),
        ("gpt-1.7b", {"pp": 4, "virtual_stages": 3, "dp": 2, "gbs": 16, "recompute": "selective"}),
        ("deepseek-v3", {"tp": 2, "pp": 4, "dp": 8, "ep": 8, "gbs": 64, "seq": 4096}),
    ],
)
def test_stage_shares_add_up_to_the_step(name: str, kw: dict[str, Any]) -> None:
    m = load_model(name)
    p = plan(**kw)
    total = step_flops(m, p)
    per_gpu = [stage_microbatch_flops(m, p, s) for s in range(p.pp)]
    gpus_per_stage = p.tp * p.cp * p.dp
    summed = sum(f.hardware_flops for f in per_gpu) * p.microbatches * gpus_per_stage
    assert summed == pytest.approx(total.hardware_flops)
    assert per_gpu[-1].forward > 0


def test_lm_head_only_on_last_stage() -> None:
    m = load_model("gpt-7.5b")  # 36 layers
    p = plan(pp=4, gbs=8)
    first, last = stage_microbatch_flops(m, p, 0), stage_microbatch_flops(m, p, 3)
    head = 2 * 2048 * m.vocab * m.hidden
    assert last.forward - first.forward == pytest.approx(head)


def test_kv_replication_adds_hardware_work_per_gpu() -> None:
    m = load_model("llama3-70b")  # 8 KV heads
    p16 = plan(tp=16, seq=8192, gbs=4, recompute="none")
    even = step_flops(m, p16).hardware_flops / (16 * p16.microbatches)
    per_gpu = stage_microbatch_flops(m, p16, 0).hardware_flops
    kv = 3 * 2.0 * 8192 * 2 * m.hidden * m.kv_dim * m.layers / 16  # fwd + bwd of one extra K,V copy
    assert per_gpu == pytest.approx(even + kv)
