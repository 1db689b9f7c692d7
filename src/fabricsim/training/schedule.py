"""A micro-batch's breakdown with its collectives and their overlap, ZeRO-3 layer gathers, the data-parallel
gradient sync, and the pipeline schedule that assembles micro-batches, bubble, sync and optimizer into a step."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from fabricsim.catalog import GPU
from fabricsim.comm import Cluster, collective_time
from fabricsim.model import ModelSpec, achievable_hbm_bytes_per_s, layer_linear_params
from fabricsim.training.comms import _fabric_comm, _group_shape_of, _LayerComms
from fabricsim.training.memory import StageParams, stage_params
from fabricsim.training.placement import Placement
from fabricsim.training.plan import GRAD_DTYPE_BYTES, ParallelPlan
from fabricsim.training.result import LAYERS, Breakdown, StepArrays
from fabricsim.training.stage import _stage_work, _StageCompute

PARAM_BYTES = 2
DDP_BUCKET_PARAMS = 40_000_000  # Megatron-LM DDP bucket size (parameters)


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
        moe_layers = sum(1 for i in layers if model.is_moe_layer(i))
        hidden = slowed = 0.0
        if plan.ep_comm_overlap:
            # Megatron-Core's 1F1B all-to-all overlap runs one micro-batch's dispatch/combine beside another's
            # attention and expert compute, so a layer pass hides up to that layer pass's matmul time.
            matmul_per_layer_pass = (work.gemm_fwd_s + work.attention_fwd_s) / len(layers) \
                * (3.0 + recompute_passes) / passes
            hidden = min(t_ep, matmul_per_layer_pass)
            slowed = hidden * dispatch_sm_share(gpu, plan, cluster)
        if plan.shared_expert_overlap and model.moe.shared_experts:  # exclusive with ep_comm_overlap (plan check)
            # Megatron-Core's shared-expert overlap runs the shared experts on a side stream beside the same
            # micro-batch's dispatch and combine: a layer pass hides up to its shared experts' matmul time
            hidden = min(t_ep, shared_expert_share(model, layers) * work.gemm_fwd_s / max(1, moe_layers)
                         * (3.0 + recompute_passes) / passes)
            slowed = hidden * dispatch_sm_share(gpu, plan, cluster)
        out.add(kind, (t_ep - hidden + slowed) * moe_layers * passes, (hidden - slowed) * moe_layers * passes)
    if plan.cp > 1:
        t_step, kind = comms.cp_per_layer_step
        t_cp = t_step * (plan.cp - 1) * len(layers) * (passes + 1.0)  # backward also returns dK, dV
        attention_s = work.attention_fwd_s * (3.0 + work.recompute_attention)
        hidden = min(t_cp, attention_s)
        slowed = hidden * collective_sm_share(gpu, cluster)
        out.add(kind, t_cp - hidden + slowed, hidden - slowed)
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


def shared_expert_share(model: ModelSpec, layers: list[int]) -> float:
    """Fraction of a stage's weight-GEMM FLOPs that its MoE layers' shared experts do."""
    if model.moe is None or not model.moe.shared_experts:
        return 0.0
    total = sum(layer_linear_params(model, i) for i in layers)
    shared = sum(model.moe.shared_experts * model.expert_params() for i in layers if model.is_moe_layer(i))
    return shared / total if total else 0.0


def collective_sm_share(gpu: GPU, cluster: Cluster) -> float:
    """Share of the GPU's SMs an NCCL collective holds while it overlaps compute (``collective_kernel_sms``): hiding
    t seconds of gradient reduction, parameter gathers or context-parallel exchanges still costs share x t of the
    compute beside it (0 where the catalog has no SM count for the GPU)."""
    return held_sm_share(gpu, cluster.catalog.tuning("default").collective_kernel_sms)


def dispatch_sm_share(gpu: GPU, plan: ParallelPlan, cluster: Cluster) -> float:
    """Share of the GPU's SMs the dispatch/combine kernels hold while they overlap compute: the compute beside
    them runs on the rest, so hiding t seconds of all-to-all still costs share x t (0 where the catalog has no
    SM count for the GPU)."""
    return held_sm_share(gpu, cluster.catalog.tuning("default").dispatch_kernel_sms.get(plan.moe_dispatcher, 0))


def held_sm_share(gpu: GPU, held: int) -> float:
    """The share of the GPU's SMs that ``held`` SMs are, at most all (0 where the catalog has no SM count)."""
    sms = gpu.sms.value if gpu.sms is not None else 0
    return min(1.0, held / sms) if sms > 0 else 0.0


def _fsdp_layers(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, stage: int, layers: list[int],
                 forward_s: float, backward_s: float) -> Breakdown:
    """ZeRO-3 / FSDP, per micro-batch: each layer's weights are all-gathered before its forward and again before
    its backward (and before its recomputed forward: the weights were freed after the forward, ZeRO-3 as in
    DeepSpeed), and its gradients reduce-scattered after its backward, by as many calls as the stack makes
    (``zero3_gathers_per_layer``, ``zero3_reduce_bucket_params``). The next layer's gather is prefetched
    under the current layer's work (its matmuls and element-wise kernels, ``forward_s`` / ``backward_s`` of the
    stage), so per layer only what exceeds that work is exposed, and the first gather of each pass whole."""
    out = Breakdown()
    params = stage_params(model, plan, stage)
    n = max(1, len(layers))
    gpu = cluster.catalog.gpu(cluster.system.gpu)
    share = collective_sm_share(gpu, cluster)
    for count, group_kind, shards in ((params.dense, "dp_cp", plan.dp * plan.cp),
                                      (params.expert, "edp", plan.expert_dp)):
        if count <= 0 or shards < 2:
            continue
        shape = _group_shape_of(cluster, plan, group_kind, False)
        per_layer = count / n
        calls = plan.zero3_gathers_per_layer  # each call pays the collective's latency
        t_call, link = collective_time(shape, "all_gather", per_layer * PARAM_BYTES / calls, cluster.catalog)
        t_gather = calls * t_call
        reduces = per_layer / (plan.zero3_reduce_bucket_params or per_layer)  # buckets per layer (may be < 1)
        t_bucket, _ = collective_time(shape, "reduce_scatter",
                                      per_layer / reduces * GRAD_DTYPE_BYTES[plan.grad_dtype], cluster.catalog)
        t_rs = reduces * t_bucket
        fwd_layer = forward_s / n
        bwd_layer = backward_s / n
        gathers_bwd = 2.0 if plan.recompute == "full" else 1.0
        fwd_exposed = max(0.0, t_gather - fwd_layer) * (n - 1) + t_gather
        bwd_comm = gathers_bwd * t_gather + t_rs
        bwd_exposed = max(0.0, bwd_comm - bwd_layer) * (n - 1) + t_gather
        total = n * (t_gather + bwd_comm)
        exposed = min(total, fwd_exposed + bwd_exposed)
        slowed = (total - exposed) * share
        out.add(link, exposed + slowed, total - exposed - slowed)
        if plan.fsdp_copy_out:  # FSDP2: every gather's output copied into the parameters (read + write)
            out.add("hbm", n * (1.0 + gathers_bwd) * 2.0 * per_layer * PARAM_BYTES / achievable_hbm_bytes_per_s(gpu))
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
    share = collective_sm_share(cluster.catalog.gpu(cluster.system.gpu), cluster)
    for _, link, t, gather, last_bucket in sync_collectives(plan, cluster, stage_params(model, plan, stage)):
        exposed = max(t - work.backward_s, t * last_bucket) if plan.overlap_grad_reduce else t
        slowed = (t - exposed) * share
        out.add(link, exposed + slowed, t - exposed - slowed)
        gather_exposed = (max(gather - work.forward_s, gather * last_bucket) if plan.overlap_param_gather
                          else gather)
        slowed = (gather - gather_exposed) * share
        out.add(link, gather_exposed + slowed, gather - gather_exposed - slowed)
    return out


def sync_collectives(plan: ParallelPlan, cluster: Cluster, params: StageParams) -> Iterator[tuple[int, str, float,
                                                                                                  float, float]]:
    """The data-parallel sync of a stage holding ``params`` (ZeRO 0-2), per group that has parameters to sync
    (0: dense over dp x cp, 1: experts over expert dp): (group, link, gradient reduction s, parameter gather s,
    the last bucket's share of the reduction). The step (`_gradient_sync`) and its lower bound
    (`training.floor`) both price it here."""
    for j, (kind_name, count, shards) in enumerate((("dp_cp", params.dense, plan.dp * plan.cp),
                                                    ("edp", params.expert, plan.expert_dp))):
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
        yield j, link, t, gather, last_bucket


def pipeline_bubble_fraction(pp: int, microbatches: int, virtual_stages: int) -> float:
    """Idle time of a stage per step, in micro-batch times: (pp - 1) / v for 1F1B and interleaved 1F1B when the
    pipeline fills (m >= pp; Narayanan et al. SC21 sec. 2.2); with fewer micro-batches than stages no stage ever
    holds pp micro-batches, each chunk waits for the whole pipeline's pass, and interleaving saves nothing: every
    stage idles for the full fill and drain, pp - 1 micro-batch times. (One plan of ``pipeline_bubble_fractions``.)"""
    return float(pipeline_bubble_fractions(np.array([pp]), np.array([microbatches]), np.array([virtual_stages]))[0])


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
