"""The caches of a stage's per-micro-batch work and activations key a plan without its data parallelism, batch and
ZeRO stage (a sizing search reuses them across cluster sizes): what the full plan gives must equal what that key
gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.catalog import default_catalog
from fabricsim.model import load_model
from fabricsim.training import ParallelPlan
from fabricsim.training.memory import _stage_activations
from fabricsim.training.plan import NOT_STAGE_WORK, stage_key
from fabricsim.training.stage import _priced_stage_work


@st.composite
def _cases(draw: st.DrawFn) -> tuple[str, ParallelPlan, str]:
    model_id = draw(st.sampled_from(["llama3-8b", "mixtral-8x7b", "gpt-18.4b"]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    dp = draw(st.sampled_from([1, 2, 4, 16]))
    mbs = draw(st.sampled_from([1, 2]))
    ep = draw(st.sampled_from([1, 2, 8])) if model_id == "mixtral-8x7b" else 1
    etp = draw(st.sampled_from([1, tp]))
    if (tp * dp) % (ep * etp):
        ep, etp = 1, tp
    plan = ParallelPlan.build(tp=tp, pp=pp, dp=dp, ep=ep, etp=None if etp == tp else etp, mbs=mbs,
                              gbs=mbs * dp * draw(st.sampled_from([1, 4, 32])), seq=4096,
                              recompute=draw(st.sampled_from(["none", "selective", "full"])),
                              zero=draw(st.sampled_from([0, 1, 2] + ([3] if pp == 1 else []))),
                              precision=draw(st.sampled_from(["bf16", "fp8"])),
                              moe_balance=draw(st.sampled_from(["random", "forced", "skewed"])))
    return model_id, plan, draw(st.sampled_from(["h100-sxm", "b200"]))


@settings(max_examples=60, deadline=None)
@given(_cases())
def test_stage_work_reads_no_dp_batch_or_zero(case: tuple[str, ParallelPlan, str]) -> None:
    model_id, plan, gpu_id = case
    model, gpu = load_model(model_id), default_catalog().gpu(gpu_id)
    other = _other_data_parallelism(plan)
    assert stage_key(other) == stage_key(plan)
    for stage in range(plan.pp):
        assert _priced_stage_work(model, plan, gpu, stage) == _priced_stage_work(model, other, gpu, stage)


@settings(max_examples=60, deadline=None)
@given(_cases())
def test_stage_activations_read_no_dp_batch_or_zero(case: tuple[str, ParallelPlan, str]) -> None:
    model_id, plan, _ = case
    model = load_model(model_id)
    other = _other_data_parallelism(plan)
    for stage in range(plan.pp):
        assert _stage_activations(model, plan, stage) == _stage_activations(model, other, stage)


def _other_data_parallelism(plan: ParallelPlan) -> ParallelPlan:
    """The plan with other values of every field the key leaves out (valid: gbs a multiple of mbs x dp)."""
    changed = {"dp": plan.dp * 2, "gbs": plan.gbs * 6, "zero": (plan.zero + 1) % 3, "gpus": None}
    assert set(changed) == NOT_STAGE_WORK
    return plan.model_copy(update=changed)
