"""Parallel plans: defaults, the products that must agree, checks against a model, pipeline bookkeeping."""

from __future__ import annotations

from typing import Any

import pytest

from fabricsim.errors import SpecError
from fabricsim.model.presets import load_model
from fabricsim.training.plan import DEFAULT_MBS, ParallelPlan, check_plan, chunk_layers, stage_layers

BASE: dict[str, Any] = {"tp": 8, "pp": 4, "dp": 32, "seq": 8192, "gbs": 1024}


def test_defaults() -> None:
    p = ParallelPlan.build(**BASE)
    assert p.mbs == DEFAULT_MBS == 1
    assert p.schedule == "1f1b" and p.virtual_stages == 1
    assert p.recompute == "none" and p.zero == 1
    assert p.sequence_parallel is True
    assert p.overlap_grad_reduce is True and p.overlap_param_gather is True
    assert p.flash_attention is True and p.tp_comm_overlap is False
    assert p.precision == "bf16" and p.kernels == "fused" and p.pp_layout is None
    assert p.order == "tp-cp-ep-dp-pp"
    assert p.world_size == 1024
    assert p.microbatches == 1024 // 32
    assert p.tokens_per_step() == 1024 * 8192


def test_sequence_parallel_off_without_tp_and_interleaved_by_virtual_stages() -> None:
    assert ParallelPlan.build(dp=8, seq=2048, gbs=64).sequence_parallel is False
    p = ParallelPlan.build(**BASE, virtual_stages=2)
    assert p.schedule == "interleaved"


def test_dp_from_gpus() -> None:
    p = ParallelPlan.build(gpus=1024, tp=8, pp=4, seq=8192, gbs=1024)
    assert p.dp == 32


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gpus": 512}, r"gpus: 512 must equal tp\*pp\*dp\*cp = 8\*4\*32\*1 = 1024"),
        ({"gbs": 1000}, r"gbs: 1000 must be divisible by mbs\*dp = 1\*32 = 32"),
        ({"mbs": 3, "gbs": 1024}, r"mbs\*dp = 3\*32 = 96"),
        ({"ep": 64}, r"ep: etp\*ep = 8\*64 = 512 must divide tp\*cp\*dp = 8\*1\*32 = 256"),
        ({"cp": 3, "dp": 32}, r"seq: 8192 must be divisible by 2\*cp = 6"),
        ({"virtual_stages": 2, "schedule": "1f1b"}, "needs schedule 'interleaved'"),
        ({"pp": 1, "virtual_stages": 2}, r"interleaved schedule needs pp >= 2"),
        ({"zero": 4}, "zero"),
        ({"recompute": "partial"}, "recompute"),
        ({"order": "tp-dp-xx-pp"}, "unknown dimension 'xx'"),
        ({"order": "tp-dp-pp"}, "missing cp"),
        ({"tpp": 2}, r"tpp: unknown field; did you mean 'tp'"),
        ({"seq": 8190}, r"seq/cp = 8190 must be divisible by tp \(8\)"),
    ],
)
def test_plan_errors_name_the_product(change: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ParallelPlan.build(**{**BASE, **change})


def test_gpus_not_divisible_when_deriving_dp() -> None:
    with pytest.raises(SpecError, match=r"gpus: 1000 must be divisible by tp\*pp\*cp = 8\*4\*1 = 32"):
        ParallelPlan.build(gpus=1000, tp=8, pp=4, seq=2048, gbs=1024)


def test_dp_or_gpus_needed() -> None:
    with pytest.raises(SpecError, match=r"gpus: give the GPU count .* or the data-parallel size dp"):
        ParallelPlan.build(tp=8, seq=2048, gbs=64)


def test_check_plan_against_model() -> None:
    llama = load_model("llama3-70b")
    assert check_plan(llama, ParallelPlan.build(**BASE)) == []
    with pytest.raises(SpecError, match=r"heads \(64\) must be divisible by tp \(3\)"):
        check_plan(llama, ParallelPlan.build(tp=3, dp=2, seq=2048, gbs=2, sequence_parallel=False))
    warnings = check_plan(llama, ParallelPlan.build(tp=16, dp=2, seq=8192, gbs=64))
    assert any("kv_heads (8): each KV head is replicated on 2 GPUs" in w for w in warnings)
    with pytest.raises(SpecError, match="needs an MoE model"):
        check_plan(llama, ParallelPlan.build(**{**BASE, "ep": 2}))


def test_check_plan_moe() -> None:
    mixtral = load_model("mixtral-8x7b")
    assert check_plan(mixtral, ParallelPlan.build(tp=2, dp=8, ep=8, seq=4096, gbs=64)) == []
    with pytest.raises(SpecError, match=r"experts \(8\) must be divisible by ep \(16\)"):
        check_plan(mixtral, ParallelPlan.build(tp=2, dp=16, ep=16, seq=4096, gbs=64))


def test_uneven_layers_warn_and_too_many_stages_fail() -> None:
    big = load_model("llama3-405b")  # 126 layers
    plan = ParallelPlan.build(tp=8, pp=16, dp=8, seq=8192, gbs=2048)
    warnings = check_plan(big, plan)
    assert any("layers (126) on pp = 16: stages hold 7 or 8 layers" in w for w in warnings)
    counts = [len(s) for s in stage_layers(big, plan)]
    assert counts == [7] + [8] * 14 + [7]  # Llama 3 405B: first and last stage one layer lighter
    tiny = load_model("gpt-1.7b")  # 24 layers
    with pytest.raises(SpecError, match=r"layers \(24\) must be at least pp\*virtual_stages = 8\*4 = 32"):
        check_plan(tiny, ParallelPlan.build(pp=8, virtual_stages=4, dp=1, seq=2048, gbs=64))


def test_chunks_cover_every_layer_once_in_order() -> None:
    chunks = chunk_layers(126, 32)
    flat = [i for c in chunks for i in c]
    assert flat == list(range(126))
    assert max(len(c) for c in chunks) - min(len(c) for c in chunks) <= 1


def test_interleaved_stage_gets_chunks_round_robin() -> None:
    model = load_model("gpt-1.7b")  # 24 layers
    plan = ParallelPlan.build(pp=4, virtual_stages=2, dp=1, seq=2048, gbs=8)
    stages = stage_layers(model, plan)
    assert stages[0] == (0, 1, 2, 12, 13, 14)
    assert stages[3] == (9, 10, 11, 21, 22, 23)


def test_microbatches_in_flight() -> None:
    p = ParallelPlan.build(pp=4, dp=1, seq=2048, gbs=16)
    assert [p.microbatches_in_flight(s) for s in range(4)] == [4, 3, 2, 1]
    few = ParallelPlan.build(pp=4, dp=1, seq=2048, gbs=2)
    assert few.microbatches_in_flight(0) == 2
    v = 2
    inter = ParallelPlan.build(pp=4, virtual_stages=v, dp=1, seq=2048, gbs=16)
    # Korthikanti et al. 2022: the first stage holds pp * (1 + (pp - 1) / (pp * v)) micro-batches' activations
    assert inter.microbatches_in_flight(0) == pytest.approx(4 * (1 + 3 / (4 * v)))
    assert inter.microbatches_in_flight(3) < inter.microbatches_in_flight(0)
    with pytest.raises(SpecError, match="stage 4 out of range"):
        p.microbatches_in_flight(4)


def test_interleaving_only_where_megatron_runs_it() -> None:
    """Megatron-LM asserts pp > 2 and micro-batches a multiple of pp for the interleaved schedule: `train` warns,
    the sizing space never proposes it (the auto vpp of `train` uses the same rule)."""
    from fabricsim.catalog import default_catalog
    from fabricsim.sizing import Knobs, SizingSpec
    from fabricsim.sizing.space import shapes
    from fabricsim.training.plan import megatron_runs_interleaved

    assert not megatron_runs_interleaved(2, 8) and not megatron_runs_interleaved(4, 6)
    assert megatron_runs_interleaved(3, 6) and megatron_runs_interleaved(4, 8)
    llama = load_model("llama3-8b")
    warnings = check_plan(llama, ParallelPlan.build(pp=2, dp=4, seq=4096, gbs=32, virtual_stages=2))
    assert any("pp > 2" in w for w in warnings)
    assert check_plan(llama, ParallelPlan.build(pp=4, dp=2, seq=4096, gbs=32, virtual_stages=2)) == []
    spec = SizingSpec(model="llama3-8b", tokens=1e12, seq=4096, gbs=(256,), gpus=(64,), systems=("dgx-h100",),
                      fabrics=("ndr",), oversubscription=(1.0,), knobs=Knobs(recompute=("none",), zero=(1,)))
    system = default_catalog().system("dgx-h100")
    found = [(s.pp, s.vpp) for s in shapes(llama, spec, system, True, 64)]
    assert any(v > 1 for p, v in found) and all(p > 2 for p, v in found if v > 1)
