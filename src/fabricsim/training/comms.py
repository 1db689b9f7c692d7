"""The collectives of a training step on the plan's real process groups: TP, EP, CP and PP per layer and
micro-batch, priced once per plan shape (``_LayerComms``), and every group of a kind on the flow simulator when the
cluster asks for it; all through ``fabricsim.comm``."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fabricsim.caching import ByIdentity
from fabricsim.comm import Cluster, GroupShape, cached_group_shape, collective_time, groups_comm
from fabricsim.model import ModelSpec, expected_remote_nodes
from fabricsim.training.experts import routed_load_peak
from fabricsim.training.placement import Placement, place, widest_group
from fabricsim.training.plan import ParallelPlan

ACT_BYTES = 2  # bf16 activations
FP8_BYTES = 1
_COMMS_CACHE: dict[tuple[object, ...], _LayerComms] = {}
COMMS_CACHE_SIZE = 65536


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
    return _flow_comm(ByIdentity(cluster), plan.tp, plan.cp, plan.ep, plan.etp, plan.dp, plan.pp, plan.order, kind,
                      op, size)


@lru_cache(maxsize=4096)
def _flow_comm(cluster_ref: ByIdentity[Cluster], tp: int, cp: int, ep: int, etp: int | None, dp: int, pp: int,
               order: str, kind: str, op: str, size: float) -> tuple[float, str]:
    """``groups_comm`` for the groups of ``kind`` of a plan layout (cached: only the layout matters)."""
    plan = ParallelPlan.build(tp=tp, cp=cp, ep=ep, etp=etp, dp=dp, pp=pp, order=order, seq=2 * cp * tp, gbs=dp)
    return groups_comm(cluster_ref.value, place(plan).groups(kind), plan.world_size, op, size)


def _node_aware_dispatch(cluster: Cluster, model: ModelSpec, ep_shape: GroupShape, routed: float, t_nccl: float,
                         kind_nccl: str) -> tuple[float, str]:
    """DeepEP's normal kernels (deepseek-ai/DeepEP README: NVLink forwarding for intranode, RDMA for internode,
    each token sent once per destination node): the network carries a token's hidden state once per remote node
    its experts sit on (``expected_remote_nodes``) and NVLink fans the copies out there; the two run pipelined,
    so the slower sets the time. Never slower than NCCL's all-to-all of a copy per expert."""
    assert model.moe is not None
    n, p = ep_shape.nranks, ep_shape.ranks_per_node
    own = routed / model.moe.top_k  # the rank's tokens, one copy
    remote = expected_remote_nodes(model.moe.experts, model.moe.top_k, ep_shape.nnodes)
    # an all-to-all of size S sends S (n - p) / n off the node: choose S so that is own x remote
    t_net, kind = collective_time(ep_shape, "all_to_all", own * remote * n / max(n - p, 1), cluster.catalog)
    node = cached_group_shape(cluster, p, p) if p > 1 else None
    t_fan, _ = collective_time(node, "all_to_all", routed, cluster.catalog)
    t = max(t_net, t_fan)
    return (t, kind) if t < t_nccl else (t_nccl, kind_nccl)


@dataclass(frozen=True)
class _LayerComms:
    """Per-layer and per-micro-batch communication costs of a plan, priced once on its real groups."""

    tp_per_layer_pass: tuple[float, str]
    tp_bf16_per_layer_pass: tuple[float, str]  # the same without FP8 gathers (stages that keep BF16 GEMMs)
    ep_per_layer_pass: tuple[float, str]
    cp_per_layer_step: tuple[float, str]
    pp_per_send: tuple[float, str]
    pp_gather: tuple[float, str]  # receiver's all-gather of the scattered activation (TP without sequence parallel)


def _layer_comms(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, placement: Placement) -> _LayerComms:
    """``_price_layer_comms``, cached on the plan fields it reads (plans differing in recompute, ZeRO, pipeline
    interleaving or batch share their layer collectives)."""
    key = (ByIdentity(model), ByIdentity(cluster), *layer_comms_key(plan))
    found = _COMMS_CACHE.get(key)
    if found is None:
        if len(_COMMS_CACHE) >= COMMS_CACHE_SIZE:
            _COMMS_CACHE.clear()
        found = _COMMS_CACHE[key] = _price_layer_comms(model, plan, cluster, placement)
    return found


_LAYER_FIELDS = operator.attrgetter("tp", "cp", "ep", "etp", "dp", "pp", "mbs", "seq", "moe_balance", "capacity_factor",
                                    "moe_dispatcher", "precision", "sequence_parallel", "order")


def layer_comms_key(plan: ParallelPlan) -> tuple[object, ...]:
    """The plan fields a plan's layer collectives read (``_layer_comms`` caches on them)."""
    return _LAYER_FIELDS(plan)


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
        # Megatron-Core's all-to-all dispatcher: each rank sends its sequence-parallel shard's top_k copies over
        # the EP group, then the expert-TP group all-gathers what its ranks received (and reduce-scatters it back
        # before the combine all-to-all), so every ETP rank runs its slice of the experts on all their tokens.
        routed = act / plan.tp * model.moe.top_k * routed_load_peak(model, plan)  # the hottest rank's share
        ep_shape = widest("ep")
        t_a2a, kind = _fabric_comm(cluster, plan, "ep", ep_shape, "all_to_all", routed)
        if plan.moe_dispatcher == "deepep" and ep_shape is not None and ep_shape.nnodes > 1:
            t_a2a, kind = _node_aware_dispatch(cluster, model, ep_shape, routed, t_a2a, kind)
        t_etp = 0.0
        etp_shape = widest("etp")
        if etp_shape is not None:
            t_ag, etp_kind = collective_time(etp_shape, "all_gather", routed * plan.expert_tp, cat)
            t_rs, _ = collective_time(etp_shape, "reduce_scatter", routed * plan.expert_tp, cat)
            t_etp = t_ag + t_rs
            kind = kind if t_a2a >= t_etp else etp_kind
        ep = (2 * t_a2a + t_etp, kind)
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
