"""Issue 21, flags that did nothing and model items: collective oversubscription and routing, infer flag checks,
one op-name spelling rule, one MFU definition, MoE monotonicity in top_k."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.catalog import Catalog
from fabricsim.cli import app


def _json(runner: CliRunner, args: list[str]) -> Any:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# 1. collective --oversubscription acts analytically (as train prices it); --routing needs --sim flow

def test_collective_analytical_honours_oversubscription(runner: CliRunner) -> None:
    base = ["collective", "--nodes", "64", "--min", "1G", "--max", "1G"]
    one = _json(runner, [*base, "--oversubscription", "1"])
    four = _json(runner, [*base, "--oversubscription", "4"])
    assert four["assumptions"]["network"]["oversubscription"] == 4.0
    assert four["rows"][0]["time_s"] > 1.5 * one["rows"][0]["time_s"]
    net1 = one["assumptions"]["network"]["achievable_bytes_per_s_per_node"]
    net4 = four["assumptions"]["network"]["achievable_bytes_per_s_per_node"]
    assert abs(net4 - net1 / 4) < 1e-6 * net1


def test_collective_oversubscription_same_mechanism_as_train() -> None:
    from fabricsim.catalog import default_catalog
    from fabricsim.collectives import group_shape
    from fabricsim.comm import Cluster, cached_group_shape

    catalog = default_catalog()
    system = catalog.system("dgx-h100")
    cluster = Cluster(system=system, catalog=catalog, oversubscription=4.0)
    train_shape = cached_group_shape(cluster, 512, 8)
    cli_shape = group_shape(system, 512, fabric=None, oversubscription=4.0, catalog=catalog)
    assert train_shape == cli_shape


def test_collective_routing_needs_flow(runner: CliRunner) -> None:
    result = runner.invoke(app, ["collective", "--nodes", "64", "--routing", "adaptive"])
    assert result.exit_code == 2
    assert "--sim flow" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


# 2. infer: serving options act only with --rate or --trace

INFER = ["infer", "--model", "llama3-70b", "--tp", "8", "--weights", "fp8", "--prompt", "1024", "--output", "256"]


def test_serving_options_without_rate_are_one_line_errors(runner: CliRunner) -> None:
    for extra in (["--disagg", "1:1"], ["--slo-ttft", "2s"], ["--slo-tpot", "50ms"], ["--replicas", "2"],
                  ["--duration", "60s"], ["--max-seqs", "8"], ["--no-chunked-prefill"], ["--seed", "3"]):
        result = runner.invoke(app, [*INFER, *extra])
        assert result.exit_code == 2, (extra, result.output)
        assert "--rate" in result.output and extra[0] in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_trace_is_an_input_and_excludes_poisson_options(runner: CliRunner, tmp_path: Path) -> None:
    trace = tmp_path / "requests.jsonl"
    trace.write_text("".join(json.dumps({"arrival_s": i * 0.25, "prompt_tokens": 1024, "output_tokens": 64}) + "\n"
                             for i in range(8)))
    data = _json(runner, [*INFER, "--trace", str(trace), "--slo-ttft", "2s", "--slo-tpot", "50ms"])
    assert data["requests_arrived"] == 8 and data["serving_options"]["trace"] == str(trace)
    for extra in (["--rate", "8"], ["--duration", "120s"], ["--seed", "1"]):
        result = runner.invoke(app, [*INFER, "--trace", str(trace), *extra])
        assert result.exit_code == 2 and "--trace" in result.output, result.output


def test_readme_serving_example_runs_in_both_forms(runner: CliRunner, tmp_path: Path) -> None:
    """The README's example with --rate (its --trace is the alternative input, not an extra flag)."""
    data = _json(runner, [*INFER, "--rate", "8", "--duration", "120s", "--slo-ttft", "2s", "--slo-tpot", "50ms"])
    assert data["serving_options"]["rate_per_s"] == 8 and data["serving_options"]["duration_s"] == 120


# 3. one op-name spelling rule: `collective --op` and `bench collective/parse --op` accept the same names

SPELLINGS = ("all_reduce", "allreduce", "All-Reduce", "ALLREDUCE", "all_reduce_perf", "allgather", "all-gather",
             "reducescatter", "reduce_scatter_perf", "broadcast", "bcast", "reduce", "alltoall", "all-to-all",
             "alltoall_perf", "sendrecv", "send_recv", " all_reduce ", "gather", "allreduce_x", "all reduce", "",
             "ncclAllReduce", "all__reduce")


def test_one_op_spelling_rule_for_collective_and_bench(runner: CliRunner) -> None:
    from fabricsim.bench import parse_ops
    from fabricsim.collectives import OPS, parse_op
    from fabricsim.errors import SpecError

    log = str(Path(__file__).parent / "data" / "nccl-tests" / "single-group-inplace-all_reduce.log")
    accepted = 0
    for spelling in SPELLINGS:
        try:
            canonical: str | None = parse_op(spelling)
        except SpecError:
            canonical = None
        coll = runner.invoke(app, ["collective", "--op", spelling, "--min", "1M", "--max", "1M", "--json"])
        parsed = runner.invoke(app, ["bench", "parse", log, "--op", spelling, "--json"])
        if canonical is None:
            assert coll.exit_code == 2 and "Traceback" not in coll.output, (spelling, coll.output)
            if spelling.strip():  # bench takes comma lists: an empty name is "give at least one operation"
                assert parsed.exit_code == 2 and "unknown op" in parsed.output, (spelling, parsed.output)
            continue
        accepted += 1
        assert canonical in OPS
        assert coll.exit_code == 0, (spelling, coll.output)
        assert json.loads(coll.output)["op"] == canonical
        assert parsed.exit_code == 0, (spelling, parsed.output)
        assert json.loads(parsed.output)["results"][0]["op"] == canonical
        assert parse_ops([spelling]) == (canonical,)
    assert accepted == 18


# 4. MFU: one definition, stated, against the dense peak of the precision the GEMMs run in

TRAIN = ["train", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "1024", "--tp", "8", "--pp", "4",
         "--dp", "32", "--seq", "8192", "--gbs", "1024", "--mbs", "2", "--vpp", "10", "--recompute", "none",
         "--zero", "1"]


def test_printed_mfu_is_printed_tflops_over_stated_peak(runner: CliRunner) -> None:
    import re

    for precision, peak_name in (("bf16", "BF16"), ("fp8", "FP8")):
        result = runner.invoke(app, [*TRAIN, "--precision", precision], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        found = re.search(r"MFU ([\d.]+)%: ([\d.]+) model TFLOP/s per GPU of the (\w+) dense peak ([\d.]+) TFLOP/s",
                          result.output)
        assert found, result.output
        mfu, tflops, name, peak = float(found[1]), float(found[2]), found[3], float(found[4])
        assert name == peak_name
        assert abs(mfu - 100 * tflops / peak) < 0.06  # within the printed rounding
        hfu = re.search(r"HFU ([\d.]+)%: ([\d.]+) TFLOP/s per GPU executed", result.output)
        assert hfu and abs(float(hfu[1]) - 100 * float(hfu[2]) / peak) < 0.06


def test_mfu_json_names_the_peak_precision(runner: CliRunner) -> None:
    from fabricsim.catalog import default_catalog

    h100 = default_catalog().gpu("h100-sxm")
    for precision, peak in (("bf16", h100.bf16_flops_per_s), ("fp8", h100.fp8_flops_per_s)):
        data = _json(runner, [*TRAIN, "--precision", precision])
        assert data["mfu_peak"]["precision"] == precision and data["mfu_peak"]["flops_per_s"] == peak
        assert data["mfu"] == pytest.approx(data["model_flops_per_s_per_gpu"] / peak, rel=1e-12)
        assert data["hfu"] == pytest.approx(data["flops_per_s_per_gpu"] / peak, rel=1e-12)
        assert 0.2 < data["mfu"] < 0.6  # an FP8 run against its FP8 peak (0.615 against BF16 before)


# 5. MoE: more routed tokens (a larger top_k) never makes a step faster

def _moe_spec(experts: int, top_k: int) -> Any:
    from fabricsim.model import ModelSpec

    return ModelSpec.from_data({"name": f"moe-{experts}x{top_k}", "layers": 8, "hidden": 4096, "heads": 32,
                                "kv_heads": 8, "ffn_hidden": 14336, "gated_mlp": True, "vocab": 32000,
                                "moe": {"experts": experts, "top_k": top_k, "ffn_hidden": 14336}})


def test_issue_case_top_k_8_is_not_faster_than_top_k_4(runner: CliRunner, tmp_path: Path) -> None:
    """The issue's case: 8 experts, --tp 8 --ep 8 --batch 128 --weights fp8; top_k 8 was priced 28% faster."""
    times = {}
    for k in (4, 8):
        spec = tmp_path / f"k{k}.json"
        spec.write_text(json.dumps({"name": f"m{k}", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                                    "ffn_hidden": 14336, "gated_mlp": True, "vocab": 32000,
                                    "moe": {"experts": 8, "top_k": k, "ffn_hidden": 14336}}))
        data = _json(runner, ["infer", "--model", str(spec), "--tp", "8", "--ep", "8", "--batch", "128",
                              "--weights", "fp8"])
        times[k] = (data["ttft_s"], sum(data["decode_step_s"].values()))
    assert times[8][0] >= times[4][0] and times[8][1] >= times[4][1]


def test_expert_load_is_capped_and_continuous_at_top_k_equal_experts() -> None:
    from fabricsim.inference.experts import expert_load_peak, expert_load_terms

    assert expert_load_terms(8, 8, 8).cap == 1.0 and expert_load_peak(8, 8, 8, 128) == 1.0
    for experts, ep in ((8, 8), (8, 2), (64, 8), (256, 32)):
        for tokens in (1.0, 16.0, 128.0, 1e5):
            loads = [k * expert_load_peak(experts, k, ep, tokens) for k in range(1, experts + 1)]
            assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(loads)), (experts, ep, tokens)
            assert all(load <= min(k * ep, experts) * (1 + 1e-12) for k, load in enumerate(loads, start=1))
            assert loads[-1] == experts  # every token on every expert: balanced


@settings(max_examples=20, deadline=None)
@given(experts=st.sampled_from([4, 8, 16]), ep=st.sampled_from([2, 4, 8]), batch=st.sampled_from([1, 16, 128]),
       weights=st.sampled_from(["bf16", "fp8"]), prompt=st.sampled_from([128, 1024]))
def test_ttft_and_decode_step_are_non_decreasing_in_top_k(catalog: Catalog, experts: int, ep: int, batch: int,
                                                          weights: str, prompt: int) -> None:
    from fabricsim.comm import Cluster
    from fabricsim.inference import InferencePlan, predict_inference, step_cost

    assume(experts % ep == 0)
    cluster = Cluster(catalog.system("dgx-h100"), catalog=catalog)
    plan = InferencePlan(tp=8, ep=ep, batch=batch, prompt_tokens=prompt, output_tokens=32, weights=weights)
    ttft, decode, iteration = [], [], []
    for k in range(1, experts + 1):
        spec = _moe_spec(experts, k)
        pred = predict_inference(spec, cluster, plan)
        ttft.append(pred.ttft_s)
        decode.append(sum(pred.decode_step_s.values()))
        cost = step_cost(spec, cluster, plan)
        iteration.append((cost.step_s(0, 0.0, batch, batch * prompt),
                          cost.step_s(batch * prompt, batch * prompt**2 / 2, 0, 0)))
    for series in (ttft, decode, [i[0] for i in iteration], [i[1] for i in iteration]):
        assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(series)), series
