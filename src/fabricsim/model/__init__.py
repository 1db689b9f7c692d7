"""What a model is: the spec schema and presets, parameter counts, the FLOPs of its layers, number formats and KV
bytes per token, and the compute roofline of a GEMM on a GPU. Nothing here knows about parallel plans.
"""

from fabricsim.model.compute import (
    achievable_flops_per_s,
    attention_flops_per_s,
    compute_time,
    default_matmul_efficiency,
    flops_utilization,
    fp4_matmul_efficiency,
    fp8_matmul_efficiency,
    gemm_flops_per_s,
    gemm_k_overhead,
    gemm_tile,
    grouped_gemm_efficiency,
    hbm_efficiency,
    hbm_time,
    k_efficiency,
    kernel_gap_s,
    matmul_efficiency,
    sm80_kernel_fraction,
)
from fabricsim.model.flops import ForwardFlops, forward_flops, layer_linear_params, megatron_step_flops
from fabricsim.model.formats import (
    KV_BYTES,
    WEIGHT_BYTES,
    kv_bytes_per_token_layer,
    kv_bytes_per_token_model,
    kv_heads_per_gpu,
)
from fabricsim.model.presets import Preset, list_presets, load_model, load_model_file, preset
from fabricsim.model.spec import MLASpec, ModelSpec, MoESpec, ParameterCount

__all__ = [
    "KV_BYTES",
    "WEIGHT_BYTES",
    "ForwardFlops",
    "MLASpec",
    "MoESpec",
    "ModelSpec",
    "ParameterCount",
    "Preset",
    "achievable_flops_per_s",
    "attention_flops_per_s",
    "compute_time",
    "default_matmul_efficiency",
    "flops_utilization",
    "forward_flops",
    "fp4_matmul_efficiency",
    "fp8_matmul_efficiency",
    "gemm_flops_per_s",
    "gemm_k_overhead",
    "gemm_tile",
    "grouped_gemm_efficiency",
    "hbm_efficiency",
    "hbm_time",
    "k_efficiency",
    "kernel_gap_s",
    "kv_bytes_per_token_layer",
    "kv_bytes_per_token_model",
    "kv_heads_per_gpu",
    "layer_linear_params",
    "list_presets",
    "load_model",
    "load_model_file",
    "matmul_efficiency",
    "megatron_step_flops",
    "preset",
    "sm80_kernel_fraction",
]
