"""The collectives of an inference forward pass on their process groups: TP all-reduces, the MoE layers'
all-to-alls under attention data parallelism, pipeline sends, and KV hand-offs between replicas (priced by
``fabricsim.comm``)."""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from fabricsim.comm import Cluster, group_comm
from fabricsim.inference.experts import expert_load_peak
from fabricsim.inference.plan import ACT_BYTES, InferencePlan
from fabricsim.model import ModelSpec


@dataclass(frozen=True)
class _Groups:
    """The process groups of a plan as (ranks, most ranks on a node), and the pipeline boundaries' kinds."""

    tp: tuple[int, int]
    ep: tuple[int, int]
    boundaries_cross_nodes: tuple[bool, ...]


def _groups(plan: InferencePlan, gpus_per_node: int) -> _Groups:
    """Ranks are laid out tp innermost, then dp, then pp (outermost), as vLLM and TensorRT-LLM do."""
    stage = plan.tp * plan.dp
    tp_ppn = min(plan.tp, gpus_per_node)
    stage_nodes = max(1, ceil(stage / gpus_per_node))
    ep_ppn = max(1, min(plan.ep, ceil(plan.ep / stage_nodes)))
    crossings = tuple((s * stage) % gpus_per_node == 0 or stage >= gpus_per_node for s in range(1, plan.pp))
    return _Groups((plan.tp, tp_ppn), (plan.ep, ep_ppn), crossings)


def _layer_comm(model: ModelSpec, plan: InferencePlan, cluster: Cluster, tokens_rank: float,
                tokens_group: float, out: dict[str, float]) -> None:
    """Per forward pass of one stage: the TP all-reduces and the MoE all-to-alls of its layers."""
    groups = _groups(plan, cluster.system.gpus_per_node)
    layers = model.layers // plan.pp
    moe_layers = model.moe_layers / plan.pp
    act = tokens_rank * model.hidden * ACT_BYTES
    tp_n, tp_ppn = groups.tp
    t_ar, kind = group_comm(cluster, tp_n, tp_ppn, "all_reduce", act)
    a2a_layers = moe_layers if (model.moe is not None and plan.dp > 1 and plan.ep > 1) else 0.0
    # every layer reduces its attention output; MLPs reduce theirs unless the experts exchange tokens by all-to-all
    out[kind] += t_ar * (2 * layers - a2a_layers)
    if a2a_layers and model.moe is not None:
        ep_n, ep_ppn = groups.ep
        # the most loaded rank receives (dispatch) and sends back (combine) its peak share of the routed tokens
        peak = expert_load_peak(model.moe.experts, model.moe.top_k, plan.ep, tokens_group)
        per_rank = tokens_group / ep_n * model.moe.top_k * model.hidden * peak
        dispatch_bytes = 1.0 if plan.weights in ("fp8", "fp4") else ACT_BYTES  # DeepEP dispatches FP8
        t_d, kind_d = group_comm(cluster, ep_n, ep_ppn, "all_to_all", per_rank * dispatch_bytes)
        t_c, _ = group_comm(cluster, ep_n, ep_ppn, "all_to_all", per_rank * ACT_BYTES)
        out[kind_d] += (t_d + t_c) * a2a_layers


def _pipeline_sends(model: ModelSpec, plan: InferencePlan, cluster: Cluster, tokens_rank: float,
                    out: dict[str, float]) -> None:
    """One micro-batch's activation across every stage boundary (the pair crosses nodes where the stage does)."""
    size = tokens_rank * model.hidden * ACT_BYTES
    for crosses in _groups(plan, cluster.system.gpus_per_node).boundaries_cross_nodes:
        t, kind = group_comm(cluster, 2, 1 if crosses else 2, "send_recv", size)
        out[kind] += t


def _transfer(cluster: Cluster, ranks_per_node: int, bytes_per_token: float) -> tuple[float, float]:
    """(latency, seconds per token) of a send between two GPUs: two prices of large transfers give the slope."""
    small, big = 1024.0, 1024.0 * 1024
    t_small, _ = group_comm(cluster, 2, ranks_per_node, "send_recv", small * bytes_per_token)
    t_big, _ = group_comm(cluster, 2, ranks_per_node, "send_recv", big * bytes_per_token)
    slope = (t_big - t_small) / (big - small)
    return max(0.0, t_small - slope * small), slope
