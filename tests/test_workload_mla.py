"""Explicit head_dim (Qwen3) and Multi-head Latent Attention (DeepSeek-V2/V3) in the model spec: parameter counts,
KV cache per token, attention FLOPs and GEMM shapes, and the inference cases that name them."""

from __future__ import annotations

from typing import Any

import pytest

from fabricsim.errors import SpecError
from fabricsim.model.flops import forward_flops
from fabricsim.model.formats import kv_bytes_per_token_layer, kv_bytes_per_token_model
from fabricsim.model.spec import ModelSpec
from fabricsim.training.flops import layer_gemm_shapes
from fabricsim.training.plan import ParallelPlan
from fabricsim.validation.inference_cases import case_model

MLA = {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
DSV3: dict[str, Any] = {"name": "dsv3", "layers": 61, "hidden": 7168, "heads": 128, "ffn_hidden": 18432,
                        "gated_mlp": True, "vocab": 129280, "mla": MLA,
                        "moe": {"experts": 256, "top_k": 8, "ffn_hidden": 2048, "shared_experts": 1,
                                "dense_layers": 3}}
QWEN3: dict[str, Any] = {"name": "qwen3-235b", "layers": 94, "hidden": 4096, "heads": 64, "kv_heads": 4,
                         "head_dim": 128, "gated_mlp": True, "vocab": 151936,
                         "moe": {"experts": 128, "top_k": 8, "ffn_hidden": 1536}}


def test_head_dim_defaults_to_hidden_over_heads() -> None:
    m = ModelSpec.from_data({"name": "x", "layers": 2, "hidden": 4096, "heads": 32, "kv_heads": 8, "vocab": 100})
    assert m.head_dim == 128 and m.q_dim == 4096 and m.kv_dim == 1024
    assert m.attention_params() == 2 * 4096 * 4096 + 2 * 4096 * 1024


def test_hidden_not_divisible_by_heads_needs_head_dim() -> None:
    with pytest.raises(SpecError, match="head_dim"):
        ModelSpec.from_data({"name": "x", "layers": 2, "hidden": 100, "heads": 3, "vocab": 10})


def test_qwen3_235b_parameters_with_explicit_head_dim() -> None:
    m = ModelSpec.from_data(QWEN3)
    assert m.q_dim == 8192 and m.kv_dim == 512  # 64 x 128 != hidden 4096
    p = m.parameters()
    assert p.total == pytest.approx(235e9, rel=0.01)  # Qwen3-235B-A22B model card
    assert p.active == pytest.approx(22e9, rel=0.02)
    assert kv_bytes_per_token_layer(m, 4, "bf16") == 2 * 1 * 128 * 2.0


def test_deepseek_v3_mla_parameters_and_kv_cache() -> None:
    m = ModelSpec.from_data(DSV3)
    assert m.kv_heads == m.heads and m.qk_head_dim == 192 and m.v_head_dim == 128
    # q_a 7168x1536 + q_b 1536x128x192 + kv_a 7168x576 + kv_b 512x128x256 + o 16384x7168 + two latent norms
    expected = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168 + 1536 + 512
    assert m.attention_params() == expected
    assert m.parameters().total == pytest.approx(671e9, rel=0.005)
    assert m.parameters().active == pytest.approx(37e9, rel=0.02)
    # the latent is cached whole on every TP rank (DeepSeek-V2 section 2.1.2: 4.5 d_h = 576 per token and layer)
    assert kv_bytes_per_token_layer(m, 1, "fp8") == kv_bytes_per_token_layer(m, 8, "fp8") == 576.0
    assert kv_bytes_per_token_model(m, "bf16") == 61 * 576 * 2.0


def test_mla_attention_flops_prefill_and_absorbed_decode() -> None:
    m = ModelSpec.from_data(DSV3)
    assert m.attention_flops_per_pair() == 2 * 128 * (192 + 128)
    assert m.attention_flops_per_pair(absorbed=True) == 2 * 128 * (512 + 64 + 512)
    assert forward_flops(m, 1, 16, lm_head=False).attention == 16 * 16 * 2 * 128 * 320 * 61


def test_mla_gemm_shapes_add_up_to_the_linear_flops() -> None:
    m = ModelSpec.from_data(DSV3)
    plan = ParallelPlan(tp=8, dp=1, gbs=8, mbs=1, seq=256)
    tokens = 256
    for index in (0, 10):  # a dense and an MoE layer
        per_gpu = sum(f for f, _, _, _ in layer_gemm_shapes(m, plan, index))
        down = m.mla_down_params() - 1536 - 512  # norms are not GEMMs
        replicated = 2 * tokens * down * (1 - 1 / 8)  # each of the 8 ranks runs the whole down-projection
        linear = forward_flops(m, 1, tokens, layers=[index], lm_head=False).linear - 2 * tokens * (
            m.router_params() if m.is_moe_layer(index) else 0) - 2 * tokens * (1536 + 512)
        assert per_gpu == pytest.approx(linear / 8 + replicated)


def test_inference_case_model_reads_mla_and_head_dim() -> None:
    ds = case_model({"name": "DeepSeek-R1", "layers": 61, "hidden": 7168, "heads": 128,
                     "kv_heads": "MLA (kv_lora_rank 512 + rope 64 per token, shared across heads)",
                     "ffn_hidden": 18432, "gated_mlp": True, "vocab": 129280,
                     "moe": {"dense_layers": 3, "routed_experts": 256, "shared_experts": 1, "top_k": 8,
                             "expert_ffn_hidden": 2048,
                             "attention": "MLA: q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, "
                                          "qk_rope_head_dim 64, v_head_dim 128"}})
    assert ds.mla is not None and ds.mla.q_lora_rank == 1536 and ds.kv_cache_elements() == 576
    qwen = case_model({"name": "Qwen3", "layers": 94, "hidden": 4096, "heads": 64, "kv_heads": 4,
                       "gated_mlp": True, "vocab": 151936,
                       "moe": {"experts": 128, "top_k": 8, "expert_ffn_hidden": 1536, "head_dim": 128}})
    assert qwen.head_dim == 128
