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
from fabricsim.training.experts import dispatched_tokens
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


def layer_gemm_shapes(model: ModelSpec, plan: ParallelPlan, index: int) -> list[tuple[float, float, float, float]]:
    """The weight GEMMs of layer ``index`` on one GPU, as (forward FLOPs, forward K, backward-data K, rows per
    group). The weight-gradient GEMMs reduce over the rows: the tokens for dense GEMMs (rows = inf: one group, no
    padding), the tokens each local expert received for the routed experts' grouped GEMMs. Column-parallel GEMMs
    (QKV, first MLP) split their output over tp, row-parallel ones (projection, second MLP) their input, so tp
    shortens the K of the latter; routed experts split over the expert TP size instead.

    Routed experts (Megatron-Core MoE parallel folding): a GPU's EP rank holds experts / ep experts and, after its
    expert-TP group gathers, receives etp x ep x (its tokens) x top_k / experts tokens per expert on average, so
    the per-GPU FLOPs are the same under any ep or etp while each expert GEMM gets fewer rows as experts multiply.
    """
    tokens = plan.mbs * plan.seq / plan.cp
    h, t = model.hidden, plan.tp
    dense_rows = float("inf")
    if model.mla is not None:  # MLA: a replicated down-projection, then head-split Q and KV up-projections
        mla = model.mla
        down = (mla.q_lora_rank or 0) + model.kv_dim
        q_in = mla.q_lora_rank or h
        q_out, kv_out = model.q_dim / t, model.heads * (mla.qk_nope_head_dim + mla.v_head_dim) / t
        qkv: list[tuple[float, float, float, float]] = [
            (2 * tokens * h * down, h, down, dense_rows),
            (2 * tokens * q_in * q_out, q_in, q_out, dense_rows),
            (2 * tokens * mla.kv_lora_rank * kv_out, mla.kv_lora_rank, kv_out, dense_rows),
        ]
    else:
        qkv_out = (model.q_dim + 2 * model.kv_dim * model.kv_replication(t)) / t
        qkv = [(2 * tokens * h * qkv_out, h, qkv_out, dense_rows)]
    gates = 2 if model.gated_mlp else 1
    out = [*qkv, (2 * tokens * model.o_dim / t * h, model.o_dim / t, h, dense_rows)]
    if not model.is_moe_layer(index):
        ffn = model.ffn_hidden
        return [*out, (2 * tokens * h * ffn * gates / t, h, ffn * gates / t, dense_rows),
                (2 * tokens * ffn / t * h, ffn / t, h, dense_rows)]
    assert model.moe is not None
    ffn, moe = model.expert_ffn_hidden, model.moe
    if moe.shared_experts:
        out += [(2 * tokens * h * ffn * gates / t * moe.shared_experts, h, ffn * gates / t, dense_rows),
                (2 * tokens * ffn / t * h * moe.shared_experts, ffn / t, h, dense_rows)]
    sp = plan.sequence_parallel and t > 1
    received = dispatched_tokens(plan) * moe.top_k * (plan.expert_tp if sp else 1)  # after the expert-TP gather
    rows = received / (moe.experts / plan.ep)
    e = plan.expert_tp
    return [*out, (2 * received * h * ffn * gates / e, h, ffn * gates / e, rows),
            (2 * received * ffn / e * h, ffn / e, h, rows)]


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
