"""How much more than the mean the most loaded expert-parallel rank carries in a training micro-batch: the MoE
GEMMs and the dispatch/combine of a layer wait for that rank (``fabricsim.model.experts``: the same load formula as
the inference model). A capacity factor caps it: tokens beyond capacity x the mean are dropped, not computed."""

from __future__ import annotations

from fabricsim.model import ModelSpec, expert_load_terms
from fabricsim.training.plan import ParallelPlan


def dispatched_tokens(plan: ParallelPlan) -> float:
    """Tokens of one micro-batch a GPU dispatches to the experts: its sequence-parallel shard (all its tokens
    without sequence parallelism)."""
    sp = plan.sequence_parallel and plan.tp > 1
    return plan.mbs * plan.seq / plan.cp / (plan.tp if sp else 1)


def routed_load_peak(model: ModelSpec, plan: ParallelPlan) -> float:
    """The most loaded EP rank's routed tokens over the mean rank's, for one micro-batch (1 when forced-balanced,
    without EP or without experts); at most ``capacity_factor``, never below 1."""
    if model.moe is None or plan.ep <= 1 or plan.moe_balance == "forced":
        return 1.0
    own = dispatched_tokens(plan)
    dispersion = 0.0 if plan.moe_balance == "random" else None  # None: the measured skew (data/routing.yaml)
    peak = expert_load_terms(model.moe.experts, model.moe.top_k, plan.ep, dispersion).peak(own * plan.ep)
    if plan.capacity_factor is not None:
        peak = min(peak, plan.capacity_factor)
    return max(1.0, peak)
