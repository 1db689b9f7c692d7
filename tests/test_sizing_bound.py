"""Branch and bound in `size` (issue 25, item 1): over random small spaces and models, the bounded search gives
the exhaustive search's answer (top rows, best, Pareto front, best per system x fabric, ties and their pick,
candidates) while timing fewer plans; the bound never exceeds a plan's step time."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricsim.catalog import default_catalog
from fabricsim.comm import Cluster
from fabricsim.sizing import Knobs, Shape, SizingSpec, clusters, plan_for, size
from fabricsim.sizing.evaluate import spec_model
from fabricsim.training import microbatch_floor, pipeline_bubble_fractions, predict_training

COUNTS = ("plans_evaluated", "plans_pruned", "plans_feasible", "wall_s")


def _answer(spec: SizingSpec, exhaustive: bool) -> dict[str, Any]:
    data = size(spec, executor="serial", exhaustive=exhaustive).to_json()
    for key in COUNTS:
        data.pop(key)
    out: dict[str, Any] = json.loads(json.dumps(data, sort_keys=True, default=str))
    return out


@st.composite
def _spaces(draw: st.DrawFn) -> SizingSpec:
    model = draw(st.sampled_from(["gpt-1.7b", "llama3-8b", "gpt-18.4b", "mixtral-8x7b"]))
    systems = tuple(draw(st.lists(st.sampled_from(["dgx-h100", "dgx-a100", "dgx-b200", "gb200-nvl72"]),
                                  min_size=1, max_size=2, unique=True)))
    objective = draw(st.sampled_from(["time", "cost", "energy"]))
    tokens = draw(st.sampled_from([1e11, 1e12]))
    kw: dict[str, Any] = {
        "model": model, "tokens": tokens, "systems": systems, "objective": objective,
        "gpus": tuple(sorted(draw(st.sets(st.sampled_from([64, 128, 256]), min_size=1, max_size=2)))),
        "fabrics": tuple(draw(st.lists(st.sampled_from(["ndr", "hdr", "eth-400g"]), min_size=1, max_size=2,
                                       unique=True))),
        "oversubscription": (1.0,) if draw(st.booleans()) else (1.0, 2.0),
        "gbs": tuple(sorted(draw(st.sets(st.sampled_from([256, 512, 1024]), min_size=1, max_size=2)))),
        "top": draw(st.integers(1, 6)),
        "fabric_kinds": tuple(draw(st.lists(st.sampled_from(["fat-tree", "rail-only", "2-plane"]), min_size=1,
                                            max_size=3, unique=True))),
        "knobs": Knobs(pp=(1, 2, 4), cp=(1,), mbs=(1, 2), vpp=(1, 2),
                       precision=draw(st.sampled_from([("bf16",), ("bf16", "fp8")]))),
    }
    if draw(st.booleans()):  # a deadline that binds some clusters (days)
        kw["deadline_s"] = draw(st.sampled_from([2.0, 10.0, 60.0])) * 86400
    if draw(st.booleans()):
        kw["budget_usd"] = draw(st.sampled_from([2e5, 2e6, 2e7]))
    return SizingSpec(**kw)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(_spaces())
def test_bounded_search_equals_exhaustive(spec: SizingSpec) -> None:
    assert _answer(spec, exhaustive=False) == _answer(spec, exhaustive=True)


def test_bounded_search_on_a_pool_equals_exhaustive() -> None:
    """Two worker processes, each with its own shared incumbent (the objective values its clusters found): the
    same answer as the exhaustive search; 64 GPUs up to a 2-plane fabric, MoE and ZeRO-3 among the plans."""
    spec = SizingSpec(model="mixtral-8x7b", tokens=1e11, gpus=(64, 128), systems=("dgx-h100", "dgx-b200"),
                      fabrics=("ndr", "eth-400g"), fabric_kinds=("fat-tree", "rail-only", "2-plane"),
                      deadline_s=10 * 86400, top=3, knobs=Knobs(pp=(1, 2), cp=(1,), mbs=(1,), vpp=(1,),
                                                                 precision=("bf16",)))
    bounded = size(spec, executor="local", workers=2).to_json()
    exhaustive = size(spec, executor="serial", exhaustive=True).to_json()
    for key in COUNTS:
        bounded.pop(key)
        exhaustive.pop(key)
    assert json.loads(json.dumps(bounded, sort_keys=True, default=str)) == \
        json.loads(json.dumps(exhaustive, sort_keys=True, default=str))


def test_bounded_search_times_fewer_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound prunes: with the tie rule's spread held at the +-8% comparison band this test was written with
    (the published residuals move it: issue 45's fsdp cases widened dense Hopper's), fewer than half the plans are
    timed, and every plan is either timed or pruned."""
    import fabricsim.sizing.search as search

    monkeypatch.setattr(search, "tie_spread_bound", lambda moe, choices, catalog: math.log(1.08))
    spec = SizingSpec(model="llama3-70b", tokens=15e12, gpus=(512, 1024), systems=("dgx-h100",),
                      fabrics=("ndr", "eth-400g"), knobs=Knobs(mbs=(1, 2), precision=("bf16",)))
    bounded = size(spec, executor="serial")
    exhaustive = size(spec, executor="serial", exhaustive=True)
    assert bounded.plans_evaluated < exhaustive.plans_evaluated / 2
    assert bounded.plans_evaluated + bounded.plans_pruned == exhaustive.plans_evaluated + exhaustive.plans_pruned


def test_the_bound_never_exceeds_a_step() -> None:
    """Sampled plans of a dense and an MoE search (BF16 and FP8): predict_training's step time is at least
    (m + bubble) x microbatch_floor + optimizer, the bound the search prunes by."""
    rng = np.random.default_rng(7)
    checked = 0
    for model_id, system in (("llama3-70b", "dgx-h100"), ("mixtral-8x7b", "dgx-b200")):
        spec = SizingSpec(model=model_id, tokens=1e12, gpus=(256,), systems=(system,), fabrics=("ndr",),
                          oversubscription=(1.0,), knobs=Knobs(mbs=(1, 2), precision=("bf16", "fp8")))
        frame = size(spec, executor="serial", exhaustive=True).frame  # one cluster: the plans of clusters[0]
        model = spec_model(spec)
        choice = clusters(spec, default_catalog())[0]
        cluster = Cluster(default_catalog().system(system), fabric=choice.link, catalog=default_catalog())
        for i in rng.choice(len(frame), size=min(40, len(frame)), replace=False):
            row = frame.iloc[int(i)]
            shape = Shape(**{k: (str(row[k]) if k in ("recompute", "precision") else int(row[k]))
                             for k in Shape.__dataclass_fields__})
            plan = plan_for(model, spec, shape, int(row["gbs"]))
            floor, optimizer_s = microbatch_floor(model, plan, cluster)
            m = np.array([plan.microbatches])
            bubble = pipeline_bubble_fractions(np.array([plan.pp]), m, np.array([plan.virtual_stages]))[0]
            bound = (plan.microbatches + bubble) * floor + optimizer_s
            assert bound <= predict_training(model, plan, cluster).step_time_s * (1 + 1e-12)
            checked += 1
    assert checked >= 60
