"""Per-GPU memory of a training step: weights, gradients, optimizer state and activations, for the fullest stage.

Model state (mixed-precision Adam, Rajbhandari et al. 2020 "ZeRO", sec. 3.1): bf16 weights (2 bytes/param), the
main-grad buffer in ``plan.grad_dtype`` (fp32: 4, Megatron-LM's default with bf16, so 18 bytes/param replicated and
6 + 12/d with the distributed optimizer as NVIDIA/Megatron-LM docs/source/distrib_optimizer.md tabulates; bf16: 2)
plus fp32 master weights, momentum and variance (12). ZeRO-1 shards the optimizer state over the
data-parallel GPUs, ZeRO-2 also the gradients, ZeRO-3 (FSDP) also the weights, keeping a gathered copy of up to two
layers (the one computing and the one prefetched). Dense weights shard over dp * cp (Megatron's distributed
optimizer), expert weights over the expert data-parallel size tp * cp * dp / (etp * ep). TP splits every weight
matrix, expert TP (etp, default tp) the routed experts'; each EP rank holds experts / ep experts; stage 0 holds
the embedding, the last stage the LM head (also
a copy of it with tied embeddings when pp > 1, as Megatron does).

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
arXiv:2205.05198, sec. 4 and Table 2), per layer and micro-batch, 16-bit values and 1-byte dropout masks:
sbh (34 + 5 a s / h) without parallelism; sbh/t (34 + 5as/h) with TP + sequence parallelism; sbh (10 + 24/t +
5as/(ht)) with TP alone; selective recompute drops the 5as/h score term; full recompute keeps only the layer input,
2 sbh (Table 2; here 2 sbh / t with sequence parallelism, where Megatron keeps that input sequence-sharded), plus,
once per stage, the full activations of the one layer being recomputed in the backward.
Fused (flash) attention never stores the 5as/h scores either (it recomputes them in the backward from Q, K, V and
a 4-byte log-sum-exp per row, Dao et al. 2022 sec. 3.1), so it keeps only that statistic. With FP8
(TransformerEngine) the inputs of the weight GEMMs (QKV, projection, both MLP GEMMs) are saved in FP8, one byte
each, and weights are cast to FP8 (with their transpose) as their layer runs (TE's default
``fp8_model_params=False``): the layer computing and the one prefetched hold such copies. The 34
is generalised here to GQA (K and V replicated when tp > kv_heads), other MLP widths, gated MLPs and MoE; it is
exact for multi-head attention with an ungated 4h MLP. CP divides the sequence. Pipeline stage p holds
``plan.microbatches_in_flight(p)`` micro-batches. Not counted: CUDA context, NCCL and allocator buffers,
fragmentation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from fabricsim.caching import BoundedMemo, ByIdentity
from fabricsim.catalog import GPU
from fabricsim.model import ModelSpec
from fabricsim.training.plan import (
    GRAD_DTYPE_BYTES,
    ParallelPlan,
    layer_kinds,
    layers_by_stage,
    stage_key,
    stage_layers,
    stage_layout,
)

WEIGHT_BYTES = 2  # bf16 parameter
FP8_WEIGHT_BYTES = 1  # TransformerEngine's FP8 copy (and its transpose) of a weight (precision fp8)
LSE_BYTES = 4  # fused attention's fp32 log-sum-exp per query row and head
OPTIMIZER_BYTES = 12  # fp32 master weight + Adam momentum + variance
GIB = 2**30


@dataclass(frozen=True)
class StageParams:
    """Parameters one GPU of a stage holds before ZeRO sharding, split by how they shard."""

    dense: float  # sharded over dp * cp under ZeRO
    expert: float  # sharded over dp * cp / ep under ZeRO
    largest_dense_layer: float
    largest_expert_layer: float


def stage_params(model: ModelSpec, plan: ParallelPlan, stage: int) -> StageParams:
    """Parameters on one GPU of pipeline ``stage`` (after TP and EP splits, before ZeRO)."""
    return _stage_params(model, plan.tp, plan.expert_tp, plan.ep, stage_layout(model, plan), plan.virtual_stages,
                         stage)


@lru_cache(maxsize=8192)
def _stage_params(model: ModelSpec, tp: int, etp: int, ep: int, layout: tuple[int, ...], virtual_stages: int,
                  stage: int) -> StageParams:
    """Cached on the only plan fields the result depends on (a sizing search varies the others)."""
    t, h = tp, model.hidden
    pp = len(layout)
    dense = expert = 0.0
    big_dense = big_expert = 0.0
    for i in layers_by_stage(layout, virtual_stages)[stage]:
        layer = model.attention_params_per_rank(t) + 2 * h
        experts = 0.0
        if model.is_moe_layer(i):
            assert model.moe is not None
            layer += model.moe.shared_experts * model.expert_params() / t + model.router_params()
            experts = model.moe.experts / ep * model.expert_params() / etp
        else:
            layer += model.mlp_params() / t
        dense += layer
        expert += experts
        big_dense, big_expert = max(big_dense, layer), max(big_expert, experts)
    if stage == 0:
        dense += model.vocab * h / t
    if stage == pp - 1:
        dense += h  # final norm
        if not model.tied_embeddings or pp > 1:
            dense += model.vocab * h / t
    return StageParams(dense=dense, expert=expert, largest_dense_layer=big_dense, largest_expert_layer=big_expert)


def _shard(params: float, shards: int, on: bool) -> float:
    return params / shards if on else params


def _gather_buffer(part: float, largest_layer: float, shards: int) -> float:
    """ZeRO-3: up to two gathered layers, less the shard already held (never more than the part itself)."""
    return min(2 * largest_layer, part) * (1 - 1 / shards)


def layer_activation_bytes(model: ModelSpec, plan: ParallelPlan, index: int, recompute: str | None = None) -> float:
    """Activation bytes layer ``index`` keeps for the backward pass, per micro-batch, on one GPU (under
    ``recompute``, default the plan's)."""
    t, cp, h = plan.tp, plan.cp, model.hidden
    s_local = plan.seq / cp
    sbh = s_local * plan.mbs * h
    sp = plan.sequence_parallel and t > 1
    recompute = plan.recompute if recompute is None else recompute
    if recompute == "full":
        return 2 * sbh / (t if sp else 1)
    # K and V widths relative to hidden (MLA: the up-projected heads x qk and heads x v, not the cached latent)
    r = model.kv_dim / h if model.mla is None else (model.q_dim + model.o_dim) / (2 * h)
    gemm_in = 1 if plan.precision == "fp8" else 2  # bytes of a saved weight-GEMM input
    mlp_coeff = (4 if model.gated_mlp else 2) + gemm_in  # activation input (bf16) + second GEMM's input, x f/h
    masks = 2 if plan.dropout else 0  # 1-byte dropout masks after attention and after the MLP
    replicated = 2 * gemm_in + 4 + masks  # QKV and MLP inputs, two norm inputs, the dropout masks
    split = 2 + gemm_in + 4 * r * model.kv_replication(t)  # Q, projection input, K and V (replicated if tp > kv)
    if model.is_moe_layer(index):
        assert model.moe is not None
        per_token_experts = model.moe.top_k + model.moe.shared_experts
        split += per_token_experts * mlp_coeff * model.expert_ffn_hidden / h
        # the first expert GEMM's input: each token's top_k dispatched copies, which the expert-TP group
        # all-gathers (with sequence parallelism a GPU then holds etp shards' worth)
        replicated += gemm_in * model.moe.top_k * (plan.expert_tp if sp else 1)
    else:
        split += mlp_coeff * model.ffn_hidden / h
    if recompute == "selective":
        scores = 0.0
    elif plan.flash_attention:
        scores = LSE_BYTES * model.heads * s_local * plan.mbs
    else:
        scores = 5.0 * model.heads * s_local * plan.seq * plan.mbs
    if sp:
        return (sbh * (replicated + split) + scores) / t
    return sbh * (replicated + split / t) + scores / t


def stage_activation_bytes(model: ModelSpec, plan: ParallelPlan, stage: int) -> float:
    """Peak activation bytes on one GPU of ``stage``: its layers x micro-batches in flight, + embedding / LM head."""
    key = (ByIdentity(model), stage, stage_key(plan))
    per_microbatch, recompute_working = _STAGE_ACTIVATIONS.get(key, lambda: _stage_activations(model, plan, stage))
    return per_microbatch * plan.microbatches_in_flight(stage) + recompute_working


_STAGE_ACTIVATIONS: BoundedMemo[tuple[float, float]] = BoundedMemo(1 << 16)


def _stage_activations(model: ModelSpec, plan: ParallelPlan, stage: int) -> tuple[float, float]:
    """A stage's activation bytes per micro-batch, and the working set full recompute adds: cached on the plan
    without data parallelism and batch (`stage_key`), which they do not read."""
    t = plan.tp
    sp = plan.sequence_parallel and t > 1
    sbh = plan.seq / plan.cp * plan.mbs * model.hidden
    layers = stage_layers(model, plan)[stage]
    # A layer's activations depend on the layer only through its kind (dense or MoE): price each kind once.
    kinds = layer_kinds(model, layers)
    per_microbatch = sum(count * layer_activation_bytes(model, plan, first) for first, count in kinds)
    # Full recompute rematerialises one layer at a time in the backward: its whole activation set is live then.
    recompute_working = (max(layer_activation_bytes(model, plan, first, "none") for first, _ in kinds)
                         if plan.recompute == "full" and layers else 0.0)
    if stage == 0:
        per_microbatch += sbh / (t if sp else 1) if plan.dropout else 0.0  # embedding dropout mask
    if stage == plan.pp - 1:
        logits_fp32 = 4 * plan.seq / plan.cp * plan.mbs * model.vocab / t
        per_microbatch += 4 * sbh / (t if sp else 1) + logits_fp32  # final norm and LM head inputs, fp32 logits
    return per_microbatch, recompute_working


@dataclass(frozen=True)
class MemoryReport:
    """Bytes one GPU needs, by component, for the pipeline stage that needs the most."""

    stage: int
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float
    stage_totals_bytes: tuple[float, ...] = field(default=())

    @property
    def model_state_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> float:
        return self.model_state_bytes + self.activations_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def shortfall_bytes(self) -> float:
        """Bytes missing (0 when it fits)."""
        return max(0.0, self.total_bytes - self.capacity_bytes)

    def summary(self) -> str:
        need, have = self.total_bytes / GIB, self.capacity_bytes / GIB
        if self.fits:
            return f"fits: needs {need:.1f} GiB of {have:.1f} GiB (stage {self.stage})"
        return (f"does not fit: needs {need:.1f} GiB, has {have:.1f} GiB (short by {self.shortfall_bytes / GIB:.1f} "
                f"GiB, stage {self.stage})")


def stage_memory(model: ModelSpec, plan: ParallelPlan, stage: int, capacity_bytes: float) -> MemoryReport:
    """Memory of one GPU of ``stage``."""
    p = stage_params(model, plan, stage)
    ds, es = plan.dp * plan.cp, plan.expert_dp
    z = plan.zero

    def state(bytes_per_param: int, sharded: bool) -> float:
        return bytes_per_param * (_shard(p.dense, ds, sharded) + _shard(p.expert, es, sharded))

    weights = state(WEIGHT_BYTES, z >= 3)
    if z >= 3:
        weights += WEIGHT_BYTES * (_gather_buffer(p.dense, p.largest_dense_layer, ds)
                                   + _gather_buffer(p.expert, p.largest_expert_layer, es))
    if plan.precision == "fp8":  # the FP8 copy and transpose of the layer computing and the one prefetched
        weights += FP8_WEIGHT_BYTES * 2 * (2 * p.largest_dense_layer + 2 * p.largest_expert_layer)
    return MemoryReport(
        stage=stage,
        weights_bytes=weights,
        gradients_bytes=state(GRAD_DTYPE_BYTES[plan.grad_dtype], z >= 2),
        optimizer_bytes=state(OPTIMIZER_BYTES, z >= 1),
        activations_bytes=stage_activation_bytes(model, plan, stage),
        capacity_bytes=capacity_bytes,
    )


def memory_report(model: ModelSpec, plan: ParallelPlan, gpu: GPU | float) -> MemoryReport:
    """The per-GPU memory of the fullest pipeline stage against ``gpu``'s HBM (or a capacity in bytes)."""
    capacity = gpu.hbm_bytes if isinstance(gpu, GPU) else float(gpu)
    reports = [stage_memory(model, plan, s, capacity) for s in range(plan.pp)]
    worst = max(reports, key=lambda r: r.total_bytes)
    return MemoryReport(
        stage=worst.stage,
        weights_bytes=worst.weights_bytes,
        gradients_bytes=worst.gradients_bytes,
        optimizer_bytes=worst.optimizer_bytes,
        activations_bytes=worst.activations_bytes,
        capacity_bytes=capacity,
        stage_totals_bytes=tuple(r.total_bytes for r in reports),
    )
