"""HBM traffic of the memory-bound work of a step: element-wise ops of each layer and the optimizer update.

Per layer and micro-batch, forward, one GPU (bf16 = 2 bytes per element; T tokens of width h):
- norms: read + write T*h twice (input norm, post-attention norm): 8 T h bytes;
- fused bias-dropout-add after attention and after the MLP: read input and residual, write output, 1-byte
  mask: 7 T h bytes each, 14 T h;
- MLP activation on the f-wide tensor: read + write (GeLU, 4 f T bytes), or read two and write one (SwiGLU,
  6 f T bytes); for MoE f is the active expert width times top_k (+ shared experts);
- attention scores when the kernel materialises them (no FlashAttention): write QK^T, softmax read + write,
  dropout read + write + 1-byte mask, AV reads them: 13 bytes per score, B * heads * s_q * s_kv scores.
Backward moves about twice the forward bytes. Matmul operand traffic is inside the matmul time.
Gradient accumulation: Megatron accumulates each micro-batch's weight gradients into fp32 main-grad buffers
(gradient_accumulation_fusion: the weight-gradient GEMM reads and writes the fp32 buffer), 8 bytes per parameter
per micro-batch on every GPU that holds the parameter.
Adam (mixed precision) touches 30 bytes per parameter it owns: reads fp32 weight, m, v and fp32 grad (16),
writes weight, m, v (12) and the bf16 copy (2).
"""

from __future__ import annotations

from fabricsim.workload.plan import ParallelPlan
from fabricsim.workload.spec import ModelSpec

NORM_BYTES_PER_TH = 8.0
BIAS_DROPOUT_ADD_BYTES_PER_TH = 14.0
SCORE_BYTES = 13.0
ADAM_BYTES_PER_PARAM = 30.0
MAIN_GRAD_ACCUMULATE_BYTES_PER_PARAM = 8.0


def layer_forward_bytes(model: ModelSpec, plan: ParallelPlan, index: int, *, flash_attention: bool) -> float:
    """Element-wise HBM bytes of layer ``index``, forward, one micro-batch, on one GPU (split over tp and cp)."""
    tokens = plan.mbs * plan.seq / plan.cp
    h = model.hidden
    if model.is_moe_layer(index):
        assert model.moe is not None
        ffn = (model.moe.top_k + model.moe.shared_experts) * model.expert_ffn_hidden
    else:
        ffn = model.ffn_hidden
    mlp_act = (6.0 if model.gated_mlp else 4.0) * ffn
    per_token = (NORM_BYTES_PER_TH + BIAS_DROPOUT_ADD_BYTES_PER_TH) * h + mlp_act
    scores = 0.0 if flash_attention else SCORE_BYTES * plan.mbs * model.heads * (plan.seq / plan.cp) * plan.seq
    return (tokens * per_token + scores) / plan.tp


def optimizer_bytes(params_owned: float) -> float:
    """HBM bytes of one Adam update over ``params_owned`` parameters."""
    return ADAM_BYTES_PER_PARAM * params_owned


def grad_accumulation_bytes(params_held: float) -> float:
    """HBM bytes of accumulating one micro-batch's weight gradients into fp32 main grads."""
    return MAIN_GRAD_ACCUMULATE_BYTES_PER_PARAM * params_held
