"""HBM traffic of the memory-bound work of a step: element-wise ops of each layer and the optimizer update.

Per layer and micro-batch, forward, one GPU (bf16 = 2 bytes per element; T tokens of width h):
- norms: read + write T*h twice (input norm, post-attention norm): 8 T h bytes;
- fused bias-dropout-add after attention and after the MLP: read input and residual, write output, 1-byte
  mask: 7 T h bytes each, 14 T h;
  without dropout (``plan.dropout`` off: the Llama, DeepSeek, Qwen and GPT-OSS recipes run hidden_dropout 0)
  no mask: 12 T h;
- MLP activation on the f-wide tensor: read + write (GeLU, 4 f T bytes), or read two and write one (SwiGLU,
  6 f T bytes); for MoE f is the active expert width times top_k (+ shared experts);
- MoE token permutation (Megatron-Core's all-to-all dispatcher, moe_utils.permute / unpermute): before the
  dispatch each token is copied to its k experts' order (read h, write k h), after it the received copies are
  sorted by local expert (read and write k h); the combine undoes both (read and write k h, then read k h and
  write the weighted sum h): 2 (2 h + 6 k h) bytes per token; without expert parallelism only the first
  permutation and its inverse: 2 (2 h + 2 k h);
- attention scores when the kernel materialises them (no FlashAttention): write QK^T, softmax read + write,
  dropout read + write + 1-byte mask, AV reads them: 13 bytes per score, B * heads * s_q * s_kv scores.
With ``kernels: eager`` (PyTorch eager mode, e.g. torchtitan without torch.compile) every element-wise op is its
own kernel that reads and writes its tensors: an RMSNorm computed in fp32 (upcast, square, mean, rsqrt-scale,
downcast, weight: ~40 bytes per element, torchtitan's ``RMSNorm``), residual adds (read two, write one: 6),
rotary embeddings in complex fp32 on Q and K (upcast, complex multiply, downcast: ~20 bytes per element), and the
SwiGLU as silu then multiply (10 bytes per f element; GeLU stays one kernel, 4).
Backward moves about twice the forward bytes. Matmul operand traffic is inside the matmul time.
Gradient accumulation: Megatron accumulates each micro-batch's weight gradients into fp32 main-grad buffers
(gradient_accumulation_fusion: the weight-gradient GEMM reads and writes the fp32 buffer), 8 bytes per parameter
per micro-batch on every GPU that holds the parameter.
FP8 (TransformerEngine): every weight-GEMM input is cast to FP8 first (``fp8_cast_bytes``).
Adam (mixed precision) touches 30 bytes per parameter it owns: reads fp32 weight, m, v and fp32 grad (16),
writes weight, m, v (12) and the bf16 copy (2).
"""

from __future__ import annotations

from fabricsim.model import ModelSpec
from fabricsim.training.plan import ParallelPlan

NORM_BYTES_PER_TH = 8.0
BIAS_DROPOUT_ADD_BYTES_PER_TH = 14.0
DROPOUT_MASK_BYTES_PER_TH = 2.0  # the two 1-byte masks inside BIAS_DROPOUT_ADD_BYTES_PER_TH
MOE_PERMUTE_BYTES_PER_H = 4.0  # 2 bytes x (read h + write h) around the two permutations, per token
MOE_PERMUTE_BYTES_PER_KH = 12.0  # 2 bytes x 6 k h: the routed copies written, re-sorted and read back
MOE_LOCAL_PERMUTE_BYTES_PER_KH = 4.0  # ep = 1: no dispatch, so no re-sort: written once, read once
SCORE_BYTES = 13.0
ADAM_BYTES_PER_PARAM = 30.0
MAIN_GRAD_ACCUMULATE_BYTES_PER_PARAM = 8.0
FP8_CAST_BYTES_PER_ELEMENT = 4.0
EAGER_NORM_BYTES_PER_TH = 80.0  # two fp32 RMSNorms of ~40 bytes per element each
EAGER_RESIDUAL_BYTES_PER_TH = 12.0  # two residual adds
EAGER_ROPE_BYTES_PER_ELEMENT = 20.0  # on Q and K
EAGER_SWIGLU_BYTES_PER_F = 10.0


def layer_forward_bytes(model: ModelSpec, plan: ParallelPlan, index: int) -> float:
    """Element-wise HBM bytes of layer ``index``, forward, one micro-batch, on one GPU (split over tp and cp)."""
    tokens = plan.mbs * plan.seq / plan.cp
    h = model.hidden
    if plan.kernels == "eager":
        mlp_act = (EAGER_SWIGLU_BYTES_PER_F if model.gated_mlp else 4.0) * _active_ffn(model, index)
        rope = EAGER_ROPE_BYTES_PER_ELEMENT * (h + model.kv_dim)
        per_token = (EAGER_NORM_BYTES_PER_TH + EAGER_RESIDUAL_BYTES_PER_TH) * h + rope + mlp_act
    else:
        mlp_act = (6.0 if model.gated_mlp else 4.0) * _active_ffn(model, index)
        bda = BIAS_DROPOUT_ADD_BYTES_PER_TH - (0.0 if plan.dropout else DROPOUT_MASK_BYTES_PER_TH)
        per_token = (NORM_BYTES_PER_TH + bda) * h + mlp_act
    if model.is_moe_layer(index):
        assert model.moe is not None
        per_kh = MOE_PERMUTE_BYTES_PER_KH if plan.ep > 1 else MOE_LOCAL_PERMUTE_BYTES_PER_KH
        per_token += (MOE_PERMUTE_BYTES_PER_H + per_kh * model.moe.top_k) * h
    scores = 0.0 if plan.flash_attention else SCORE_BYTES * plan.mbs * model.heads * (plan.seq / plan.cp) * plan.seq
    return (tokens * per_token + scores) / plan.tp


def optimizer_bytes(params_owned: float) -> float:
    """HBM bytes of one Adam update over ``params_owned`` parameters."""
    return ADAM_BYTES_PER_PARAM * params_owned


def grad_accumulation_bytes(params_held: float) -> float:
    """HBM bytes of accumulating one micro-batch's weight gradients into fp32 main grads."""
    return MAIN_GRAD_ACCUMULATE_BYTES_PER_PARAM * params_held


def fp8_cast_bytes(model: ModelSpec, plan: ParallelPlan, index: int, *, backward: bool) -> float:
    """HBM bytes of TransformerEngine's FP8 casts for layer ``index``, one pass of one micro-batch, one GPU.

    Every weight-GEMM operand that is an activation is quantised with a fused cast-transpose (read bf16, write
    FP8 and its FP8 transpose for the other GEMM of the pair: 4 bytes per element; TE ``cast_transpose``):
    forward, the inputs of the QKV, projection and two MLP GEMMs; backward, the output gradients of the same
    four GEMMs.
    """
    if plan.precision != "fp8":
        return 0.0
    tokens = plan.mbs * plan.seq / plan.cp
    h, ffn = model.hidden, _active_ffn(model, index)
    grad_widths = (h + 2 * model.kv_dim) + h + ffn * (2 if model.gated_mlp else 1) + h  # QKV, proj, fc1, fc2 out
    widths = grad_widths if backward else 3 * h + ffn
    return FP8_CAST_BYTES_PER_ELEMENT * tokens * widths / plan.tp


def _active_ffn(model: ModelSpec, index: int) -> float:
    """Width of the MLP a token passes through in layer ``index`` (all its routed and shared experts for MoE)."""
    if model.is_moe_layer(index):
        assert model.moe is not None
        return float((model.moe.top_k + model.moe.shared_experts) * model.expert_ffn_hidden)
    return float(model.ffn_hidden)
