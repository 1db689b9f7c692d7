"""FLOPs of a training step: the forward FLOPs of ``fabricsim.model.forward_flops``, backward = 2 x forward,
and recompute, which adds a forward of the transformer layers (full) or of the attention core, QK^T and AV
(selective, Korthikanti et al. 2022); and their split over a parallel plan's GPUs.

"Model FLOPs" (forward + backward) are what MFU divides by; "hardware FLOPs" add recompute. For a GPT model with
an ungated 4h MLP and full recompute this reproduces Megatron's 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricsim.catalog import GPU
from fabricsim.errors import SpecError
from fabricsim.model import ForwardFlops, ModelSpec, forward_flops
from fabricsim.training.plan import ParallelPlan, stage_layers


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of forward, backward and recompute; ``model_flops`` for MFU, ``hardware_flops`` for time."""

    forward: float
    backward: float
    recompute: float

    @property
    def model_flops(self) -> float:
        """Forward + backward: the work the model needs, whatever is recomputed."""
        return self.forward + self.backward

    @property
    def hardware_flops(self) -> float:
        """Model FLOPs plus recompute: the work the GPUs do."""
        return self.forward + self.backward + self.recompute


def _with_backward(fwd: ForwardFlops, recompute: str) -> StepFlops:
    extra = {"none": 0.0, "selective": fwd.attention, "full": fwd.layers}[recompute]
    return StepFlops(forward=fwd.total, backward=2.0 * fwd.total, recompute=extra)


def step_flops(model: ModelSpec, plan: ParallelPlan, *, causal: bool = False) -> StepFlops:
    """FLOPs of one optimizer step over all GPUs: gbs sequences of seq tokens, with the plan's recompute."""
    return _with_backward(forward_flops(model, plan.gbs, plan.seq, causal=causal), plan.recompute)


def stage_microbatch_flops(model: ModelSpec, plan: ParallelPlan, stage: int, *, causal: bool = False) -> StepFlops:
    """FLOPs one GPU of pipeline ``stage`` does for one micro-batch (its layers; LM head on the last stage).

    Work is split evenly over tp * cp GPUs (TP splits every matmul, CP the sequence); with balanced routing the
    expert work per GPU is the same under any ep. When tp > kv_heads each KV head is replicated and its K and V
    projections are computed tp / kv_heads times over (extra hardware work, not model work).
    """
    on_stage = stage_layers(model, plan)[stage]
    fwd = forward_flops(model, plan.mbs, plan.seq, layers=on_stage, lm_head=stage == plan.pp - 1, causal=causal)
    total = _with_backward(fwd, plan.recompute)
    share = plan.tp * plan.cp
    kv_fwd = kv_replication_flops(model, plan, len(on_stage))
    kv_recompute = kv_fwd if plan.recompute == "full" else 0.0
    return StepFlops(forward=total.forward / share + kv_fwd, backward=total.backward / share + 2 * kv_fwd,
                     recompute=total.recompute / share + kv_recompute)


def kv_replication_flops(model: ModelSpec, plan: ParallelPlan, layers: int) -> float:
    """Extra forward FLOPs on one GPU for ``layers`` layers when tp > kv_heads: each replicated KV head's K and V
    projections run tp / kv_heads times over (hardware work, not model work)."""
    extra = model.kv_replication(plan.tp) - 1
    return extra * 2.0 * plan.mbs * plan.seq * 2 * model.hidden * model.kv_dim * layers / (plan.tp * plan.cp)


def layer_gemm_shapes(model: ModelSpec, plan: ParallelPlan, index: int) -> list[tuple[float, float, float]]:
    """The weight GEMMs of layer ``index`` on one GPU, as (forward FLOPs, forward K, backward-data K); the
    weight-gradient GEMMs reduce over the tokens. Column-parallel GEMMs (QKV, first MLP) split their output over
    tp, row-parallel ones (projection, second MLP) their input, so tp shortens the K of the latter."""
    tokens = plan.mbs * plan.seq / plan.cp
    h, t = model.hidden, plan.tp
    if model.mla is not None:  # MLA: a replicated down-projection, then head-split Q and KV up-projections
        mla = model.mla
        down = (mla.q_lora_rank or 0) + model.kv_dim
        q_in = mla.q_lora_rank or h
        q_out, kv_out = model.q_dim / t, model.heads * (mla.qk_nope_head_dim + mla.v_head_dim) / t
        qkv: list[tuple[float, float, float]] = [
            (2 * tokens * h * down, h, down),
            (2 * tokens * q_in * q_out, q_in, q_out),
            (2 * tokens * mla.kv_lora_rank * kv_out, mla.kv_lora_rank, kv_out),
        ]
    else:
        qkv_out = (model.q_dim + 2 * model.kv_dim * model.kv_replication(t)) / t
        qkv = [(2 * tokens * h * qkv_out, h, qkv_out)]
    if model.is_moe_layer(index):
        assert model.moe is not None
        ffn, copies = model.expert_ffn_hidden, model.moe.top_k + model.moe.shared_experts
    else:
        ffn, copies = model.ffn_hidden, 1
    up_out = ffn * (2 if model.gated_mlp else 1) / t
    return [
        *qkv,
        (2 * tokens * model.o_dim / t * h, model.o_dim / t, h),
        (2 * tokens * h * up_out * copies, h, up_out),
        (2 * tokens * ffn / t * h * copies, ffn / t, h),
    ]


MFU_DEFINITION = ("model FLOPs (forward + backward, attention unmasked, recompute not counted) per second per GPU / "
                  "the GPU's dense tensor peak in the precision the weight GEMMs run in")


def mfu_peak(gpu: GPU, precision: str) -> float:
    """The peak MFU divides by: the GPU's dense tensor FLOP/s in the precision of the weight GEMMs (``bf16``, or
    ``fp8`` as TransformerEngine runs them), the convention of PaLM and Megatron-LM's MFU (model FLOPs over the peak
    of the math that carries them)."""
    if precision == "bf16":
        return gpu.bf16_flops_per_s
    if precision == "fp8":
        if gpu.fp8_flops_per_s is None:
            raise SpecError(f"{gpu.id} has no FP8 tensor cores; use --precision bf16", field="--precision")
        return gpu.fp8_flops_per_s
    raise SpecError(f"unknown precision {precision!r}; allowed: bf16, fp8", field="--precision")
