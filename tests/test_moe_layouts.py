"""Issue 22's layouts and MoE physics: expert parallelism folded over TP ranks (Megatron-Core's MoE parallel
folding, --etp), jobs on part of each GB200 NVL72 rack, and the invariants of the MoE step model."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.catalog import Efficiency, default_catalog, partly_used
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.model import ModelSpec, grouped_gemm_efficiency, load_model
from fabricsim.sizing import SizingSpec, size
from fabricsim.training import (
    ParallelPlan,
    TrainingPrediction,
    check_plan,
    memory_report,
    place,
    predict_training,
)

GIB = 2**30


@cache
def _cluster(system: str) -> Cluster:
    catalog = default_catalog()
    return Cluster(catalog.system(system), catalog=catalog)


def test_ep_may_span_tp_ranks_when_experts_are_not_tensor_parallel() -> None:
    """DeepSeek-V3 as Megatron-Core runs it on 1,024 H100: TP 2, PP 16, EP 64 > dp x cp = 32, ETP 1."""
    with pytest.raises(SpecError, match=r"etp\*ep = 2\*64 = 128 must divide tp\*cp\*dp = 2\*1\*32 = 64"):
        ParallelPlan.build(gpus=1024, tp=2, pp=16, ep=64, seq=4096, gbs=8192)
    plan = ParallelPlan.build(gpus=1024, tp=2, pp=16, ep=64, etp=1, seq=4096, gbs=8192)
    assert (plan.expert_tp, plan.expert_dp) == (1, 1)
    groups = place(plan).groups("ep")
    assert groups.shape == (16, 64)  # one EP group per pipeline stage, over both TP ranks
    assert (np.diff(groups[0]) == 1).all()
    model = load_model("deepseek-v3")
    check_plan(model, plan)
    pred = predict_training(model, plan, _cluster("dgx-h100"))
    assert pred.memory.fits and pred.step_time_s > 0


def test_expert_tensor_parallel_shards_experts_and_adds_its_gathers() -> None:
    """Grok-1 on 1,024 H100: ETP 4 vs ETP 1 at the same EP holds 4x fewer expert weights per GPU and pays the
    expert-TP all-gather / reduce-scatter of the routed tokens."""
    model = load_model("grok-1")
    base = dict(gpus=1024, tp=4, pp=8, ep=8, seq=8192, gbs=1024, mbs=1, virtual_stages=1, recompute="none", zero=2)
    folded = ParallelPlan.build(**base, etp=1)
    sharded = ParallelPlan.build(**base)
    assert sharded.expert_tp == 4 and folded.expert_tp == 1
    for plan in (folded, sharded):
        check_plan(model, plan)
        pred = predict_training(model, plan, _cluster("dgx-h100"))
        assert pred.memory.fits, pred.memory.summary()
    m_folded = memory_report(model, folded, 80 * GIB)
    m_sharded = memory_report(model, sharded, 80 * GIB)
    assert m_sharded.weights_bytes < m_folded.weights_bytes


def test_128_gpus_on_two_gb200_racks_of_64() -> None:
    catalog = default_catalog()
    rack = catalog.system("gb200-nvl72")
    half = catalog.system("gb200-nvl72/64")
    assert half == partly_used(rack, 64)
    assert (half.gpus_per_node, half.nvlink_domain_gpus, half.nics_per_node) == (64, 64, 64)
    assert half.price_usd == rack.price_usd and half.power_w == rack.power_w  # the whole rack is paid for
    with pytest.raises(SpecError, match="between 1 and the 72 GPUs"):
        catalog.system("gb200-nvl72/80")
    model = load_model("llama3-70b")
    plan = ParallelPlan.build(gpus=128, tp=4, pp=4, seq=8192, gbs=256, mbs=1)
    pred = predict_training(model, plan, Cluster(half, catalog=catalog))
    assert pred.nodes == 2 and pred.memory.fits


def test_size_prices_power_of_two_jobs_on_partly_used_racks() -> None:
    spec = SizingSpec.model_validate({
        "model": "llama3-70b", "tokens": 1e12, "gpus": (128,), "gbs": (256,), "seq": 8192,
        "systems": ("gb200-nvl72",), "fabrics": ("ndr",), "oversubscription": (1.0,),
        "knobs": {"tp": (4,), "pp": (4,), "recompute": ("none",), "zero": (1,), "precision": ("bf16",)}})
    result = size(spec)
    rows = result.ranked
    half = rows[rows["system"] == "gb200-nvl72/64"]
    assert len(half) and (half["gpus"] == 128).all() and (half["nodes"] == 2).all()
    assert half["cost_usd"].notna().all()


def test_llama3_405b_plan_meta_ran_fits_in_80_gb() -> None:
    """Dubey et al. 2024 sec. 3.3.2 / Table 4: 16,384 H100, TP 8, CP 1, PP 16, DP 128 at 8K, the first and last
    stages one layer lighter, FSDP sharding optimizer state and gradients (ZeRO-2), BF16."""
    model = load_model("llama3-405b")
    plan = ParallelPlan.build(gpus=16384, tp=8, pp=16, cp=1, seq=8192, gbs=2048, mbs=1, zero=2,
                              pp_layout=(7, *([8] * 14), 7))
    report = memory_report(model, plan, 80 * GIB)
    assert report.fits, report.summary()


@settings(max_examples=60, deadline=None)
@given(rows=st.floats(1.0, 1e6), more=st.floats(0.0, 1e6), gpu=st.sampled_from(["h100-sxm", "b200", "gb200"]),
       precision=st.sampled_from(["bf16", "fp8"]))
def test_more_tokens_per_expert_never_lower_grouped_gemm_efficiency(rows: float, more: float, gpu: str,
                                                                    precision: str) -> None:
    g = default_catalog().gpu(gpu)
    low, high = grouped_gemm_efficiency(np.array([rows, rows + more]), g, precision)
    assert 0 < low <= high <= 1


def _moe(experts: int, top_k: int, ffn: int) -> ModelSpec:
    return ModelSpec.from_data({"name": f"moe-{experts}x{ffn}", "layers": 16, "hidden": 4096, "heads": 32,
                                "kv_heads": 8, "ffn_hidden": 14336, "gated_mlp": True, "vocab": 32000,
                                "moe": {"experts": experts, "top_k": top_k, "ffn_hidden": ffn}})


@settings(max_examples=20, deadline=None)
@given(split=st.sampled_from([2, 4, 8]), ep=st.sampled_from([1, 2, 8]), tp=st.sampled_from([1, 2]))
def test_more_smaller_experts_with_the_same_active_parameters_are_never_faster(split: int, ep: int, tp: int) -> None:
    """8 experts of 4096 top-2 vs 8*split experts of 4096/split top-2*split: the same active FLOPs, more and
    smaller expert GEMMs with fewer tokens each."""
    coarse, fine = _moe(8, 2, 4096), _moe(8 * split, 2 * split, 4096 // split)
    plan = ParallelPlan.build(gpus=16, tp=tp, ep=ep, seq=4096, gbs=64, mbs=1, recompute="none", zero=1)
    cluster = _cluster("dgx-h100")
    assert predict_training(fine, plan, cluster).step_time_s >= predict_training(coarse, plan, cluster).step_time_s


@settings(max_examples=15, deadline=None)
@given(ep=st.sampled_from([2, 4, 8]), nodes_apart=st.booleans())
def test_ep_all_to_all_inside_nvlink_is_never_slower_than_across_nodes(ep: int, nodes_apart: bool) -> None:
    """The same EP size with its group inside one node (order tp-cp-ep-dp-pp) vs spread one GPU a node
    (ep outermost): the NVLink layout never takes longer."""
    model = _moe(16, 2, 2048)
    inside = ParallelPlan.build(gpus=64, ep=ep, seq=4096, gbs=64, mbs=1, recompute="none", zero=1)
    across = inside.model_copy(update={"order": "tp-cp-dp-pp-ep"}) if nodes_apart else \
        ParallelPlan.build(gpus=64, ep=ep, seq=4096, gbs=64, mbs=1, recompute="none", zero=1, order="tp-cp-dp-ep-pp")
    cluster = _cluster("dgx-h100")
    t_in = predict_training(model, inside, cluster)
    t_across = predict_training(model, across, cluster)
    assert t_in.step_time_s <= t_across.step_time_s * (1 + 1e-9)


def _dsv3_with(flag: str) -> tuple[TrainingPrediction, TrainingPrediction]:
    """DeepSeek-V3 on 1,024 H100 (TP2 PP16 EP64, ETP1) without and with one plan flag set."""
    model = load_model("deepseek-v3")
    plan = ParallelPlan.build(gpus=1024, tp=2, pp=16, ep=64, etp=1, seq=4096, gbs=8192, mbs=1, recompute="none")
    cluster = _cluster("dgx-h100")
    return predict_training(model, plan, cluster), predict_training(model, plan.model_copy(update={flag: True}),
                                                                    cluster)


def test_ep_comm_overlap_hides_all_to_all_behind_compute_and_never_slows() -> None:
    base, over = _dsv3_with("ep_comm_overlap")
    assert over.step_time_s < base.step_time_s
    assert sum(over.breakdown.overlapped.values()) > sum(base.breakdown.overlapped.values())


def test_no_dropout_keeps_no_masks() -> None:
    model = load_model("llama3-405b")
    plan = ParallelPlan.build(gpus=256, tp=4, pp=16, seq=8192, gbs=1536, mbs=1, virtual_stages=4, zero=1)
    with_masks = memory_report(model, plan, 186 * GIB)
    without = memory_report(model, plan.model_copy(update={"dropout": False}), 186 * GIB)
    assert without.activations_bytes < with_masks.activations_bytes
    assert without.weights_bytes == with_masks.weights_bytes


def test_train_cli_takes_the_layout_options() -> None:
    from typer.testing import CliRunner

    from fabricsim.cli import app

    result = CliRunner().invoke(app, ["train", "--model", "llama3-70b", "--system", "gb200-nvl72", "--gpus", "128",
                                      "--gpus-per-node", "64", "--tp", "4", "--pp", "4", "--seq", "8192", "--gbs",
                                      "256", "--no-dropout", "--json"])
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.output)
    assert data["nodes"] == 2 and data["plan"]["dropout"] is False
    bad = CliRunner().invoke(app, ["train", "--model", "deepseek-v3", "--gpus", "1024", "--tp", "2", "--pp", "16",
                                   "--ep", "64", "--etp", "3", "--seq", "4096", "--gbs", "8192"])
    assert bad.exit_code == 2 and "etp" in bad.output and "Traceback" not in bad.output


@settings(max_examples=20, deadline=None)
@given(capacity=st.floats(0.5, 4.0), balance=st.sampled_from(["random", "skewed"]), ep=st.sampled_from([2, 4, 8]))
def test_a_capacity_factor_never_makes_a_step_slower(capacity: float, balance: str, ep: int) -> None:
    model = _moe(64, 4, 1024)
    plan = ParallelPlan.build(gpus=16, ep=ep, seq=4096, gbs=64, mbs=1, recompute="none", zero=1, moe_balance=balance)
    cluster = _cluster("dgx-h100")
    dropless = predict_training(model, plan, cluster).step_time_s
    capped = predict_training(model, plan.model_copy(update={"capacity_factor": capacity}), cluster).step_time_s
    assert capped <= dropless * (1 + 1e-12)


def test_skewed_routing_is_slower_than_random_and_forced_is_fastest() -> None:
    model = load_model("deepseek-v3")
    plan = ParallelPlan.build(gpus=1024, tp=2, pp=16, ep=64, etp=1, seq=4096, gbs=8192, mbs=1, recompute="none")
    cluster = _cluster("dgx-h100")
    times = {b: predict_training(model, plan.model_copy(update={"moe_balance": b}), cluster).step_time_s
             for b in ("forced", "random", "skewed")}
    assert times["forced"] <= times["random"] < times["skewed"]


def test_node_aware_dispatch_sends_a_token_once_per_remote_node() -> None:
    from fabricsim.model import expected_remote_nodes

    assert expected_remote_nodes(128, 8, 1) == 0.0
    assert expected_remote_nodes(128, 8, 2) == pytest.approx(1 - math.comb(64, 8) / math.comb(128, 8))
    assert expected_remote_nodes(256, 8, 64) <= 8  # never more nodes than picks
    model = _moe(128, 8, 768)
    cluster = _cluster("dgx-h100")
    for ep in (8, 16, 32):  # inside one node, then across 2 and 4
        plan = ParallelPlan.build(gpus=32, ep=ep, seq=4096, gbs=64, mbs=1, recompute="none", zero=1,
                                  moe_balance="forced")
        nccl = predict_training(model, plan, cluster).step_time_s
        deepep = predict_training(model, plan.model_copy(update={"moe_dispatcher": "deepep"}), cluster).step_time_s
        assert deepep <= nccl * (1 + 1e-12)
        if ep == 8:
            assert deepep == pytest.approx(nccl)
        else:
            assert deepep < nccl


def test_size_holds_the_moe_options_fixed_and_refuses_bad_ones() -> None:
    from typer.testing import CliRunner

    from fabricsim.cli import app

    base = ["size", "--model", "deepseek-v3", "--systems", "dgx-h100", "--gpus", "1024", "--tp", "2", "--pp", "16",
            "--ep", "64", "--etp", "1", "--seq", "4096", "--gbs", "8192", "--tokens", "1e12", "--fabrics", "ndr",
            "--oversubscription", "1"]
    fast = CliRunner().invoke(app, [*base, "--moe-balance", "forced", "--moe-dispatcher", "deepep",
                                    "--ep-comm-overlap", "--json"])
    slow = CliRunner().invoke(app, [*base, "--moe-balance", "skewed", "--json"])
    assert fast.exit_code == 0 and slow.exit_code == 0, fast.output + slow.output
    import json

    assert json.loads(fast.output)["results"][0]["tokens_per_s"] > json.loads(slow.output)["results"][0]["tokens_per_s"]
    bad = CliRunner().invoke(app, [*base, "--moe-balance", "bogus"])
    assert bad.exit_code == 2 and "--moe-balance" in bad.output and len(bad.output.strip().splitlines()) == 1


def test_overlapped_dispatch_costs_the_sms_it_holds() -> None:
    """Hiding the all-to-all behind compute is not free: the dispatch kernels hold their SMs (32 of H100's 132:
    NCCL's maxCTAs, HybridEP in NVIDIA's recipes), so the compute beside them slows by that share of the hidden
    time. With no SM held it is the plain overlap; more SMs held never make the step faster."""
    from fabricsim.training.schedule import dispatch_sm_share
    model = load_model("deepseek-v3")
    plan = ParallelPlan.build(gpus=1024, tp=2, pp=16, ep=64, etp=1, seq=4096, gbs=8192, mbs=1, recompute="none",
                              ep_comm_overlap=True)
    catalog = default_catalog()
    gpu = catalog.gpu("h100-sxm")
    assert dispatch_sm_share(gpu, plan, _cluster("dgx-h100")) == pytest.approx(32 / 132)
    steps = []
    for held in (0, 16, 32, 64):
        tuning = catalog.tuning("default").model_copy(update={"dispatch_kernel_sms": {"alltoall": held}})
        tuned = catalog.model_copy(update={"tunings": {**catalog.tunings, "default": tuning}})
        steps.append(predict_training(model, plan, Cluster(tuned.system("dgx-h100"), catalog=tuned)).step_time_s)
    assert steps == sorted(steps) and steps[0] < steps[-1]


def test_attention_pays_its_exponentials() -> None:
    """Fused attention's matmuls run beside one softmax exponential per score: H100 keeps FlashAttention-3's
    measured 0.44 overall at head dim 128 (768 FLOPs per exponential over forward + backward), narrower heads run
    below it (FA3: 476 vs 638 TFLOP/s forward at 64 vs 128), and Blackwell Ultra's doubled exponential rate makes
    the same attention faster than on Blackwell."""
    from fabricsim.model import attention_flops_per_s
    catalog = default_catalog()
    h100 = catalog.gpu("h100-sxm")
    assert attention_flops_per_s(h100, 768.0) / h100.bf16_flops_per_s == pytest.approx(0.44, abs=0.002)
    # FA3's forward alone (matmuls at ~95% of peak: 638 TFLOP/s at head dim 128 less its exponentials)
    fa3_forward = h100.model_copy(update={"attention_efficiency": Efficiency(value=0.948, source="test")})
    forward_64, forward_128 = attention_flops_per_s(fa3_forward, 256.0), attention_flops_per_s(fa3_forward, 512.0)
    assert forward_128 / 1e12 == pytest.approx(638, rel=0.02)
    assert forward_64 / forward_128 == pytest.approx(476 / 638, abs=0.03)
    assert attention_flops_per_s(h100, 384.0) < attention_flops_per_s(h100, 768.0)  # training, head dim 64 < 128
    assert attention_flops_per_s(catalog.gpu("gb300"), 768.0) > attention_flops_per_s(catalog.gpu("gb200"), 768.0)
    a100 = catalog.gpu("a100-sxm-80gb")  # no exponential rate in the catalog: the efficiency alone
    assert attention_flops_per_s(a100, 256.0) == attention_flops_per_s(a100)


def test_shared_expert_overlap_hides_at_most_the_shared_experts() -> None:
    """Megatron-Core's --moe-shared-expert-overlap: the shared experts run beside the same micro-batch's dispatch
    and combine. Never slower than without it, it hides at most the all-to-all, and it excludes the all-to-all
    overlap (which Megatron-Core turns it off under)."""
    base, shared = _dsv3_with("shared_expert_overlap")
    assert shared.step_time_s < base.step_time_s
    hidden = sum(shared.breakdown.overlapped.values()) - sum(base.breakdown.overlapped.values())
    assert 0 < hidden <= base.breakdown.exposed["infiniband"] + base.breakdown.exposed["nvlink"]
    with pytest.raises(SpecError, match="exclude each other"):
        ParallelPlan.build(gpus=1024, tp=2, pp=16, ep=64, etp=1, seq=4096, gbs=8192, mbs=1,
                           shared_expert_overlap=True, ep_comm_overlap=True)
    no_shared = load_model("mixtral-8x7b")  # no shared experts: the flag changes nothing
    mplan = ParallelPlan.build(gpus=64, tp=2, pp=4, ep=8, etp=1, seq=4096, gbs=512, mbs=1, recompute="none")
    m64 = _cluster("dgx-h100")
    assert predict_training(no_shared, mplan.model_copy(update={"shared_expert_overlap": True}), m64).step_time_s \
        == predict_training(no_shared, mplan, m64).step_time_s
