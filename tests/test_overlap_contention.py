"""Overlapped NCCL collectives hold SMs: the compute beside an overlapped gradient reduction, FSDP gather or
context-parallel exchange runs on the rest of the GPU (tuning ``collective_kernel_sms``, 24 of an H100's 132)."""

from __future__ import annotations

import pytest

from fabricsim.catalog import default_catalog
from fabricsim.comm import Cluster
from fabricsim.model import load_model
from fabricsim.training import ParallelPlan, predict_training
from fabricsim.training.schedule import collective_sm_share


def _steps(plan: ParallelPlan, model: str, helds: tuple[int, ...]) -> list[float]:
    catalog = default_catalog()
    out = []
    for held in helds:
        tuning = catalog.tuning("default").model_copy(update={"collective_kernel_sms": held})
        tuned = catalog.model_copy(update={"tunings": {**catalog.tunings, "default": tuning}})
        out.append(predict_training(load_model(model), plan, Cluster(tuned.system("dgx-h100"), catalog=tuned))
                   .step_time_s)
    return out


def test_share_is_the_held_sms_over_the_gpus() -> None:
    catalog = default_catalog()
    cluster = Cluster(catalog.system("dgx-h100"), catalog=catalog)
    assert collective_sm_share(catalog.gpu("h100-sxm"), cluster) == pytest.approx(24 / 132)
    assert collective_sm_share(catalog.gpu("b200"), cluster) == pytest.approx(24 / 148)


@pytest.mark.parametrize("zero", [1, 3])
def test_more_held_sms_never_make_an_overlapped_step_faster(zero: int) -> None:
    """FSDP (ZeRO-3) gathers and the distributed optimizer's overlapped reduction both pay the share; holding no
    SM is the plain overlap, and the slowdown is at most the held share of the hidden communication."""
    plan = ParallelPlan.build(gpus=64, tp=1, pp=1, seq=4096, gbs=256, mbs=2, zero=zero, recompute="none",
                              overlap_grad_reduce=True, overlap_param_gather=True)
    steps = _steps(plan, "llama3-8b", (0, 12, 24, 66))
    assert steps == sorted(steps) and steps[0] < steps[-1]
    catalog = default_catalog()
    free = predict_training(load_model("llama3-8b"), plan, Cluster(catalog.system("dgx-h100"), catalog=catalog))
    hidden = sum(free.breakdown.overlapped.values())
    assert steps[2] - steps[0] <= hidden * 24 / 132 * 1.0001 * 2  # forward and backward windows at most


def test_no_overlap_no_contention() -> None:
    """Communication that does not overlap compute costs its own time and no SM share."""
    plan = ParallelPlan.build(gpus=64, tp=1, pp=1, seq=4096, gbs=256, mbs=2, zero=1, recompute="none",
                              overlap_grad_reduce=False, overlap_param_gather=False)
    first, second = _steps(plan, "llama3-8b", (0, 66))
    assert first == pytest.approx(second)


def test_fa2_attention_runs_at_the_sm80_fraction_off_ampere() -> None:
    """FlashAttention-2's Ampere-style kernels reach 35% of an H100's peak where FlashAttention-3 reaches 75%
    (arXiv:2407.08608): --attention-kernel fa2 slows a long-sequence H100 step, and leaves an A100 step (its native
    kernels) as it was."""
    model = load_model("llama3-8b")
    catalog = default_catalog()
    for system, slower in (("dgx-h100", True), ("dgx-a100", False)):
        cluster = Cluster(catalog.system(system), catalog=catalog)
        steps = [predict_training(model, ParallelPlan.build(gpus=8, tp=1, pp=1, seq=16384, gbs=16, mbs=1, zero=3,
                                                            recompute="full", attention_kernel=kernel),
                                  cluster).step_time_s for kernel in ("native", "fa2")]
        assert (steps[1] > steps[0] * 1.05) if slower else steps[1] == pytest.approx(steps[0])


def test_zero3_calls_per_layer_each_pay_the_latency() -> None:
    """DeepSpeed's ZeRO-3 gathers every sub-module by its own call and reduces in buckets: more calls per layer move
    the same bytes with more latency, never faster, and far more so across 1,536 ranks than across 64."""
    model = load_model("llama3-70b")
    catalog = default_catalog()
    cluster = Cluster(catalog.system("dgx-h100"), catalog=catalog)

    def step(gpus: int, calls: int, bucket: float | None = None) -> float:
        plan = ParallelPlan.build(gpus=gpus, tp=1, pp=1, seq=4096, gbs=2 * gpus, mbs=1, zero=3, recompute="full",
                                  zero3_gathers_per_layer=calls, zero3_reduce_bucket_params=bucket)
        return predict_training(model, plan, cluster).step_time_s

    small = [step(64, c) for c in (1, 7, 14)]
    large = [step(1536, c) for c in (1, 7, 14)]
    assert small == sorted(small) and large == sorted(large)
    assert large[1] / large[0] > small[1] / small[0]
    assert step(1536, 1, 1e8) >= step(1536, 1, 5e8)  # smaller reduce buckets: more calls


def test_deepspeed_profile_gathers_by_sub_module() -> None:
    from fabricsim.training import framework_profile

    values = framework_profile("deepspeed").values()
    assert values["zero3_gathers_per_layer"] == 7 and values["zero3_reduce_bucket_params"] == 5e8


def test_fsdp2_copy_out_reads_and_writes_every_gathered_layer() -> None:
    """FSDP2 copies each gathered layer out of the flat all-gather output on the compute stream: the step gains
    that read and write of the weights per gather (forward, backward, and the recompute's), in HBM time, and FSDP1
    or DeepSpeed plans (no copy-out) are untouched."""
    from fabricsim.model import hbm_efficiency
    from fabricsim.training import framework_profile

    assert framework_profile("torchtitan").values()["fsdp_copy_out"] is True
    model = load_model("llama3-8b")
    catalog = default_catalog()
    cluster = Cluster(catalog.system("dgx-h100"), catalog=catalog)
    base = dict(gpus=8, tp=1, pp=1, seq=4096, gbs=16, mbs=2, zero=3, recompute="full")
    plain = predict_training(model, ParallelPlan.build(**base), cluster)
    copied = predict_training(model, ParallelPlan.build(**base, fsdp_copy_out=True), cluster)
    gpu = catalog.gpu("h100-sxm")
    rate = gpu.hbm_bytes_per_s * hbm_efficiency(gpu).value
    extra = copied.breakdown.exposed["hbm"] - plain.breakdown.exposed["hbm"]
    assert extra > 0 and copied.step_time_s > plain.step_time_s
    # 3 gathers per layer (forward, recompute, backward), 2 bytes read + 2 written per parameter, per micro-batch
    assert extra <= 8 * 3 * 4 * 8.1e9 / 8 / rate * 1.01  # micro-batches x gathers x bytes x params / dp / rate
