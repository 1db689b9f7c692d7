"""Lower bounds of a plan's step time for a sizing search's branch and bound: the network-free floor (the
slowest stage's compute and HBM time per micro-batch, and the optimizer) and the communication no schedule of
`step_terms` can hide, on the cluster's network.

Why each term is a lower bound of what `step_terms` + `assemble_steps` compute (``floor stage``: the
representative stage with the most compute and HBM time; the step's micro-batch is the representative stage
whose exposed total is the largest, so it is at least the floor stage's):
- TP: a layer pass hides at most its GEMM window (``tp_comm_overlap``; none without it): per layer pass
  ``max(0, t_tp - window)`` is exposed, x layers x passes, exactly as `_microbatch` adds it;
- EP: the all-to-all hides at most min(t, window) of the overlap that is on (1F1B overlap: the layer's
  matmuls; shared-expert overlap: the shared experts' GEMMs); the SM slow-down it adds back is >= 0;
- CP: the ring exchange hides under at most the attention compute; slow-down >= 0;
- PP: the sends (and the receiver's all-gather) are always exposed: exact;
- ZeRO-3 / FSDP: the prefetch formula of `_fsdp_layers` itself (exposed = min(total, forward + backward
  exposed)) with the floor stage's windows; its SM slow-down and FSDP2 copy-out are >= 0 and left out;
- data-parallel sync (ZeRO 0-2): a bucket's reduction hides under at most the longest backward of the
  representative stages (its gather under the longest forward), and the last bucket never hides.
Step >= (m + bubble) x (floor + micro-batch communication) + sync + optimizer (`assemble_steps`).
tests/test_sizing_netbound.py checks it never exceeds the timed step, over random plans, clusters and networks.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from fabricsim.caching import BoundedMemo, ByIdentity
from fabricsim.catalog import GPU
from fabricsim.comm import Cluster, collective_time
from fabricsim.model import ModelSpec
from fabricsim.training.comms import _group_shape_of, _layer_comms, layer_comms_key
from fabricsim.training.memory import stage_params
from fabricsim.training.placement import place
from fabricsim.training.plan import GRAD_DTYPE_BYTES, ParallelPlan, stage_layers
from fabricsim.training.schedule import PARAM_BYTES, shared_expert_share, sync_collectives
from fabricsim.training.stage import _stage_work

STAGE_FIELDS = ("floor_s", "layers", "moe_layers", "passes", "tp_window", "ep_window", "cp_window",
                "fsdp_fwd_layer", "fsdp_bwd_layer", "gathers_bwd", "bf16_fallback", "max_fwd", "max_bwd",
                "virtual_stages", "cp")
"""the network-free numbers of a plan a lower bound reads (`StageFloor.row` in this order)"""
LAYER_FIELDS = 5
"""`COMM_FIELDS` from `layer_row` (the rest from `shard_row`)"""
COMM_FIELDS = ("t_tp", "t_tp_bf16", "t_ep", "t_cp_step", "t_pp", "fsdp_gather", "fsdp_reduce", "fsdp_gather_e",
               "fsdp_reduce_e", "reduce", "reduce_share", "gather", "gather_share", "reduce_e", "reduce_share_e",
               "gather_e", "gather_share_e")
"""a plan's collective times on a cluster a lower bound reads (`comm_row` in this order)"""


@dataclass(frozen=True)
class StageFloor:
    """What a plan's lower bounds read that needs no network: its floor stage's compute and HBM time per
    micro-batch (``floor_s``), the optimizer update, and the windows its collectives can hide under."""

    floor_s: float
    stage: int
    row: tuple[float, ...]  # `STAGE_FIELDS`


def stage_floor(model: ModelSpec, plan: ParallelPlan, gpu: GPU,
                representatives: tuple[tuple[int, tuple[int, ...]], ...]) -> StageFloor:
    """The floor stage (most compute and HBM time among ``representatives``) and its windows."""
    best: tuple[float, int, tuple[int, ...]] | None = None
    max_fwd = max_bwd = 0.0
    for s, layers in representatives:
        staged = _stage_work(model, plan, gpu, s, list(layers))
        total = staged.work.total_s + staged.hbm_s
        if best is None or total > best[0]:
            best = (total, s, layers)
        max_fwd = max(max_fwd, staged.work.forward_s)
        max_bwd = max(max_bwd, staged.work.backward_s)
    assert best is not None
    floor_s, s, layers = best
    staged = _stage_work(model, plan, gpu, s, list(layers))
    work = staged.work
    r = 1.0 if plan.recompute == "full" else 0.0
    passes = 2.0 + r
    n = len(layers)
    moe_layers = sum(1 for i in layers if model.is_moe_layer(i))
    tp_window = work.gemm_fwd_s / n * (3.0 + r) / passes if plan.tp_comm_overlap else 0.0
    ep_window = 0.0
    if plan.ep_comm_overlap:
        ep_window = (work.gemm_fwd_s + work.attention_fwd_s) / n * (3.0 + r) / passes
    if plan.shared_expert_overlap and model.moe is not None and model.moe.shared_experts:
        ep_window = max(ep_window, shared_expert_share(model, list(layers)) * work.gemm_fwd_s / max(1, moe_layers)
                        * (3.0 + r) / passes)
    cp_window = work.attention_fwd_s * (3.0 + work.recompute_attention)
    forward_share = 1.0 / (3.0 + r)
    other_s = staged.hbm_s + work.kernel_gaps_s
    nl = max(1, n)
    row = (floor_s, float(n), float(moe_layers), passes, tp_window, ep_window, cp_window,
           (work.forward_s + other_s * forward_share) / nl, (work.backward_s + other_s * (1.0 - forward_share)) / nl,
           2.0 if plan.recompute == "full" else 1.0, 1.0 if staged.bf16_fallback else 0.0, max_fwd, max_bwd,
           float(plan.virtual_stages), float(plan.cp))
    return StageFloor(floor_s, s, row)


_NOT_SHARDING = frozenset({"gbs", "recompute", "mbs", "seq", "precision", "tp_comm_overlap", "ep_comm_overlap",
                           "shared_expert_overlap"})
"""plan fields ZeRO-3's per-layer collectives and the data-parallel sync do not read"""
_SHARDING = operator.itemgetter(*(f for f in ParallelPlan.model_fields if f not in _NOT_SHARDING))


def comm_keys(plan: ParallelPlan, stage: int, worst_params_stage: int) -> tuple[Hashable, Hashable]:
    """What `layer_row` and `shard_row` read of a plan (plans alike in those share them): the layer
    collectives' fields (`layer_comms_key`), and every field but the batch, micro-batch and precision with the
    stages whose parameters move."""
    return layer_comms_key(plan), (stage, worst_params_stage, _SHARDING(plan.__dict__))


def comm_row(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, stage: int,
             worst_params_stage: int) -> tuple[float, ...]:
    """A plan's collective times on ``cluster`` (`COMM_FIELDS`), as `step_terms` prices them: `layer_row` and
    `shard_row`."""
    return (*layer_row(model, plan, cluster), *shard_row(model, plan, cluster, stage, worst_params_stage))


def layer_row(model: ModelSpec, plan: ParallelPlan, cluster: Cluster) -> tuple[float, ...]:
    """The layer collectives (`COMM_FIELDS` up to ``t_pp``): TP, EP, CP per layer pass and PP per send."""
    comms = _layer_comms(model, plan, cluster, place(plan))
    return (comms.tp_per_layer_pass[0], comms.tp_bf16_per_layer_pass[0], comms.ep_per_layer_pass[0],
            comms.cp_per_layer_step[0], comms.pp_per_send[0] + comms.pp_gather[0])


_SHARD_ROWS: BoundedMemo[tuple[float, ...]] = BoundedMemo(1 << 16)


def shard_row(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, stage: int,
              worst_params_stage: int) -> tuple[float, ...]:
    """ZeRO-3's per-layer gather and reduce-scatter of the floor stage, and per data-parallel group (dense,
    expert) the sync's reduction and gather with their exposed shares (ZeRO 0-2: the last bucket's with overlap
    on, 1 with it off): `COMM_FIELDS` from ``fsdp_gather`` (memoised on `comm_keys`)."""
    key = (ByIdentity(model), ByIdentity(cluster), comm_keys(plan, stage, worst_params_stage)[1])
    return _SHARD_ROWS.get(key, lambda: _shard_row(model, plan, cluster, stage, worst_params_stage))


def _shard_row(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, stage: int,
               worst_params_stage: int) -> tuple[float, ...]:
    fsdp = [0.0, 0.0, 0.0, 0.0]
    sync = [0.0] * 8
    if plan.zero >= 3:
        params = stage_params(model, plan, stage)
        n = max(1, len(stage_layers(model, plan)[stage]))
        for j, (count, kind, shards) in enumerate(((params.dense, "dp_cp", plan.dp * plan.cp),
                                                   (params.expert, "edp", plan.expert_dp))):
            if count <= 0 or shards < 2:
                continue
            shape = _group_shape_of(cluster, plan, kind, False)
            per_layer = count / n
            calls = plan.zero3_gathers_per_layer
            t_call, _ = collective_time(shape, "all_gather", per_layer * PARAM_BYTES / calls, cluster.catalog)
            reduces = per_layer / (plan.zero3_reduce_bucket_params or per_layer)
            t_bucket, _ = collective_time(shape, "reduce_scatter",
                                          per_layer / reduces * GRAD_DTYPE_BYTES[plan.grad_dtype], cluster.catalog)
            fsdp[2 * j], fsdp[2 * j + 1] = calls * t_call, reduces * t_bucket
    else:
        for j, _, t, gather, last_bucket in sync_collectives(plan, cluster,
                                                             stage_params(model, plan, worst_params_stage)):
            sync[4 * j:4 * j + 4] = [t, last_bucket if plan.overlap_grad_reduce else 1.0,
                                     gather, last_bucket if plan.overlap_param_gather else 1.0]
    return (*fsdp, *sync)


def network_floors(stage: np.ndarray, comm: np.ndarray, optimizer_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per plan (rows of ``stage``: `STAGE_FIELDS`; of ``comm``: `COMM_FIELDS`; its optimizer update):
    (micro-batch lower bound, sync + optimizer lower bound) in seconds; the step is at least (m + bubble) x the
    first + the second."""
    col = {f: stage[:, i] for i, f in enumerate(STAGE_FIELDS)}
    c = {f: comm[:, i] for i, f in enumerate(COMM_FIELDS)}
    n, passes = col["layers"], col["passes"]
    t_tp = np.where(col["bf16_fallback"] > 0, c["t_tp_bf16"], c["t_tp"])
    mb = np.maximum(0.0, t_tp - col["tp_window"]) * n * passes
    mb = mb + np.maximum(0.0, c["t_ep"] - col["ep_window"]) * col["moe_layers"] * passes
    mb = mb + np.maximum(0.0, c["t_cp_step"] * (col["cp"] - 1.0) * n * (passes + 1.0) - col["cp_window"])
    mb = mb + 2.0 * c["t_pp"] * col["virtual_stages"]
    nl = np.maximum(1.0, n)
    for gather, reduce in (("fsdp_gather", "fsdp_reduce"), ("fsdp_gather_e", "fsdp_reduce_e")):
        tg, trs = c[gather], c[reduce]
        fwd_exposed = np.maximum(0.0, tg - col["fsdp_fwd_layer"]) * (nl - 1.0) + tg
        bwd_comm = col["gathers_bwd"] * tg + trs
        bwd_exposed = np.maximum(0.0, bwd_comm - col["fsdp_bwd_layer"]) * (nl - 1.0) + tg
        mb = mb + np.minimum(nl * (tg + bwd_comm), fwd_exposed + bwd_exposed)
    once = np.array(optimizer_s, dtype=np.float64)
    for e in ("", "_e"):
        t, t_share, g, g_share = (c[f + e] for f in ("reduce", "reduce_share", "gather", "gather_share"))
        once = once + np.maximum(t - col["max_bwd"], t * t_share) + np.maximum(g - col["max_fwd"], g * g_share)
    return col["floor_s"] + mb, once
