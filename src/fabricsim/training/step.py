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

from dataclasses import dataclass
from math import ceil

import numpy as np

from fabricsim.caching import BoundedMemo, ByIdentity
from fabricsim.catalog import GPU, roadmap_warning
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.model import ModelSpec, achievable_hbm_bytes_per_s
from fabricsim.training.comms import _layer_comms
from fabricsim.training.elementwise import optimizer_bytes
from fabricsim.training.floor import StageFloor, stage_floor
from fabricsim.training.flops import mfu_peak, step_flops
from fabricsim.training.memory import MemoryReport, StageParams, memory_report, stage_memory, stage_params
from fabricsim.training.placement import place, placement_warnings
from fabricsim.training.plan import ParallelPlan, check_plan, stage_key, stage_layers
from fabricsim.training.result import LAYERS, Breakdown, StepTerms, TrainingPrediction, _vector
from fabricsim.training.schedule import _gradient_sync, _microbatch, assemble_steps
from fabricsim.training.stage import _moe_flags


def _memory(model: ModelSpec, plan: ParallelPlan, gpu: GPU, stages: list[int]) -> MemoryReport:
    """Memory of the fullest stage among the candidates (first, last and the one with most layers): the
    stages in between hold the same layers and fewer micro-batches in flight than the first."""
    if plan.pp <= 4:
        return memory_report(model, plan, gpu)
    reports = [stage_memory(model, plan, s, gpu.hbm_bytes) for s in stages]
    return max(reports, key=lambda r: r.total_bytes)


@dataclass(frozen=True)
class _PlanLayout:
    """What a plan's step needs of its stages, independent of the cluster, data parallelism and batch: one
    representative stage per layer mix (stages with the same mix cost the same) and the stage whose parameters
    are the most, with its parameters."""

    representatives: tuple[tuple[int, tuple[int, ...]], ...]  # (stage, its layers), first stage of each mix
    worst_params_stage: int
    worst_params: StageParams


_PLAN_LAYOUTS: BoundedMemo[_PlanLayout] = BoundedMemo(16384)


def _plan_layout(model: ModelSpec, plan: ParallelPlan) -> _PlanLayout:
    """Cached per model and the plan fields the layout reads (`stage_key`)."""
    return _PLAN_LAYOUTS.get((ByIdentity(model), stage_key(plan)), lambda: _new_plan_layout(model, plan))


def _new_plan_layout(model: ModelSpec, plan: ParallelPlan) -> _PlanLayout:
    layers_by_stage = stage_layers(model, plan)
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
    return _PlanLayout(tuple(representatives), worst, stage_params(model, plan, worst))


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
    optimizer_s = _optimizer_s(plan, layout, cluster.catalog.gpu(sysm.gpu))
    return StepTerms(_vector(mb.exposed), _vector(mb.overlapped), _vector(sync.exposed), _vector(sync.overlapped),
                     optimizer_s, plan.pp, plan.virtual_stages)


def microbatch_floor(model: ModelSpec, plan: ParallelPlan, cluster: Cluster) -> tuple[float, float]:
    """A lower bound of a plan's micro-batch time that needs no network: its slowest stage's compute and HBM time
    (every other term of a micro-batch is a collective's exposed part, >= 0), and its optimizer update. So
    step >= (m + bubble) x floor + optimizer for any cluster of the same GPU: what a sizing search bounds by."""
    floor, optimizer_s, _ = plan_floor(model, plan, cluster)
    return floor.floor_s, optimizer_s


def plan_floor(model: ModelSpec, plan: ParallelPlan, cluster: Cluster) -> tuple[StageFloor, float, int]:
    """A plan's network-free floor with what its communication bound reads (`training.floor`), its optimizer
    update, and the stage whose parameters the data-parallel sync moves (the floor part is cached on
    `stage_key`: it reads no more)."""
    gpu = cluster.catalog.gpu(cluster.system.gpu)
    layout = _plan_layout(model, plan)
    key = (ByIdentity(model), ByIdentity(gpu), stage_key(plan))
    floor = _FLOORS.get(key, lambda: stage_floor(model, plan, gpu, layout.representatives))
    return floor, _optimizer_s(plan, layout, gpu), layout.worst_params_stage


_FLOORS: BoundedMemo[StageFloor] = BoundedMemo(1 << 16)


def _optimizer_s(plan: ParallelPlan, layout: _PlanLayout, gpu: GPU) -> float:
    """The optimizer update of the GPU with the most parameters: the state it owns (its ZeRO shard) through HBM."""
    p = layout.worst_params
    sharded = plan.zero >= 1
    owned = p.dense / (plan.dp * plan.cp if sharded else 1) + p.expert / (plan.expert_dp if sharded else 1)
    return optimizer_bytes(owned) / achievable_hbm_bytes_per_s(gpu)


def _memory_stages(model: ModelSpec, plan: ParallelPlan) -> list[int]:
    """The stages whose memory and parameters can be the largest: first, last and the one with most layers."""
    layers_by_stage = stage_layers(model, plan)
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
    roadmap = roadmap_warning(sysm)
    if roadmap is not None:
        warnings.append(roadmap)
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
        model_tflops_per_gpu=model_flops / step_time / gpus / 1e12,
        peak_tflops_per_gpu=mfu_peak(gpu, plan.precision) / 1e12,
        peak_precision=plan.precision,
        memory=mem,
        breakdown=total,
        bottleneck=bottleneck,
        warnings=tuple(warnings),
        gpus=gpus,
        nodes=nodes,
        sharded=plan.zero >= 3,
    )
