"""Training step time: compute, HBM, and every collective of the step on its real process group, composed with
the pipeline schedule and the overlap frameworks do, into a per-layer (link kind) breakdown.

Per micro-batch on the slowest pipeline stage:
- compute: the stage's hardware FLOPs at the GPU's achievable matmul rate;
- hbm: element-wise traffic (``traffic``) at the GPU's achievable HBM bandwidth;
- TP: with sequence parallelism 2 all-gathers + 2 reduce-scatters per layer forward and again backward (and in
  the recomputed forward); without it 2 all-reduces each; exposed (Megatron does not overlap them by default);
- EP: all-to-all dispatch + combine per MoE layer, forward and backward, exposed;
- CP: ring exchange of K and V blocks per layer, overlapped with the attention compute;
- PP: the activation (forward) and its gradient (backward) to the neighbour stage, 1/tp of it with sequence
  parallelism, exposed.
Step = (m + (pp - 1) / v) x micro-batch time (1F1B / interleaved bubble), + the data-parallel gradient sync that
the last micro-batch's backward cannot hide, + the optimizer update.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from math import ceil

import numpy as np

from fabricsim.caching import ByIdentity
from fabricsim.catalog import GPU, Catalog, System, default_catalog
from fabricsim.collectives import CollectiveModel, GroupShape, group_shape
from fabricsim.errors import SpecError
from fabricsim.workload.compute import achievable_flops_per_s, hbm_efficiency
from fabricsim.workload.flops import forward_flops, stage_microbatch_flops, step_flops
from fabricsim.workload.memory import MemoryReport, memory_report, stage_memory, stage_params
from fabricsim.workload.placement import Placement, place, placement_warnings, widest_group
from fabricsim.workload.plan import ParallelPlan, check_plan, stage_layers
from fabricsim.workload.spec import ModelSpec
from fabricsim.workload.traffic import grad_accumulation_bytes, layer_forward_bytes, optimizer_bytes

LAYERS = ("compute", "hbm", "nvlink", "pcie", "infiniband", "ethernet", "pipeline_bubble")
ACT_BYTES = 2  # bf16 activations
MAIN_GRAD_BYTES = 4  # Megatron reduces bf16-trained gradients in fp32 (accumulate_allreduce_grads_in_fp32)
PARAM_BYTES = 2
DDP_BUCKET_PARAMS = 40_000_000  # Megatron-LM DDP bucket size (parameters)


@dataclass(frozen=True, eq=False)
class Cluster:
    """Where the job runs: a system preset, the network between nodes and its oversubscription."""

    system: System
    fabric: str | None = None
    oversubscription: float = 1.0
    catalog: Catalog = field(default_factory=default_catalog)


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


def _group_shape(cluster: Cluster, row: np.ndarray) -> GroupShape | None:
    """Shape of the first group of a kind (all groups of a kind have the same shape on uniform nodes)."""
    if len(row) < 2:
        return None
    per_node = np.bincount(row // cluster.system.gpus_per_node)
    return _cached_shape(cluster, len(row), int(per_node.max()))


def _cached_shape(cluster: Cluster, nranks: int, ppn: int) -> GroupShape:
    """Group shapes cached per catalog, system, fabric and group layout (clusters built alike share them)."""
    return _shape(ByIdentity(cluster.catalog), cluster.system, cluster.fabric, cluster.oversubscription,
                  nranks, ppn)


@lru_cache(maxsize=65536)
def _shape(catalog: ByIdentity[Catalog], system: System, fabric: str | None, oversubscription: float,
           nranks: int, ppn: int) -> GroupShape:
    return group_shape(system, nranks, ranks_per_node=ppn, fabric=fabric, oversubscription=oversubscription,
                       catalog=catalog.value)


def _comm(shape: GroupShape | None, op: str, size: float, catalog: Catalog) -> tuple[float, str]:
    """Time of one collective and the link kind it loads most."""
    if shape is None or size <= 0:
        return 0.0, "nvlink"
    choice = CollectiveModel(shape, catalog=catalog).choose(op, size)
    kind = max(choice.cost.per_byte_s.items(), key=lambda kv: kv[1])[0] if choice.cost.per_byte_s else "nvlink"
    return choice.cost.time_s(size), kind


@dataclass(frozen=True)
class _LayerComms:
    """Per-layer and per-micro-batch communication costs of a plan, priced once on its real groups."""

    tp_per_layer_pass: tuple[float, str]
    ep_per_layer_pass: tuple[float, str]
    cp_per_layer_step: tuple[float, str]
    pp_per_send: tuple[float, str]


def _layer_comms(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, placement: Placement) -> _LayerComms:
    cat = cluster.catalog

    def widest(kind: str) -> GroupShape | None:
        return _group_shape(cluster, widest_group(placement, kind, cluster.system.gpus_per_node))

    act = plan.mbs * plan.seq / plan.cp * model.hidden * ACT_BYTES
    tp = (0.0, "nvlink")
    tp_shape = widest("tp")
    if tp_shape is not None:
        if plan.sequence_parallel:
            t_ag, kind = _comm(tp_shape, "all_gather", act, cat)
            t_rs, _ = _comm(tp_shape, "reduce_scatter", act, cat)
            tp = (2 * (t_ag + t_rs), kind)
        else:
            t_ar, kind = _comm(tp_shape, "all_reduce", act, cat)
            tp = (2 * t_ar, kind)
    ep = (0.0, "nvlink")
    if model.moe is not None and plan.ep > 1:
        t_a2a, kind = _comm(widest("ep"), "all_to_all",
                            act / plan.tp * model.moe.top_k, cat)
        ep = (2 * t_a2a, kind)
    cp = (0.0, "nvlink")
    if plan.cp > 1:
        kv_block = 2 * plan.mbs * plan.seq / plan.cp * model.kv_dim * ACT_BYTES / plan.tp
        cp = _comm(widest("cp"), "send_recv", kv_block, cat)
    pp = (0.0, "nvlink")
    if plan.pp > 1:
        pp_shape = _group_shape(cluster, placement.first_group("pp"))
        pair = None if pp_shape is None else _cached_shape(cluster, 2, 1 if pp_shape.nnodes > 1 else 2)
        pp = _comm(pair, "send_recv", act / (plan.tp if plan.sequence_parallel else 1), cat)
    return _LayerComms(tp, ep, cp, pp)


def _microbatch(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, comms: _LayerComms, stage: int,
                layers: list[int], flash_attention: bool) -> tuple[Breakdown, float]:
    """Breakdown of one micro-batch (forward + backward, with recompute) on one GPU of ``stage``; also returns
    the backward compute time (the window in which gradient reduction can hide)."""
    gpu = cluster.catalog.gpu(cluster.system.gpu)
    out = Breakdown()
    flops = stage_microbatch_flops(model, plan, stage)
    rate = achievable_flops_per_s(gpu)
    out.add("compute", flops.hardware_flops / rate)
    fwd_bytes = sum(layer_forward_bytes(model, plan, i, flash_attention=flash_attention) for i in layers)
    recompute_passes = 1.0 if plan.recompute == "full" else 0.0
    hbm_rate = gpu.hbm_bytes_per_s * hbm_efficiency(gpu).value
    held = stage_params(model, plan, stage)
    out.add("hbm", (fwd_bytes * (3.0 + recompute_passes) + grad_accumulation_bytes(held.dense + held.expert))
            / hbm_rate)
    passes = 2.0 + recompute_passes  # forward, backward (same collectives), recomputed forward
    t_tp, kind = comms.tp_per_layer_pass
    out.add(kind, t_tp * len(layers) * passes)
    if model.moe is not None and plan.ep > 1:
        t_ep, kind = comms.ep_per_layer_pass
        out.add(kind, t_ep * sum(1 for i in layers if model.is_moe_layer(i)) * passes)
    if plan.cp > 1:
        t_step, kind = comms.cp_per_layer_step
        t_cp = t_step * (plan.cp - 1) * len(layers) * (passes + 1.0)  # backward also returns dK, dV
        attention = forward_flops(model, plan.mbs, plan.seq, layers=layers, lm_head=False).attention
        attention_s = attention * (3.0 + recompute_passes) / (plan.tp * plan.cp) / rate
        hidden = min(t_cp, attention_s)
        out.add(kind, t_cp - hidden, hidden)
    if plan.pp > 1:
        t_p2p, kind = comms.pp_per_send
        out.add(kind, 2 * t_p2p * plan.virtual_stages)
    return out, flops.backward / rate


def _gradient_sync(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, placement: Placement, stage: int,
                   window_s: float) -> Breakdown:
    """Data-parallel gradient reduction (and ZeRO parameter gathers) once per step."""
    cat = cluster.catalog
    out = Breakdown()
    params = stage_params(model, plan, stage)
    for kind_name, count, shards in (("dp_cp", params.dense, plan.dp * plan.cp), ("edp", params.expert,
                                                                                   plan.expert_dp)):
        if count <= 0 or shards < 2:
            continue
        shape = _group_shape(cluster, placement.first_group(kind_name))
        grads = count * MAIN_GRAD_BYTES
        if plan.zero == 0:
            t, link = _comm(shape, "all_reduce", grads, cat)
            gather = 0.0
        else:
            t, link = _comm(shape, "reduce_scatter", grads, cat)
            gather, _ = _comm(shape, "all_gather", count * PARAM_BYTES, cat)
            if plan.zero >= 3:
                gather *= 2 * plan.microbatches  # FSDP gathers weights for every forward and backward
        if plan.overlap_grad_reduce:
            last_bucket = t * min(1.0, DDP_BUCKET_PARAMS / count)
            exposed = max(t - window_s, last_bucket)
        else:
            exposed = t
        out.add(link, exposed, t - exposed)
        hidden_gather = gather if plan.zero >= 3 or plan.overlap_param_gather else 0.0
        out.add(link, gather - hidden_gather, hidden_gather)
    return out


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


def predict_training(
    model: ModelSpec, plan: ParallelPlan, cluster: Cluster, *, flash_attention: bool = False
) -> TrainingPrediction:
    """Step time, throughput, memory and the per-layer breakdown of one training step."""
    warnings = list(check_plan(model, plan))
    sysm = cluster.system
    gpus = plan.world_size
    nodes = ceil(gpus / sysm.gpus_per_node)
    if gpus % sysm.gpus_per_node and gpus > sysm.gpus_per_node:
        raise SpecError(f"{gpus} GPUs do not fill whole {sysm.id} nodes of {sysm.gpus_per_node}", field="--gpus")
    placement = place(plan)
    warnings += placement_warnings(placement, sysm.nvlink_domain_gpus)

    by_signature: dict[tuple[int, int, bool, bool], tuple[Breakdown, float]] = {}
    layers_by_stage = stage_layers(model, plan)
    comms = _layer_comms(model, plan, cluster, placement)
    moe_flags = _moe_flags(model)
    for s in range(plan.pp):  # stages with the same layer mix cost the same: price each mix once
        layers = layers_by_stage[s]
        key = (len(layers), sum(moe_flags[i] for i in layers), s == 0, s == plan.pp - 1)
        if key not in by_signature:
            by_signature[key] = _microbatch(model, plan, cluster, comms, s, layers, flash_attention)
    mb, backward_window = max(by_signature.values(), key=lambda r: r[0].exposed_total)
    m, v = plan.microbatches, plan.virtual_stages
    steady = mb.scaled(float(m))
    bubble_s = (plan.pp - 1) / v * mb.exposed_total
    total = steady
    total.add("pipeline_bubble", bubble_s)

    candidates = sorted({0, plan.pp - 1, max(range(plan.pp), key=lambda s: len(layers_by_stage[s]))})
    worst_params = max(candidates, key=lambda s: stage_params(model, plan, s).dense)
    total = total.plus(_gradient_sync(model, plan, cluster, placement, worst_params, backward_window))
    p = stage_params(model, plan, worst_params)
    owned = p.dense / (plan.dp * plan.cp if plan.zero >= 1 else 1) + p.expert / (plan.expert_dp if plan.zero >= 1
                                                                                 else 1)
    gpu = cluster.catalog.gpu(sysm.gpu)
    total.add("hbm", optimizer_bytes(owned) / (gpu.hbm_bytes_per_s * hbm_efficiency(gpu).value))

    step_time = total.exposed_total
    flops = step_flops(model, plan)
    mem = _memory(model, plan, gpu, candidates)
    if not mem.fits:
        warnings.append(mem.summary())
    bottleneck = max(total.exposed.items(), key=lambda kv: kv[1])[0]
    return TrainingPrediction(
        step_time_s=step_time,
        tokens_per_s=plan.tokens_per_step() / step_time,
        tflops_per_gpu=flops.hardware_flops / step_time / gpus / 1e12,
        mfu=flops.model_flops / (step_time * gpus * gpu.bf16_flops_per_s),
        memory=mem,
        breakdown=total,
        bottleneck=bottleneck,
        warnings=tuple(warnings),
        gpus=gpus,
        nodes=nodes,
    )
