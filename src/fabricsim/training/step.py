"""Training step time: compute, HBM, and every collective of the step on its real process group, composed with
the pipeline schedule and the overlap frameworks do, into a per-layer (link kind) breakdown.

Per micro-batch on the slowest pipeline stage:
- compute: weight GEMMs at the plan precision's achievable rate (BF16, or FP8 as TransformerEngine runs them),
  fused attention at the attention kernels' own rate with causal block skipping (unfused: batched matmuls over
  the full score matrix), the LM head in BF16, and a launch gap per kernel;
- hbm: element-wise traffic (``traffic``, FP8 casts included) at the GPU's achievable HBM bandwidth;
- TP: with sequence parallelism 2 all-gathers (FP8 under FP8) + 2 reduce-scatters per layer forward and again
  backward (and in the recomputed forward); without it 2 all-reduces each; exposed unless ``tp_comm_overlap``
  hides them under the layer's GEMMs;
- EP: all-to-all dispatch + combine per MoE layer, forward and backward, exposed;
- CP: ring exchange of K and V blocks per layer, overlapped with the attention compute;
- PP: the activation (forward) and its gradient (backward) to the neighbour stage, 1/tp of it from each TP rank
  (sequence parallelism, or Megatron-LM's scatter/gather with an all-gather on the receiver), exposed;
- ZeRO-3 / FSDP: per-layer weight gathers and gradient reduce-scatters, prefetched under each layer's compute.
Step = (m + bubble) x micro-batch time (``pipeline_bubble_fraction``: (pp - 1) / v once the pipeline fills,
pp - 1 when m < pp), + the data-parallel gradient sync and
parameter gather that the backward and forward windows cannot hide, + the optimizer update.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from math import ceil

import numpy as np

from fabricsim.caching import ByIdentity
from fabricsim.catalog import GPU
from fabricsim.comm import Cluster, GroupShape, cached_group_shape, collective_time, groups_comm
from fabricsim.errors import SpecError
from fabricsim.model import (
    ModelSpec,
    achievable_flops_per_s,
    attention_flops_per_s,
    forward_flops,
    gemm_flops_per_s,
    hbm_efficiency,
    k_efficiency,
    kernel_gap_s,
)
from fabricsim.training.elementwise import fp8_cast_bytes, grad_accumulation_bytes, layer_forward_bytes, optimizer_bytes
from fabricsim.training.flops import kv_replication_flops, layer_gemm_shapes, step_flops
from fabricsim.training.memory import MemoryReport, memory_report, stage_memory, stage_params
from fabricsim.training.placement import Placement, place, placement_warnings, widest_group
from fabricsim.training.plan import GRAD_DTYPE_BYTES, ParallelPlan, check_plan, stage_layers

LAYERS = ("compute", "hbm", "nvlink", "pcie", "infiniband", "ethernet", "pipeline_bubble")
ACT_BYTES = 2  # bf16 activations
FP8_BYTES = 1
# Kernels of one transformer layer's forward in Megatron-Core with TransformerEngine: norm, QKV GEMM, RoPE,
# attention, projection GEMM, bias-dropout-add, norm, two MLP GEMMs, activation, bias-dropout-add, + TP
# collectives; FP8 adds a quantise kernel per GEMM input. Backward and recompute launch as many per pass.
KERNELS_PER_LAYER_FORWARD = 12
FP8_CAST_KERNELS_PER_LAYER = 4
PARAM_BYTES = 2
DDP_BUCKET_PARAMS = 40_000_000  # Megatron-LM DDP bucket size (parameters)


@dataclass
class Breakdown:
    """Seconds per layer kind, exposed (on the critical path) and overlapped (hidden under other work)."""

    exposed: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LAYERS, 0.0))
    overlapped: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LAYERS, 0.0))

    def add(self, kind: str, seconds: float, hidden: float = 0.0) -> None:
        self.exposed[kind] += seconds
        self.overlapped[kind] += hidden

    def scaled(self, factor: float) -> Breakdown:
        return Breakdown({k: v * factor for k, v in self.exposed.items()},
                         {k: v * factor for k, v in self.overlapped.items()})

    def plus(self, other: Breakdown) -> Breakdown:
        return Breakdown({k: self.exposed[k] + other.exposed[k] for k in LAYERS},
                         {k: self.overlapped[k] + other.overlapped[k] for k in LAYERS})

    @property
    def exposed_total(self) -> float:
        return sum(self.exposed.values())


@dataclass(frozen=True)
class TrainingPrediction:
    step_time_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    mfu: float
    memory: MemoryReport
    breakdown: Breakdown
    bottleneck: str
    warnings: tuple[str, ...]
    gpus: int
    nodes: int

    @property
    def breakdown_s(self) -> dict[str, float]:
        return {k: self.breakdown.exposed[k] + self.breakdown.overlapped[k] for k in LAYERS}

    def to_json(self) -> dict[str, object]:
        return {
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "memory_per_gpu_bytes": self.memory.total_bytes,
            "memory": {"weights_bytes": self.memory.weights_bytes, "gradients_bytes": self.memory.gradients_bytes,
                       "optimizer_bytes": self.memory.optimizer_bytes,
                       "activations_bytes": self.memory.activations_bytes,
                       "capacity_bytes": self.memory.capacity_bytes, "summary": self.memory.summary()},
            "fits": self.memory.fits,
            "breakdown_s": self.breakdown_s,
            "exposed_s": dict(self.breakdown.exposed),
            "overlapped_s": dict(self.breakdown.overlapped),
            "bottleneck": self.bottleneck,
            "warnings": list(self.warnings),
            "gpus": self.gpus,
            "nodes": self.nodes,
        }


def _group_shape_of(cluster: Cluster, plan: ParallelPlan, kind: str, widest: bool) -> GroupShape | None:
    """``_group_shape`` of the widest (or first) group of a kind, its layout cached per plan and node size."""
    layout = _group_layout(plan, kind, cluster.system.gpus_per_node, widest)
    return None if layout is None else cached_group_shape(cluster, *layout)


@lru_cache(maxsize=65536)
def _group_layout(plan: ParallelPlan, kind: str, gpus_per_node: int, widest: bool) -> tuple[int, int] | None:
    """(ranks, most ranks on one node) of a group kind; None for groups of one (no collective)."""
    placement = place(plan)
    row = (widest_group(placement, kind, gpus_per_node) if widest
           else placement.first_group(kind))
    if len(row) < 2:
        return None
    return len(row), int(np.bincount(row // gpus_per_node).max())


def _fabric_comm(cluster: Cluster, plan: ParallelPlan, kind: str, shape: GroupShape | None, op: str,
                 size: float) -> tuple[float, str]:
    """A collective of every group of ``kind``: on the flow simulator when the cluster asks for it and the groups
    cross nodes, else one group alone by the analytical model."""
    if cluster.sim != "flow" or shape is None or shape.nnodes < 2 or size <= 0:
        return collective_time(shape, op, size, cluster.catalog)
    return _flow_comm(ByIdentity(cluster), plan.tp, plan.cp, plan.ep, plan.dp, plan.pp, plan.order, kind, op, size)


@lru_cache(maxsize=4096)
def _flow_comm(cluster_ref: ByIdentity[Cluster], tp: int, cp: int, ep: int, dp: int, pp: int, order: str,
               kind: str, op: str, size: float) -> tuple[float, str]:
    """``groups_comm`` for the groups of ``kind`` of a plan layout (cached: only the layout matters)."""
    plan = ParallelPlan.build(tp=tp, cp=cp, ep=ep, dp=dp, pp=pp, order=order, seq=2 * cp * tp, gbs=dp)
    return groups_comm(cluster_ref.value, place(plan).groups(kind), plan.world_size, op, size)


@dataclass(frozen=True)
class _LayerComms:
    """Per-layer and per-micro-batch communication costs of a plan, priced once on its real groups."""

    tp_per_layer_pass: tuple[float, str]
    tp_bf16_per_layer_pass: tuple[float, str]  # the same without FP8 gathers (stages that keep BF16 GEMMs)
    ep_per_layer_pass: tuple[float, str]
    cp_per_layer_step: tuple[float, str]
    pp_per_send: tuple[float, str]
    pp_gather: tuple[float, str]  # receiver's all-gather of the scattered activation (TP without sequence parallel)


_COMMS_CACHE: dict[tuple[object, ...], _LayerComms] = {}
COMMS_CACHE_SIZE = 65536


def _layer_comms(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, placement: Placement) -> _LayerComms:
    """``_price_layer_comms``, cached on the plan fields it reads (plans differing in recompute, ZeRO, pipeline
    interleaving or batch share their layer collectives)."""
    key = (ByIdentity(model), ByIdentity(cluster), plan.tp, plan.cp, plan.ep, plan.dp, plan.pp, plan.mbs, plan.seq,
           plan.precision, plan.sequence_parallel, plan.order)
    found = _COMMS_CACHE.get(key)
    if found is None:
        if len(_COMMS_CACHE) >= COMMS_CACHE_SIZE:
            _COMMS_CACHE.clear()
        found = _COMMS_CACHE[key] = _price_layer_comms(model, plan, cluster, placement)
    return found


def _price_layer_comms(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, placement: Placement) -> _LayerComms:
    cat = cluster.catalog

    def widest(kind: str) -> GroupShape | None:
        return _group_shape_of(cluster, plan, kind, True)

    act = plan.mbs * plan.seq / plan.cp * model.hidden * ACT_BYTES
    tp_shape = widest("tp")

    def tp_pass(gather_bytes_per_element: float) -> tuple[float, str]:
        if tp_shape is None:
            return 0.0, "nvlink"
        if plan.sequence_parallel:
            t_ag, kind = collective_time(tp_shape, "all_gather", act * gather_bytes_per_element / ACT_BYTES, cat)
            t_rs, _ = collective_time(tp_shape, "reduce_scatter", act, cat)
            return 2 * (t_ag + t_rs), kind
        t_ar, kind = collective_time(tp_shape, "all_reduce", act, cat)
        return 2 * t_ar, kind

    # TransformerEngine gathers the FP8-cast input under FP8 (1 byte/element); reduce-scatters stay bf16.
    tp_bf16 = tp_pass(ACT_BYTES)
    tp = tp_pass(FP8_BYTES) if plan.precision == "fp8" else tp_bf16
    ep = (0.0, "nvlink")
    if model.moe is not None and plan.ep > 1:
        t_a2a, kind = _fabric_comm(cluster, plan, "ep", widest("ep"), "all_to_all",
                                   act / plan.tp * model.moe.top_k)
        ep = (2 * t_a2a, kind)
    cp = (0.0, "nvlink")
    if plan.cp > 1:
        kv_block = 2 * plan.mbs * plan.seq / plan.cp * model.kv_dim * ACT_BYTES / plan.tp
        cp = collective_time(widest("cp"), "send_recv", kv_block, cat)
    pp = pp_gather = (0.0, "nvlink")
    if plan.pp > 1:
        # Each TP rank sends 1/tp of the activation on its own NIC: with sequence parallelism it is already split;
        # without, Megatron-LM's scatter/gather optimisation (Narayanan et al. SC21 sec. 4.1; on unless
        # --no-scatter-gather-tensors-in-pipeline) splits it and the receiver all-gathers it over the TP group.
        pp_shape = _group_shape_of(cluster, plan, "pp", False)
        pair = None if pp_shape is None else cached_group_shape(cluster, 2, 1 if pp_shape.nnodes > 1 else 2)
        pp = collective_time(pair, "send_recv", act / plan.tp, cat)
        if tp_shape is not None and not plan.sequence_parallel:
            pp_gather = collective_time(tp_shape, "all_gather", act, cat)
    return _LayerComms(tp, tp_bf16, ep, cp, pp, pp_gather)


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


def _stage_compute(model: ModelSpec, plan: ParallelPlan, gpu: GPU, layers: list[int], last: bool,
                   precision: str) -> _StageCompute:
    """Matmul time of one micro-batch on a stage: weight GEMMs at the plan precision's achievable rate, fused
    attention at the attention kernels' rate (causal: block skipping halves it) or, unfused, as batched matmuls at
    the BF16 GEMM rate, the LM head in BF16 (Megatron keeps its output layer out of FP8)."""
    share = plan.tp * plan.cp
    fwd = forward_flops(model, plan.mbs, plan.seq, layers=layers, lm_head=last, causal=plan.flash_attention)
    gemm_flops = fwd.linear / share + kv_replication_flops(model, plan, len(layers))
    bf16 = achievable_flops_per_s(gpu)
    attention_rate = attention_flops_per_s(gpu) if plan.flash_attention else bf16
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


def _shape_efficiency(model: ModelSpec, plan: ParallelPlan, gpu: GPU, layers: list[int], precision: str) -> float:
    """FLOP-weighted efficiency of the stage's weight GEMMs relative to the best shape, from each GEMM's reduction
    depth: forward (K = its input width), backward-data (K = its output width), weight gradient (K = tokens).
    Layers of one kind (dense or MoE) have the same GEMMs, so each kind is priced once."""
    tokens = plan.mbs * plan.seq / plan.cp
    flops = slowed = 0.0
    moe = sum(1 for i in layers if model.is_moe_layer(i))
    for index, count in ((next((i for i in layers if model.is_moe_layer(i)), -1), moe),
                         (next((i for i in layers if not model.is_moe_layer(i)), -1), len(layers) - moe)):
        if count == 0:
            continue
        shapes = np.array(layer_gemm_shapes(model, plan, index))  # rows: (forward FLOPs, forward K, dgrad K)
        ks = np.column_stack([shapes[:, 1], shapes[:, 2], np.full(len(shapes), tokens)])
        flops += count * 3 * float(shapes[:, 0].sum())
        slowed += count * float((shapes[:, 0, None] / k_efficiency(ks, gpu, precision)).sum())
    return flops / slowed if slowed > 0 else 1.0


@dataclass(frozen=True)
class _StageWork:
    """The network-independent part of one micro-batch on a stage: matmul time by pass, element-wise HBM time,
    and whether FP8 was dropped for BF16 (the TP gathers then stay BF16 too)."""

    work: _StageCompute
    hbm_s: float
    bf16_fallback: bool


def _stage_work(model: ModelSpec, plan: ParallelPlan, gpu: GPU, stage: int, layers: list[int]) -> _StageWork:
    """Cached per model, plan, GPU and stage: a sizing search prices the same plan on many networks."""
    return _cached_stage_work(ByIdentity(model), plan, ByIdentity(gpu), stage)


@lru_cache(maxsize=16384)
def _cached_stage_work(model_ref: ByIdentity[ModelSpec], plan: ParallelPlan, gpu_ref: ByIdentity[GPU],
                       stage: int) -> _StageWork:
    model, gpu = model_ref.value, gpu_ref.value
    layers = list(_stage_layers(model, plan)[stage])
    last = stage == plan.pp - 1
    hbm_rate = gpu.hbm_bytes_per_s * hbm_efficiency(gpu).value
    recompute_passes = 1.0 if plan.recompute == "full" else 0.0
    work = _stage_compute(model, plan, gpu, layers, last, plan.precision)
    casts = sum(fp8_cast_bytes(model, plan, i, backward=False) * (1.0 + recompute_passes)
                + fp8_cast_bytes(model, plan, i, backward=True) for i in layers)
    fallback = False
    if plan.precision == "fp8":  # FP8 GEMMs only where they pay for their casts (else the stage stays BF16)
        bf16 = _stage_compute(model, plan, gpu, layers, last, "bf16")
        if bf16.total_s <= work.total_s + casts / hbm_rate:
            work, casts, fallback = bf16, 0.0, True
    fwd_bytes = sum(layer_forward_bytes(model, plan, i) for i in layers)
    held = stage_params(model, plan, stage)
    hbm_bytes = fwd_bytes * (3.0 + recompute_passes) + casts + grad_accumulation_bytes(held.dense + held.expert)
    return _StageWork(work, hbm_bytes / hbm_rate, fallback)


def _microbatch(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, comms: _LayerComms, stage: int,
                layers: list[int]) -> tuple[Breakdown, _StageCompute]:
    """Breakdown of one micro-batch (forward + backward, with recompute) on one GPU of ``stage``; also returns
    its compute by pass (the windows in which gradient reduction and parameter gathers can hide)."""
    gpu = cluster.catalog.gpu(cluster.system.gpu)
    out = Breakdown()
    recompute_passes = 1.0 if plan.recompute == "full" else 0.0
    staged = _stage_work(model, plan, gpu, stage, layers)
    work, hbm_s = staged.work, staged.hbm_s
    tp_pass = comms.tp_bf16_per_layer_pass if staged.bf16_fallback else comms.tp_per_layer_pass
    out.add("compute", work.total_s)
    out.add("hbm", hbm_s)
    passes = 2.0 + recompute_passes  # forward, backward (same collectives), recomputed forward
    t_tp, kind = tp_pass
    if t_tp > 0:
        per_layer_pass = t_tp
        hidden = 0.0
        if plan.tp_comm_overlap:  # TE userbuffers: chunked AG/RS pipelined with the layer's GEMMs
            gemm_per_layer_pass = work.gemm_fwd_s / len(layers) * (3.0 + recompute_passes) / passes
            hidden = min(per_layer_pass, gemm_per_layer_pass)
        out.add(kind, (per_layer_pass - hidden) * len(layers) * passes, hidden * len(layers) * passes)
    if model.moe is not None and plan.ep > 1:
        t_ep, kind = comms.ep_per_layer_pass
        out.add(kind, t_ep * sum(1 for i in layers if model.is_moe_layer(i)) * passes)
    if plan.cp > 1:
        t_step, kind = comms.cp_per_layer_step
        t_cp = t_step * (plan.cp - 1) * len(layers) * (passes + 1.0)  # backward also returns dK, dV
        attention_s = work.attention_fwd_s * (3.0 + work.recompute_attention)
        hidden = min(t_cp, attention_s)
        out.add(kind, t_cp - hidden, hidden)
    if plan.pp > 1:
        t_p2p, kind = comms.pp_per_send
        out.add(kind, 2 * t_p2p * plan.virtual_stages)
        t_gather, gather_kind = comms.pp_gather
        if t_gather > 0:
            out.add(gather_kind, 2 * t_gather * plan.virtual_stages)
    if plan.zero >= 3:
        forward_share = 1.0 / (3.0 + recompute_passes)  # of the element-wise work: one forward of all passes
        other_s = hbm_s + work.kernel_gaps_s  # element-wise kernels and launch gaps, split like the passes
        out = out.plus(_fsdp_layers(model, plan, cluster, stage, layers,
                                    work.forward_s + other_s * forward_share,
                                    work.backward_s + other_s * (1.0 - forward_share)))
    return out, work


def _fsdp_layers(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, stage: int, layers: list[int],
                 forward_s: float, backward_s: float) -> Breakdown:
    """ZeRO-3 / FSDP, per micro-batch: each layer's weights are all-gathered before its forward and again before
    its backward (and before its recomputed forward: the weights were freed after the forward, ZeRO-3 as in
    DeepSpeed), and its gradients reduce-scattered after its backward. The next layer's gather is prefetched
    under the current layer's work (its matmuls and element-wise kernels, ``forward_s`` / ``backward_s`` of the
    stage), so per layer only what exceeds that work is exposed, and the first gather of each pass whole."""
    out = Breakdown()
    params = stage_params(model, plan, stage)
    n = max(1, len(layers))
    for count, group_kind, shards in ((params.dense, "dp_cp", plan.dp * plan.cp),
                                      (params.expert, "edp", plan.expert_dp)):
        if count <= 0 or shards < 2:
            continue
        shape = _group_shape_of(cluster, plan, group_kind, False)
        per_layer = count / n
        t_gather, link = collective_time(shape, "all_gather", per_layer * PARAM_BYTES, cluster.catalog)
        t_rs, _ = collective_time(shape, "reduce_scatter", per_layer * GRAD_DTYPE_BYTES[plan.grad_dtype],
                                  cluster.catalog)
        fwd_layer = forward_s / n
        bwd_layer = backward_s / n
        gathers_bwd = 2.0 if plan.recompute == "full" else 1.0
        fwd_exposed = max(0.0, t_gather - fwd_layer) * (n - 1) + t_gather
        bwd_comm = gathers_bwd * t_gather + t_rs
        bwd_exposed = max(0.0, bwd_comm - bwd_layer) * (n - 1) + t_gather
        total = n * (t_gather + bwd_comm)
        exposed = min(total, fwd_exposed + bwd_exposed)
        out.add(link, exposed, total - exposed)
    return out


def _gradient_sync(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, placement: Placement, stage: int,
                   work: _StageCompute) -> Breakdown:
    """Data-parallel gradient reduction and (ZeRO-1/2) parameter all-gather, once per step.

    With overlap, the reduction of each bucket runs during the last micro-batch's backward (only what exceeds
    that window, and at least the last bucket, is exposed), and the parameter gather of the distributed
    optimizer during the next step's first forward. ZeRO-3 moves its traffic into every micro-batch
    (``_fsdp_layers``)."""
    out = Breakdown()
    if plan.zero >= 3:
        return out
    params = stage_params(model, plan, stage)
    for kind_name, count, shards in (("dp_cp", params.dense, plan.dp * plan.cp), ("edp", params.expert,
                                                                                   plan.expert_dp)):
        if count <= 0 or shards < 2:
            continue
        shape = _group_shape_of(cluster, plan, kind_name, False)
        grads = count * GRAD_DTYPE_BYTES[plan.grad_dtype]
        last_bucket = min(1.0, DDP_BUCKET_PARAMS / count)
        if plan.zero == 0:
            t, link = _fabric_comm(cluster, plan, kind_name, shape, "all_reduce", grads)
            gather = 0.0
        else:
            t, link = _fabric_comm(cluster, plan, kind_name, shape, "reduce_scatter", grads)
            gather, _ = _fabric_comm(cluster, plan, kind_name, shape, "all_gather", count * PARAM_BYTES)
        exposed = max(t - work.backward_s, t * last_bucket) if plan.overlap_grad_reduce else t
        out.add(link, exposed, t - exposed)
        gather_exposed = (max(gather - work.forward_s, gather * last_bucket) if plan.overlap_param_gather
                          else gather)
        out.add(link, gather_exposed, gather - gather_exposed)
    return out


def pipeline_bubble_fraction(pp: int, microbatches: int, virtual_stages: int) -> float:
    """Idle time of a stage per step, in micro-batch times: (pp - 1) / v for 1F1B and interleaved 1F1B when the
    pipeline fills (m >= pp; Narayanan et al. SC21 sec. 2.2); with fewer micro-batches than stages no stage ever
    holds pp micro-batches, each chunk waits for the whole pipeline's pass, and interleaving saves nothing: every
    stage idles for the full fill and drain, pp - 1 micro-batch times. (One plan of ``pipeline_bubble_fractions``.)"""
    return float(pipeline_bubble_fractions(np.array([pp]), np.array([microbatches]), np.array([virtual_stages]))[0])


def _stage_layers(model: ModelSpec, plan: ParallelPlan) -> tuple[tuple[int, ...], ...]:
    """``stage_layers``, cached per model and plan."""
    return _cached_stage_layers(ByIdentity(model), plan)


@lru_cache(maxsize=16384)
def _cached_stage_layers(model: ByIdentity[ModelSpec], plan: ParallelPlan) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(stage) for stage in stage_layers(model.value, plan))


@lru_cache(maxsize=256)
def _moe_flags(model: ModelSpec) -> tuple[int, ...]:
    return tuple(int(model.is_moe_layer(i)) for i in range(model.layers))


def _memory(model: ModelSpec, plan: ParallelPlan, gpu: GPU, stages: list[int]) -> MemoryReport:
    """Memory of the fullest stage among the candidates (first, last and the one with most layers): the
    stages in between hold the same layers and fewer micro-batches in flight than the first."""
    if plan.pp <= 4:
        return memory_report(model, plan, gpu)
    reports = [stage_memory(model, plan, s, gpu.hbm_bytes) for s in stages]
    return max(reports, key=lambda r: r.total_bytes)


@dataclass(frozen=True)
class StepTerms:
    """The parts of a step that do not depend on the global batch, per layer kind in ``LAYERS`` order: one
    micro-batch on the slowest stage, the data-parallel sync and the optimizer update. A sizing search prices
    them once per plan shape and assembles every batch size with ``assemble_steps``."""

    microbatch_exposed: tuple[float, ...]
    microbatch_overlapped: tuple[float, ...]
    sync_exposed: tuple[float, ...]
    sync_overlapped: tuple[float, ...]
    optimizer_s: float
    pp: int
    virtual_stages: int

    @property
    def microbatch_s(self) -> float:
        return sum(self.microbatch_exposed)


@dataclass(frozen=True)
class StepArrays:
    """Per-layer seconds of whole steps for many micro-batch counts: rows are plans, columns ``LAYERS``."""

    exposed: np.ndarray
    overlapped: np.ndarray
    step_time_s: np.ndarray
    bottleneck: np.ndarray  # index into LAYERS of the largest exposed layer (the first on ties)


def pipeline_bubble_fractions(pp: np.ndarray, microbatches: np.ndarray, virtual_stages: np.ndarray) -> np.ndarray:
    """``pipeline_bubble_fraction`` for many plans at once (arrays of pp, micro-batch counts, virtual stages)."""
    return np.where(microbatches >= pp, (pp - 1) / virtual_stages, (pp - 1).astype(np.float64))


def assemble_steps(microbatch_exposed: np.ndarray, microbatch_overlapped: np.ndarray, sync_exposed: np.ndarray,
                   sync_overlapped: np.ndarray, optimizer_s: np.ndarray, pp: np.ndarray, virtual_stages: np.ndarray,
                   microbatches: np.ndarray) -> StepArrays:
    """Whole steps from their terms, one row per plan: (m + bubble) x micro-batch + sync + optimizer, each layer
    kind summed in ``LAYERS`` order (``predict_training`` runs this on one row, so both agree to the bit)."""
    m = microbatches.astype(np.float64)
    mb_total = np.zeros(len(m))
    for k in range(len(LAYERS)):
        mb_total = mb_total + microbatch_exposed[:, k]
    bubble = pipeline_bubble_fractions(pp, microbatches, virtual_stages) * mb_total
    exposed = microbatch_exposed * m[:, None]
    exposed[:, LAYERS.index("pipeline_bubble")] += bubble
    exposed = exposed + sync_exposed
    exposed[:, LAYERS.index("hbm")] += optimizer_s
    overlapped = microbatch_overlapped * m[:, None] + sync_overlapped
    step = np.zeros(len(m))
    for k in range(len(LAYERS)):
        step = step + exposed[:, k]
    return StepArrays(exposed, overlapped, step, np.argmax(exposed, axis=1))


def _vector(values: dict[str, float]) -> tuple[float, ...]:
    return tuple(values[k] for k in LAYERS)


@dataclass(frozen=True)
class _PlanLayout:
    """What a plan's step needs of its stages, independent of the cluster: one representative stage per layer mix
    (stages with the same mix cost the same) and the stage whose parameters are the most and their count."""

    representatives: tuple[tuple[int, tuple[int, ...]], ...]  # (stage, its layers), first stage of each mix
    worst_params_stage: int
    owned_params: float  # parameters whose optimizer state that stage's GPU updates


def _plan_layout(model: ModelSpec, plan: ParallelPlan) -> _PlanLayout:
    return _cached_plan_layout(ByIdentity(model), plan)


@lru_cache(maxsize=16384)
def _cached_plan_layout(model_ref: ByIdentity[ModelSpec], plan: ParallelPlan) -> _PlanLayout:
    model = model_ref.value
    layers_by_stage = _stage_layers(model, plan)
    moe_flags = _moe_flags(model)
    seen: set[tuple[int, int, bool, bool]] = set()
    representatives = []
    for s in range(plan.pp):
        layers = layers_by_stage[s]
        key = (len(layers), sum(moe_flags[i] for i in layers), s == 0, s == plan.pp - 1)
        if key not in seen:
            seen.add(key)
            representatives.append((s, layers))
    worst = max(_memory_stages(model, plan), key=lambda s: stage_params(model, plan, s).dense)
    p = stage_params(model, plan, worst)
    owned = p.dense / (plan.dp * plan.cp if plan.zero >= 1 else 1) + p.expert / (plan.expert_dp if plan.zero >= 1
                                                                                 else 1)
    return _PlanLayout(tuple(representatives), worst, owned)


def step_terms(model: ModelSpec, plan: ParallelPlan, cluster: Cluster) -> StepTerms:
    """Price a plan's micro-batch, gradient sync and optimizer update (independent of gbs)."""
    sysm = cluster.system
    placement = place(plan)
    layout = _plan_layout(model, plan)
    comms = _layer_comms(model, plan, cluster, placement)
    # stages with the same layer mix cost the same: price each mix once
    priced = [_microbatch(model, plan, cluster, comms, s, list(layers)) for s, layers in layout.representatives]
    mb, work = max(priced, key=lambda r: r[0].exposed_total)
    sync = _gradient_sync(model, plan, cluster, placement, layout.worst_params_stage, work)
    gpu = cluster.catalog.gpu(sysm.gpu)
    optimizer_s = optimizer_bytes(layout.owned_params) / (gpu.hbm_bytes_per_s * hbm_efficiency(gpu).value)
    return StepTerms(_vector(mb.exposed), _vector(mb.overlapped), _vector(sync.exposed), _vector(sync.overlapped),
                     optimizer_s, plan.pp, plan.virtual_stages)


def _memory_stages(model: ModelSpec, plan: ParallelPlan) -> list[int]:
    """The stages whose memory and parameters can be the largest: first, last and the one with most layers."""
    layers_by_stage = _stage_layers(model, plan)
    return sorted({0, plan.pp - 1, max(range(plan.pp), key=lambda s: len(layers_by_stage[s]))})


def plan_memory(model: ModelSpec, plan: ParallelPlan, cluster: Cluster) -> MemoryReport:
    """The per-GPU memory ``predict_training`` reports for a plan."""
    return _memory(model, plan, cluster.catalog.gpu(cluster.system.gpu), _memory_stages(model, plan))


def predict_training(model: ModelSpec, plan: ParallelPlan, cluster: Cluster) -> TrainingPrediction:
    """Step time, throughput, memory and the per-layer breakdown of one training step."""
    warnings = list(check_plan(model, plan))
    sysm = cluster.system
    gpus = plan.world_size
    nodes = ceil(gpus / sysm.gpus_per_node)
    if gpus % sysm.gpus_per_node and gpus > sysm.gpus_per_node:
        raise SpecError(f"{gpus} GPUs do not fill whole {sysm.id} nodes of {sysm.gpus_per_node}", field="--gpus")
    warnings += placement_warnings(place(plan), sysm.nvlink_domain_gpus)
    terms = step_terms(model, plan, cluster)
    steps = assemble_steps(np.array([terms.microbatch_exposed]), np.array([terms.microbatch_overlapped]),
                           np.array([terms.sync_exposed]), np.array([terms.sync_overlapped]),
                           np.array([terms.optimizer_s]), np.array([plan.pp]), np.array([plan.virtual_stages]),
                           np.array([plan.microbatches]))
    total = Breakdown({k: float(steps.exposed[0, i]) for i, k in enumerate(LAYERS)},
                      {k: float(steps.overlapped[0, i]) for i, k in enumerate(LAYERS)})
    step_time = float(steps.step_time_s[0])
    gpu = cluster.catalog.gpu(sysm.gpu)
    flops = step_flops(model, plan, causal=plan.flash_attention)
    model_flops = step_flops(model, plan).model_flops  # MFU convention: attention unmasked (Megatron, PaLM)
    mem = plan_memory(model, plan, cluster)
    if not mem.fits:
        warnings.append(mem.summary())
    bottleneck = LAYERS[int(steps.bottleneck[0])]
    return TrainingPrediction(
        step_time_s=step_time,
        tokens_per_s=plan.tokens_per_step() / step_time,
        tflops_per_gpu=flops.hardware_flops / step_time / gpus / 1e12,
        mfu=model_flops / (step_time * gpus * gpu.bf16_flops_per_s),
        memory=mem,
        breakdown=total,
        bottleneck=bottleneck,
        warnings=tuple(warnings),
        gpus=gpus,
        nodes=nodes,
    )
