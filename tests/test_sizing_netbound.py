"""The network-aware lower bound `size` prunes by (issue 48, item 2): over random plans (dense and MoE, ZeRO 0-3 /
FSDP, pipelines with interleaving, context parallelism, recompute, the overlap switches), systems, networks,
oversubscriptions and scale-out kinds, (m + bubble) x (floor + micro-batch collectives) + sync + optimizer never
exceeds predict_training's step, and is at least the network-free bound it replaces."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fabricsim.catalog import default_catalog
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.model import load_model
from fabricsim.sizing.floors import ClusterLows, task_floors
from fabricsim.training import (
    ParallelPlan,
    check_plan,
    comm_row,
    network_floors,
    pipeline_bubble_fractions,
    plan_floor,
    predict_training,
)

MODELS = ("gpt-1.7b", "llama3-8b", "mixtral-8x7b", "gpt-18.4b")
SYSTEMS = ("dgx-h100", "dgx-a100", "dgx-b200", "gb200-nvl72", "pcie-h100-8gpu")
KINDS = ("fat-tree", "rail-only", "2-plane")


@st.composite
def _cases(draw: st.DrawFn) -> tuple[Any, ParallelPlan, Cluster]:
    catalog = default_catalog()
    model = load_model(draw(st.sampled_from(MODELS)))
    system = catalog.system(draw(st.sampled_from(SYSTEMS)))
    kind = draw(st.sampled_from(KINDS))
    cluster = Cluster(system, fabric=draw(st.sampled_from(("ndr", "hdr", "eth-400g", "xdr"))),
                      oversubscription=draw(st.sampled_from((1.0, 2.0, 4.0))), catalog=catalog,
                      fabric_kind="fat-tree" if kind == "2-plane" else kind, planes=2 if kind == "2-plane" else 1)
    tp = draw(st.sampled_from((1, 2, 4, 8, 16)))
    pp = draw(st.sampled_from((1, 2, 4, 8)))
    cp = draw(st.sampled_from((1, 1, 2, 4)))
    dp = draw(st.sampled_from((1, 2, 4, 8, 16, 32)))
    ep = draw(st.sampled_from((1, 2, 4, 8))) if model.moe is not None else 1
    mbs = draw(st.sampled_from((1, 2, 4)))
    m = draw(st.sampled_from((1, 2, 4, 8, 16)))
    zero = draw(st.sampled_from((0, 1, 2, 3))) if pp == 1 else draw(st.sampled_from((0, 1)))
    vpp = draw(st.sampled_from((1, 2))) if pp > 1 else 1
    kw: dict[str, Any] = {
        "tp": tp, "pp": pp, "cp": cp, "dp": dp, "ep": ep, "mbs": mbs, "gbs": m * mbs * dp, "seq": 4096,
        "virtual_stages": vpp, "zero": zero, "recompute": draw(st.sampled_from(("none", "selective", "full"))),
        "precision": draw(st.sampled_from(("bf16", "fp8")))
        if catalog.gpu(system.gpu).fp8_flops_per_s is not None else "bf16",
        "tp_comm_overlap": draw(st.booleans()), "overlap_grad_reduce": draw(st.booleans()),
        "overlap_param_gather": draw(st.booleans()), "grad_dtype": draw(st.sampled_from(("fp32", "bf16"))),
    }
    if model.moe is not None:
        overlap = draw(st.sampled_from(("none", "ep", "shared")))
        kw["ep_comm_overlap"] = overlap == "ep"
        kw["shared_expert_overlap"] = overlap == "shared"
        kw["etp"] = draw(st.sampled_from((None, 1)))
    if zero == 3:
        kw["zero3_gathers_per_layer"] = draw(st.sampled_from((1, 2)))
    if tp > 1 and draw(st.booleans()):
        kw["sequence_parallel"] = False
    try:
        plan = ParallelPlan.build(**kw)
        check_plan(model, plan)
    except SpecError:
        assume(False)
        raise
    gpus = plan.world_size
    assume(gpus % system.gpus_per_node == 0 or gpus < system.gpus_per_node)
    return model, plan, cluster


def _bound(model: Any, plan: ParallelPlan, cluster: Cluster) -> tuple[float, float]:
    floor, optimizer_s, worst = plan_floor(model, plan, cluster)
    row = comm_row(model, plan, cluster, floor.stage, worst)
    mb, once = network_floors(np.array([floor.row]), np.array([row]), np.array([optimizer_s]))
    m = np.array([plan.microbatches])
    bubble = pipeline_bubble_fractions(np.array([plan.pp]), m, np.array([plan.virtual_stages]))[0]
    return float((plan.microbatches + bubble) * mb[0] + once[0]), \
        float((plan.microbatches + bubble) * floor.floor_s + optimizer_s)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
          derandomize=True)
@given(_cases())
def test_network_bound_never_exceeds_the_step(case: tuple[Any, ParallelPlan, Cluster]) -> None:
    model, plan, cluster = case
    try:
        step = predict_training(model, plan, cluster).step_time_s
    except SpecError:
        assume(False)
        raise
    bound, network_free = _bound(model, plan, cluster)
    assert bound <= step * (1 + 1e-12)
    assert bound >= network_free * (1 - 1e-12)


def test_the_bound_is_tight_where_the_network_dominates() -> None:
    """A plan whose step is mostly exposed collectives (TP over InfiniBand, ZeRO-3 over 64 ranks): the network-
    aware bound is within a few percent of the step, where the network-free one is far below."""
    catalog = default_catalog()
    model = load_model("llama3-8b")
    cluster = Cluster(catalog.system("dgx-h100"), fabric="eth-400g", catalog=catalog)
    plan = ParallelPlan.build(tp=16, dp=8, zero=3, mbs=1, gbs=64, seq=4096)
    step = predict_training(model, plan, cluster).step_time_s
    bound, network_free = _bound(model, plan, cluster)
    assert bound > 0.9 * step > network_free


def test_sizing_lows_match_the_per_plan_bound() -> None:
    """`sizing.floors` (the search's vectorised form, any subset of the candidates) gives each plan's bound."""
    catalog = default_catalog()
    model = load_model("mixtral-8x7b")
    cluster = Cluster(catalog.system("dgx-h100"), fabric="ndr", catalog=catalog)
    plans = [ParallelPlan.build(tp=tp, pp=pp, dp=128 // (tp * pp), ep=ep, zero=z, mbs=1, gbs=1024, seq=4096)
             for tp in (2, 4, 8) for pp in (1, 2) for ep in (1, 8) for z in (0, 3) if not (z == 3 and pp > 1)]
    tokens = 1e12
    floors = task_floors(model, [(p, [(p.gbs, p.microbatches)]) for p in plans], cluster, 4096, tokens)
    at = ClusterLows(model, floors, cluster)
    at.of(np.arange(0, len(plans), 2))  # a subset first, then all: each plan's bound whatever order it is reached
    lows = at.of(np.arange(len(plans))[::-1].copy())[::-1]
    for plan, low in zip(plans, lows, strict=True):
        bound, _ = _bound(model, plan, cluster)
        assert abs(low / (tokens / (plan.gbs * 4096) * bound) - 1) < 1e-12
        assert low <= tokens / (plan.gbs * 4096) * predict_training(model, plan, cluster).step_time_s * (1 + 1e-12)
