"""Each engine's scheduler in the serving simulator (issue 23, item 2): vLLM V0 and SGLang run prompts alone
(prefill first), vLLM V1 and TensorRT-LLM mix them with decodes, TensorRT-LLM admits only what it can finish
(no preemption); prefix-cache hits (--prefix-hit, or cached_tokens in a trace) and the host time per step."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.catalog import default_catalog
from fabricsim.cli import app
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.inference import InferencePlan, engine_profile, predict_inference, step_cost
from fabricsim.model import load_model
from fabricsim.serving import SchedulerConfig, simulate_serving
from fabricsim.serving.requests import RequestTrace, parse_request_trace, poisson_requests


@dataclass
class RecordingCost:
    """A linear step cost that records every iteration's (prefill tokens, decode sequences)."""

    kv_capacity_tokens: int = 200_000
    calls: list[tuple[int, int]] = field(default_factory=list)

    def step_s(self, prefill_tokens: int, prefill_attn_pairs: float, decode_seqs: int,
               decode_kv_tokens: int) -> float:
        self.calls.append((prefill_tokens, decode_seqs))
        return 0.01 + 2e-6 * prefill_tokens + 3e-5 * decode_seqs + 2e-8 * decode_kv_tokens

    def kv_transfer_s(self, tokens: int, same_node: bool) -> float:
        return 1e-6 * tokens


def _trace(rate: float = 30.0, seconds: float = 20.0) -> RequestTrace:
    return poisson_requests(rate, seconds, seed=3, prompt=800, output=120)


def test_prefill_first_never_mixes_prompts_with_decodes_and_mixed_does() -> None:
    first, mixed = RecordingCost(), RecordingCost()
    simulate_serving(first, _trace(), scheduler=SchedulerConfig(policy="prefill_first"))
    simulate_serving(mixed, _trace(), scheduler=SchedulerConfig(policy="mixed"))
    assert first.calls and all(p == 0 or d == 0 for p, d in first.calls)
    assert any(p and d for p, d in mixed.calls)


def test_prefill_first_trades_tpot_for_ttft() -> None:
    """Prompts jump the queue: first tokens come sooner, decodes wait for them."""
    a = simulate_serving(RecordingCost(), _trace(), scheduler=SchedulerConfig(policy="prefill_first"))
    b = simulate_serving(RecordingCost(), _trace(), scheduler=SchedulerConfig(policy="mixed"))
    assert a.requests_completed == b.requests_completed == _trace().requests
    assert a.ttft.p50_s <= b.ttft.p50_s
    assert a.tpot.p50_s >= b.tpot.p50_s


@given(st.integers(min_value=2_000, max_value=40_000), st.floats(min_value=10.0, max_value=80.0))
def test_reserve_full_admission_never_preempts_and_finishes_everything(capacity: int, rate: float) -> None:
    trace = poisson_requests(rate, 5.0, seed=1, prompt=300, output=200)
    cost = RecordingCost(kv_capacity_tokens=capacity)
    r = simulate_serving(cost, trace, scheduler=SchedulerConfig(admission="reserve_full"), drain_s=600.0)
    assert r.preemptions == 0
    assert r.requests_completed == trace.requests
    on_demand = simulate_serving(RecordingCost(kv_capacity_tokens=capacity), trace, drain_s=600.0)
    assert on_demand.requests_completed == trace.requests


def test_cached_prefixes_are_not_computed_and_never_raise_ttft() -> None:
    trace = _trace()
    cold, warm = RecordingCost(), RecordingCost()
    a = simulate_serving(cold, trace)
    b = simulate_serving(warm, trace.with_prefix_hit(0.75))
    assert sum(p for p, _ in warm.calls) == pytest.approx(0.25 * sum(p for p, _ in cold.calls), rel=0.01)
    assert b.ttft.p50_s <= a.ttft.p50_s and b.ttft.p99_s <= a.ttft.p99_s
    assert b.requests_completed == a.requests_completed


def test_prefix_hit_keeps_the_last_prompt_token_and_checks_its_range() -> None:
    trace = _trace().with_prefix_hit(1.0)
    assert np.all(trace.cached == trace.prompt_tokens - 1)
    with pytest.raises(SpecError, match="--prefix-hit"):
        _trace().with_prefix_hit(1.5)


def test_trace_cached_tokens_are_read_and_checked() -> None:
    rows = b'{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 5, "cached_tokens": 64}\n' \
           b'{"arrival_s": 1, "prompt_tokens": 50, "output_tokens": 5}\n'
    trace = parse_request_trace(rows)
    assert trace.cached.tolist() == [64, 0]
    for bad in (b'{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 5, "cached_tokens": 100}',
                b'{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 5, "cached_tokens": -1}',
                b'{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 5, "cached_tokens": "x"}'):
        with pytest.raises(SpecError, match="line 1: cached_tokens"):
            parse_request_trace(bad)


def _cluster() -> Cluster:
    return Cluster(default_catalog().system("dgx-h100"))


@given(st.sampled_from(["trtllm", "vllm", "sglang"]), st.floats(min_value=0.0, max_value=1.0),
       st.sampled_from([128, 1000, 4000]), st.sampled_from([1, 16]))
def test_prefix_hits_never_raise_the_predicted_ttft(engine: str, hit: float, prompt: int, batch: int) -> None:
    model = load_model("llama3-8b")
    cold = predict_inference(model, _cluster(), InferencePlan(batch=batch, prompt_tokens=prompt, output_tokens=8,
                                                              engine=engine))
    warm = predict_inference(model, _cluster(), InferencePlan(batch=batch, prompt_tokens=prompt, output_tokens=8,
                                                              engine=engine, prefix_hit=hit))
    assert warm.ttft_s <= cold.ttft_s * (1 + 1e-12)


def test_an_engine_without_a_prefix_cache_refuses_hits() -> None:
    with pytest.raises(SpecError, match="does not cache prefixes"):
        InferencePlan(engine="vllm@0.6", prefix_hit=0.5)
    result = CliRunner().invoke(app, ["infer", "--engine", "vllm@0.6", "--prefix-hit", "0.5"])
    assert result.exit_code == 2 and "--prefix-hit" in result.output


@given(st.sampled_from(["trtllm", "vllm@0.6", "vllm", "sglang"]), st.integers(min_value=1, max_value=512),
       st.integers(min_value=1, max_value=512))
def test_host_time_never_makes_a_larger_batch_cheaper_per_step(engine: str, b1: int, b2: int) -> None:
    """Host work grows with the batch (never shrinks): a step of more sequences at the same context never takes
    less time, and a host-bound step's cost per token never falls below the engine's host time per sequence."""
    small, large = sorted((b1, b2))
    cost = step_cost(load_model("llama3-8b"), _cluster(), InferencePlan(engine=engine, prompt_tokens=1024,
                                                                          output_tokens=64))
    t_small = cost.step_s(0, 0.0, small, small * 1024)
    t_large = cost.step_s(0, 0.0, large, large * 1024)
    assert t_large >= t_small
    profile = engine_profile(engine)
    assert t_large / large >= profile.host_per_seq_s
    many = cost.step_s_many(np.zeros(2), np.zeros(2), np.array([small, large]), np.array([small, large]) * 1024)
    assert many.tolist() == pytest.approx([t_small, t_large], rel=1e-12)


def test_infer_serves_with_each_engines_scheduler() -> None:
    runner = CliRunner()
    seen = {}
    for engine in ("trtllm", "vllm@0.6", "sglang"):
        result = runner.invoke(app, ["infer", "--model", "llama3-8b", "--system", "dgx-h100", "--prompt", "1024",
                                     "--output", "128", "--rate", "30", "--duration", "20s", "--engine", engine,
                                     "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        seen[engine] = data
        assert data["serving_options"]["chunked_prefill"] == engine_profile(engine).scheduler.chunked_prefill
    assert seen["trtllm"]["preemptions"] == 0
    assert seen["sglang"]["ttft_s_p50"] != seen["trtllm"]["ttft_s_p50"]
    hit = runner.invoke(app, ["infer", "--model", "llama3-8b", "--system", "dgx-h100", "--prompt", "1024",
                              "--output", "128", "--rate", "30", "--duration", "20s", "--engine", "sglang",
                              "--prefix-hit", "0.5", "--json"])
    assert hit.exit_code == 0, hit.output
    warm = json.loads(hit.output)
    assert warm["ttft_s"] < seen["sglang"]["ttft_s"] and warm["ttft_s_p50"] <= seen["sglang"]["ttft_s_p50"]


def _offline(n: int, prompt: int, output: int) -> RequestTrace:
    return RequestTrace(np.zeros(n), np.full(n, prompt, dtype=np.int64), np.full(n, output, dtype=np.int64), 0.0)


def test_a_prefix_cache_keeps_a_preempted_requests_blocks_until_they_are_reused() -> None:
    """vLLM V1 and SGLang keep freed KV blocks cached (oldest freed reused first): a request preempted while others
    decode comes back to find most of its prompt, so long prompts are not prefilled again and again."""
    trace = _offline(24, 6000, 300)
    runs = {}
    for keep in (False, True):
        cost = RecordingCost(kv_capacity_tokens=40_000)
        cfg = SchedulerConfig(max_num_seqs=64, max_num_batched_tokens=2048, prefix_cache=keep)
        r = simulate_serving(cost, trace, scheduler=cfg)
        assert r.requests_completed == trace.requests and r.preemptions > 0
        runs[keep] = (sum(p for p, _ in cost.calls), r.end_s)
    prompts = int(trace.prompt_tokens.sum())
    assert prompts <= runs[True][0] < runs[False][0]  # every prompt token at least once; fewer recomputed
    assert runs[True][1] < runs[False][1]


@given(st.integers(7_000, 60_000), st.integers(200, 4000), st.integers(2, 400), st.booleans())
def test_kept_blocks_never_lose_tokens_or_requests(capacity: int, prompt: int, output: int, mixed: bool) -> None:
    """With a prefix cache, whatever the pressure: every request finishes, every prompt token is computed at least
    once, and decoding KV never exceeds the cache."""
    cost = RecordingCost(kv_capacity_tokens=capacity)
    calls: list[int] = []
    step = cost.step_s

    def checked(p: int, pairs: float, d: int, kv: int) -> float:
        calls.append(kv)
        return step(p, pairs, d, kv)

    cost.step_s = checked  # type: ignore[method-assign]
    cfg = SchedulerConfig(max_num_seqs=32, max_num_batched_tokens=1024, prefix_cache=True,
                          policy="mixed" if mixed else "prefill_first")
    trace = _offline(12, min(prompt, capacity // 2), output)
    r = simulate_serving(cost, trace, scheduler=cfg)
    assert r.requests_completed == trace.requests
    assert sum(p for p, _ in cost.calls) >= int(trace.prompt_tokens.sum())
    assert max(calls) <= capacity
