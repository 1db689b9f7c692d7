"""The network-independent work of one micro-batch on a pipeline stage: weight GEMMs at the precision's rate and
their reduction-depth efficiency, attention, the LM head, kernel launch gaps and element-wise HBM traffic (FP8 kept
only where it pays for its casts)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fabricsim.caching import BoundedMemo, ByIdentity
from fabricsim.catalog import GPU
from fabricsim.model import (
    ModelSpec,
    achievable_flops_per_s,
    achievable_hbm_bytes_per_s,
    attention_flops_per_s,
    forward_flops,
    gemm_flops_per_s,
    grouped_gemm_efficiency,
    k_efficiency,
    kernel_gap_s,
    sm80_kernel_fraction,
)
from fabricsim.training.elementwise import fp8_cast_bytes, grad_accumulation_bytes, layer_forward_bytes
from fabricsim.training.experts import routed_load_peak
from fabricsim.training.flops import kv_replication_flops, layer_gemm_shapes
from fabricsim.training.memory import stage_params
from fabricsim.training.plan import ParallelPlan, layer_kinds, stage_key, stage_layers

# Kernels of one transformer layer's forward in Megatron-Core with TransformerEngine: norm, QKV GEMM, RoPE,
# attention, projection GEMM, bias-dropout-add, norm, two MLP GEMMs, activation, bias-dropout-add, + TP
# collectives; FP8 adds a quantise kernel per GEMM input. Backward and recompute launch as many per pass.
KERNELS_PER_LAYER_FORWARD = 12
FP8_CAST_KERNELS_PER_LAYER = 4


@dataclass(frozen=True)
class _StageCompute:
    """Seconds of one micro-batch's work on one GPU of a stage, by pass (forward, backward, recompute)."""

    gemm_fwd_s: float  # weight GEMMs of the transformer layers, one forward
    attention_fwd_s: float  # QK^T and AV, one forward
    head_fwd_s: float  # LM head (last stage), one forward
    kernel_gaps_s: float  # launch gaps of every kernel of the micro-batch
    recompute_gemm: float  # forwards of the weight GEMMs recomputed (0 or 1)
    recompute_attention: float  # forwards of attention recomputed (0 or 1)

    @property
    def forward_s(self) -> float:
        return self.gemm_fwd_s + self.attention_fwd_s + self.head_fwd_s

    @property
    def backward_s(self) -> float:
        """Backward (2x forward FLOPs) plus what recompute repeats inside it."""
        return (2.0 * self.forward_s + self.recompute_gemm * self.gemm_fwd_s
                + self.recompute_attention * self.attention_fwd_s)

    @property
    def total_s(self) -> float:
        return self.forward_s + self.backward_s + self.kernel_gaps_s


def _stage_compute(model: ModelSpec, plan: ParallelPlan, gpu: GPU, layers: tuple[int, ...], last: bool,
                   precision: str) -> _StageCompute:
    """Matmul time of one micro-batch on a stage: weight GEMMs at the plan precision's achievable rate, fused
    attention at the attention kernels' rate (causal: block skipping halves it) or, unfused, as batched matmuls at
    the BF16 GEMM rate, the LM head in BF16 (Megatron keeps its output layer out of FP8)."""
    share = plan.tp * plan.cp
    fwd = forward_flops(model, plan.mbs, plan.seq, layers=layers, lm_head=last, causal=plan.flash_attention)
    gemm_flops = fwd.linear / share + kv_replication_flops(model, plan, len(layers))
    bf16 = achievable_flops_per_s(gpu)
    attention_rate = attention_flops_per_s(gpu, model.attention_flops_per_exp()) if plan.flash_attention else bf16
    if plan.flash_attention and plan.attention_kernel == "fa2":  # Ampere-style kernels on a later generation
        attention_rate *= sm80_kernel_fraction(gpu)
    kernels = KERNELS_PER_LAYER_FORWARD + (FP8_CAST_KERNELS_PER_LAYER if precision == "fp8" else 0)
    passes = 3.0 + (1.0 if plan.recompute == "full" else 0.0)
    return _StageCompute(
        gemm_fwd_s=gemm_flops / gemm_flops_per_s(gpu, precision) / _shape_efficiency(model, plan, gpu, layers,
                                                                                     precision),
        attention_fwd_s=fwd.attention / share / attention_rate,
        head_fwd_s=fwd.lm_head / share / bf16,
        kernel_gaps_s=kernels * passes * len(layers) * kernel_gap_s(),
        recompute_gemm=1.0 if plan.recompute == "full" else 0.0,
        recompute_attention=0.0 if plan.recompute == "none" else 1.0,
    )


_SHAPE_EFFICIENCY: BoundedMemo[float] = BoundedMemo(1 << 16)  # a sizing task needs a few hundred entries


def _shape_efficiency(model: ModelSpec, plan: ParallelPlan, gpu: GPU, layers: tuple[int, ...],
                      precision: str) -> float:
    """FLOP-weighted efficiency of the stage's weight GEMMs relative to the best shape, from each GEMM's reduction
    depth: forward (K = its input width), backward-data (K = its output width), weight gradient (K = tokens).
    Layers of one kind (dense or MoE) have the same GEMMs, so each kind is priced once. Memoised on exactly what it
    reads: the model and GPU, the precision, the stage's kinds in order with their counts, and the plan fields
    `layer_gemm_shapes` and `routed_load_peak` use (a sizing search asks for the same few hundred thousands of
    times)."""
    key = (ByIdentity(model), ByIdentity(gpu), precision,
           tuple((model.is_moe_layer(first), count) for first, count in layer_kinds(model, layers)),
           plan.mbs, plan.seq, plan.cp, plan.tp, plan.ep, plan.expert_tp, plan.sequence_parallel, plan.moe_balance,
           plan.capacity_factor)
    return _SHAPE_EFFICIENCY.get(key, lambda: _priced_shape_efficiency(model, plan, gpu, layers, precision))


def _priced_shape_efficiency(model: ModelSpec, plan: ParallelPlan, gpu: GPU, layers: tuple[int, ...],
                             precision: str) -> float:
    tokens = plan.mbs * plan.seq / plan.cp
    flops = slowed = 0.0
    load = routed_load_peak(model, plan)
    for index, count in layer_kinds(model, layers):
        shapes = np.array(layer_gemm_shapes(model, plan, index))  # (forward FLOPs, forward K, dgrad K, rows)
        rows = shapes[:, 3]
        ks = np.column_stack([shapes[:, 1], shapes[:, 2], np.minimum(rows, tokens)])
        streaming = grouped_gemm_efficiency(rows, gpu, precision)  # experts' weights read per group; wgrad: K
        streaming = streaming / np.where(np.isfinite(rows), load, 1.0)  # the most loaded EP rank sets the pace
        eff = k_efficiency(ks, gpu, precision) * np.column_stack([streaming, streaming, np.ones(len(rows))])
        flops += count * 3 * float(shapes[:, 0].sum())
        slowed += count * float((shapes[:, 0, None] / eff).sum())
    return flops / slowed if slowed > 0 else 1.0


@dataclass(frozen=True)
class _StageWork:
    """The network-independent part of one micro-batch on a stage: matmul time by pass, element-wise HBM time,
    and whether FP8 was dropped for BF16 (the TP gathers then stay BF16 too)."""

    work: _StageCompute
    hbm_s: float
    bf16_fallback: bool


_STAGE_WORK: BoundedMemo[_StageWork] = BoundedMemo(1 << 17)  # a sizing process holds up to ~10^5 (plan, stage)


def _stage_work(model: ModelSpec, plan: ParallelPlan, gpu: GPU, stage: int, layers: list[int]) -> _StageWork:
    """Cached per model, GPU, stage and the plan fields a micro-batch's work reads (`stage_key`): a sizing search
    prices the same stage on many networks, and at every cluster size (only data parallelism differs)."""
    key = (ByIdentity(model), ByIdentity(gpu), stage, stage_key(plan))
    return _STAGE_WORK.get(key, lambda: _priced_stage_work(model, plan, gpu, stage))


def _priced_stage_work(model: ModelSpec, plan: ParallelPlan, gpu: GPU, stage: int) -> _StageWork:
    layers = stage_layers(model, plan)[stage]
    last = stage == plan.pp - 1
    hbm_rate = achievable_hbm_bytes_per_s(gpu)
    recompute_passes = 1.0 if plan.recompute == "full" else 0.0
    work = _stage_compute(model, plan, gpu, layers, last, plan.precision)
    kinds = layer_kinds(model, layers)  # element-wise bytes depend on a layer only through its kind
    casts = sum(count * (fp8_cast_bytes(model, plan, i, backward=False) * (1.0 + recompute_passes)
                         + fp8_cast_bytes(model, plan, i, backward=True)) for i, count in kinds)
    fallback = False
    if plan.precision == "fp8":  # FP8 GEMMs only where they pay for their casts (else the stage stays BF16)
        bf16 = _stage_compute(model, plan, gpu, layers, last, "bf16")
        if bf16.total_s <= work.total_s + casts / hbm_rate:
            work, casts, fallback = bf16, 0.0, True
    fwd_bytes = sum(count * layer_forward_bytes(model, plan, i) for i, count in kinds)
    held = stage_params(model, plan, stage)
    hbm_bytes = fwd_bytes * (3.0 + recompute_passes) + casts + grad_accumulation_bytes(held.dense + held.expert)
    return _StageWork(work, hbm_bytes / hbm_rate, fallback)


@lru_cache(maxsize=256)
def _moe_flags(model: ModelSpec) -> tuple[int, ...]:
    return tuple(int(model.is_moe_layer(i)) for i in range(model.layers))
