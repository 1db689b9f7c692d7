"""Inference number formats and the KV cache: bytes per weight and per cached element, and the KV bytes one token
takes on one GPU under tensor and pipeline parallelism (the quantity that bounds batch and context)."""

from __future__ import annotations

from fabricsim.model.spec import ModelSpec

# Bytes per stored weight of each weight format. Block scales are counted: INT4 (AWQ/GPTQ W4A16) keeps one FP16
# scale per group of 128 weights (2 / 128 bytes); NVFP4 one FP8 (E4M3) scale per block of 16 (1 / 16 bytes)
# (NVIDIA, "Introducing NVFP4", developer blog 2025). FP8 per-tensor scales are negligible.
WEIGHT_BYTES: dict[str, float] = {"bf16": 2.0, "fp8": 1.0, "int4": 0.5 + 2.0 / 128, "fp4": 0.5 + 1.0 / 16}
KV_BYTES: dict[str, float] = {"bf16": 2.0, "fp8": 1.0}


def kv_heads_per_gpu(model: ModelSpec, tp: int) -> int:
    """KV heads one TP rank holds: kv_heads / tp, or 1 when tp > kv_heads (each head replicated tp / kv_heads x)."""
    return max(1, model.kv_heads // tp)


def kv_bytes_per_token_layer(model: ModelSpec, tp: int, kv: str) -> float:
    """K and V of one token in one layer on one TP rank: 2 x kv heads per GPU x head_dim x bytes; MLA: the whole
    kv_lora_rank + qk_rope_head_dim latent on every TP rank (each rank's heads all read it; only attention data
    parallelism, dp, splits the sequences)."""
    if model.mla is not None:
        return model.kv_cache_elements() * KV_BYTES[kv]
    return 2.0 * kv_heads_per_gpu(model, tp) * model.head_dim * KV_BYTES[kv]


def kv_bytes_per_token(model: ModelSpec, tp: int, pp: int, kv: str) -> float:
    """KV bytes of one token on one GPU: 2 x (layers / pp) x kv heads per GPU x head_dim x bytes; equals
    2 x layers x kv_heads x head_dim x bytes / (min(tp, kv_heads) x pp) (the closed form) when pp divides layers."""
    return model.layers / pp * kv_bytes_per_token_layer(model, tp, kv)


def kv_bytes_per_token_model(model: ModelSpec, kv: str) -> float:
    """KV bytes of one token of the whole model (every layer, every KV head or MLA latent): what a disaggregated
    hand-off moves."""
    return float(model.layers * model.kv_cache_elements()) * KV_BYTES[kv]
