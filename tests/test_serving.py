"""Serving simulation: determinism, conservation, a brute-force reference, overload, chunking, preemption, disagg."""

from __future__ import annotations

import itertools
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.errors import SpecError
from fabricsim.serving import SchedulerConfig, ServingLayout, ServingResult, StepCost, simulate_serving
from fabricsim.serving.config import Routing
from fabricsim.serving.requests import (
    LengthDist,
    RequestTrace,
    load_request_trace,
    parse_request_trace,
    poisson_requests,
)


@dataclass(frozen=True)
class FakeCost:
    """Linear step cost: a fixed part plus per prefill token, per decoding sequence and per KV token read."""

    kv_capacity_tokens: int = 200_000
    base_s: float = 0.015
    prefill_token_s: float = 2e-6
    decode_seq_s: float = 3e-5
    kv_token_s: float = 2e-8
    transfer_token_s: float = 1e-6
    cross_node_factor: float = 10.0

    def step_s(self, prefill_tokens: int, prefill_attn_pairs: float, decode_seqs: int,
               decode_kv_tokens: int) -> float:
        return (self.base_s + self.prefill_token_s * prefill_tokens + self.decode_seq_s * decode_seqs
                + self.kv_token_s * decode_kv_tokens)

    def kv_transfer_s(self, tokens: int, same_node: bool) -> float:
        return tokens * self.transfer_token_s * (1.0 if same_node else self.cross_node_factor)


def _protocol_check(cost: FakeCost) -> StepCost:
    return cost  # mypy: the fake satisfies the protocol


def _same(a: ServingResult, b: ServingResult) -> bool:
    arrays = ("arrival_s", "ttft_s", "tpot_s", "e2e_s", "replica", "prompt_tokens", "output_tokens")
    scalars = ("requests_completed", "requests_unfinished", "preemptions", "iterations", "end_s", "ttft", "tpot",
               "overloaded", "output_tokens_per_s", "mean_batch_size")
    return (all(np.array_equal(getattr(a, k), getattr(b, k), equal_nan=True) for k in arrays)
            and all(str(getattr(a, k)) == str(getattr(b, k)) for k in scalars))


def _check_conservation(r: ServingResult) -> None:
    done = np.isfinite(r.e2e_s)
    assert r.requests_arrived == len(r.arrival_s) == r.requests_completed + r.requests_unfinished
    assert int(done.sum()) == r.requests_completed
    assert np.all(r.ttft_s[done] > 0) and np.all(r.e2e_s[done] >= r.ttft_s[done])
    assert np.all(np.isnan(r.tpot_s[~done]))
    assert np.all(r.replica >= 0)


# -- brute-force reference: the same scheduling rules, one request at a time, one replica ----------------------


def _reference(cost: FakeCost, trace: RequestTrace, cfg: SchedulerConfig) -> tuple[list[float], list[float], int]:
    """First-token and finish times and preemptions, stepping every running request every iteration."""
    block, cap = cfg.block_size_tokens, cost.kv_capacity_tokens // cfg.block_size_tokens
    prompt, output = trace.prompt_tokens.tolist(), trace.output_tokens.tolist()
    n = len(prompt)
    computed, generated, admitted = [0] * n, [0] * n, [0] * n
    decoding = [False] * n
    first, finish = [math.nan] * n, [math.nan] * n
    running: list[int] = []
    waiting: deque[int] = deque()
    used, t, ptr, seq, preemptions = 0, 0.0, 0, 0, 0

    def blocks(tokens: int) -> int:
        return -(-tokens // block)

    def preempt(rid: int) -> None:
        nonlocal used, preemptions
        used -= blocks(computed[rid])
        computed[rid], decoding[rid] = 0, False
        running.remove(rid)
        waiting.appendleft(rid)
        preemptions += 1

    while ptr < n or running or waiting:
        if not running and not waiting:
            t = max(t, float(trace.arrival_s[ptr]))
        while ptr < n and trace.arrival_s[ptr] <= t:
            waiting.append(ptr)
            ptr += 1
        budget, seqs, preempted = cfg.max_num_batched_tokens, 0, False
        while True:
            dec = [r for r in running if decoding[r]]
            need = sum(1 for r in dec if computed[r] % block == 0)
            if used + need <= cap or not dec:
                break
            preempt(max(running, key=lambda r: admitted[r]))
            preempted = True
        used += need
        plan = [(r, 1) for r in dec]
        budget -= len(dec)
        seqs += len(dec)
        pf, dkv, pairs = 0, sum(computed[r] + 1 for r in dec), 0.0
        pre = [r for r in running if not decoding[r]]
        i = 0
        while i < len(pre) and budget > 0:
            rid = pre[i]
            chunk = min(prompt[rid] + generated[rid] - computed[rid], budget)
            extra = blocks(computed[rid] + chunk) - blocks(computed[rid])
            while used + extra > cap and len(pre) > i:
                preempt(pre.pop())
                preempted = True
            if len(pre) <= i:
                break
            used += extra
            plan.append((rid, chunk))
            pf += chunk
            pairs += chunk * (computed[rid] + chunk / 2.0)
            budget -= chunk
            seqs += 1
            i += 1
        if waiting and (not preempted or seqs == 0):
            while waiting and budget > 0 and len(running) < cfg.max_num_seqs:
                rid = waiting[0]
                pending = prompt[rid] + generated[rid]
                if not cfg.chunked_prefill and pending > budget:
                    break
                chunk = min(pending, budget)
                if used + blocks(chunk) > cap:
                    break
                waiting.popleft()
                used += blocks(chunk)
                seq += 1
                admitted[rid] = seq
                running.append(rid)
                plan.append((rid, chunk))
                pf += chunk
                pairs += chunk * (chunk / 2.0)
                budget -= chunk
                seqs += 1
        if not seqs:
            t = float(trace.arrival_s[ptr])
            continue
        t += cost.step_s(pf, pairs, len(dec), dkv)
        for rid, chunk in plan:
            computed[rid] += chunk
            if computed[rid] < prompt[rid] + generated[rid]:
                continue
            generated[rid] += 1
            decoding[rid] = True
            if generated[rid] == 1:
                first[rid] = t
            if generated[rid] == output[rid]:
                finish[rid] = t
                used -= blocks(computed[rid])
                running.remove(rid)
    return first, finish, preemptions


@pytest.mark.parametrize(("chunked", "kv_tokens", "budget"), [(True, 200_000, 8192), (True, 3000, 256),
                                                             (False, 2500, 1024), (True, 900, 64)])
def test_matches_brute_force_reference(chunked: bool, kv_tokens: int, budget: int) -> None:
    trace = poisson_requests(12.0, 8.0, seed=7, prompt=LengthDist(300, "uniform", 0.9),
                             output=LengthDist(40, "lognormal", 0.8))
    trace = RequestTrace(trace.arrival_s, trace.prompt_tokens, np.minimum(trace.output_tokens, 300),
                         trace.duration_s)
    cost = FakeCost(kv_capacity_tokens=kv_tokens)
    cfg = SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=budget, chunked_prefill=chunked)
    result = simulate_serving(cost, trace, scheduler=cfg, drain_s=1e5)
    first, finish, preemptions = _reference(cost, trace, cfg)
    assert result.requests_unfinished == 0
    np.testing.assert_allclose(result.ttft_s, np.asarray(first) - trace.arrival_s, rtol=0, atol=1e-9)
    np.testing.assert_allclose(result.e2e_s, np.asarray(finish) - trace.arrival_s, rtol=0, atol=1e-9)
    assert result.preemptions == preemptions
    if kv_tokens < 5000:
        assert preemptions > 0


# -- behaviour ---------------------------------------------------------------------------------------------------


def test_deterministic_for_a_seed() -> None:
    layouts = [ServingLayout(), ServingLayout(replicas=3, routing="shortest_queue"), ServingLayout(disagg=(2, 2))]
    for layout in layouts:
        runs = [simulate_serving(FakeCost(kv_capacity_tokens=20_000), poisson_requests(30.0, 10.0, seed=s),
                                 layout=layout) for s in (5, 5, 6)]
        assert _same(runs[0], runs[1])
        assert not _same(runs[0], runs[2])


@pytest.mark.parametrize("layout", [ServingLayout(), ServingLayout(replicas=2, routing="shortest_queue"),
                                    ServingLayout(replicas=3), ServingLayout(disagg=(1, 2), kv_same_node=False)])
@pytest.mark.parametrize("rate", [5.0, 200.0])
def test_every_request_completes_once_or_is_reported_unfinished(layout: ServingLayout, rate: float) -> None:
    trace = poisson_requests(rate, 10.0, seed=3, prompt=LengthDist(512, "lognormal", 0.7),
                             output=LengthDist(64, "uniform", 0.9))
    result = simulate_serving(FakeCost(kv_capacity_tokens=30_000), trace, layout=layout, drain_s=5.0)
    _check_conservation(result)
    if rate == 200.0:
        assert result.requests_unfinished > 0 and result.overloaded
        assert "unfinished" in result.overload_reason
    else:
        assert result.requests_unfinished == 0 and not result.overloaded


def test_ttft_grows_without_bound_past_saturation() -> None:
    cost = FakeCost()  # ~160 decodes at ~25 ms per iteration: saturates near 25 requests/s at 256 output tokens
    short, long = (simulate_serving(cost, poisson_requests(60.0, d, seed=1), drain_s=1e4) for d in (15.0, 30.0))
    assert short.overloaded and long.overloaded
    assert "TTFT grows" in long.overload_reason
    assert long.ttft.p99_s > 1.7 * short.ttft.p99_s
    assert long.requests_unfinished == 0


def test_below_saturation_is_not_overloaded() -> None:
    cost = FakeCost()
    short, long = (simulate_serving(cost, poisson_requests(8.0, d, seed=1), slo_ttft_s=0.5, slo_tpot_s=0.05)
                   for d in (15.0, 30.0))
    for r in (short, long):
        assert not r.overloaded and r.overload_reason == ""
        assert r.slo_attainment == 1.0 and r.goodput_rps is not None
        assert r.goodput_rps == pytest.approx(r.requests_completed / r.end_s)
    assert long.ttft.p99_s < 1.5 * short.ttft.p99_s
    assert long.output_tokens_per_s == pytest.approx(8.0 * 256, rel=0.2)


def test_chunked_prefill_lowers_tpot_tail_under_mixed_load() -> None:
    # Prefill-heavy cost (20k prompt tokens/s) and heavy-tailed prompts: unchunked, a 10k-token prompt stalls every
    # decode for ~0.5 s in one iteration, which a short answer cannot amortise; chunks of 512 spread it thin.
    cost = FakeCost(prefill_token_s=5e-5)
    trace = poisson_requests(3.0, 30.0, seed=4, prompt=LengthDist(2048, "lognormal", 1.0),
                             output=LengthDist(16, "uniform", 0.5))
    chunked = simulate_serving(cost, trace, scheduler=SchedulerConfig(max_num_batched_tokens=512), drain_s=1e3)
    whole = simulate_serving(cost, trace, scheduler=SchedulerConfig(chunked_prefill=False,
                                                                    max_num_batched_tokens=200_000), drain_s=1e3)
    assert chunked.requests_unfinished == whole.requests_unfinished == 0
    assert chunked.tpot.p99_s < 0.7 * whole.tpot.p99_s


def test_preemption_under_tiny_kv_and_everything_completes() -> None:
    trace = poisson_requests(1.5, 20.0, seed=2, prompt=512, output=128)
    roomy = simulate_serving(FakeCost(), trace)
    tiny = simulate_serving(FakeCost(kv_capacity_tokens=1600), trace, drain_s=1e4)
    assert roomy.preemptions == 0
    assert tiny.preemptions > 0
    assert tiny.requests_completed == tiny.requests_arrived
    assert tiny.e2e.mean_s > roomy.e2e.mean_s


def test_disagg_slow_transfer_raises_tpot_and_e2e() -> None:
    trace = poisson_requests(6.0, 20.0, seed=8, prompt=4096, output=32)
    cost = FakeCost(transfer_token_s=2e-6, cross_node_factor=50.0)  # 8 ms on a node, 0.4 s across nodes
    fast, slow = (simulate_serving(cost, trace, layout=ServingLayout(disagg=(2, 1), kv_same_node=same))
                  for same in (True, False))
    for r in (fast, slow):
        assert r.requests_unfinished == 0
    np.testing.assert_array_equal(fast.ttft_s, slow.ttft_s)  # TTFT counts at prefill end
    assert slow.tpot.mean_s > fast.tpot.mean_s + 0.3 / 31
    assert slow.e2e.p50_s > fast.e2e.p50_s + 0.3


def test_replicas_share_the_load() -> None:
    trace = poisson_requests(60.0, 10.0, seed=9)
    one = simulate_serving(FakeCost(), trace)
    routings: tuple[Routing, ...] = ("round_robin", "shortest_queue")
    for routing in routings:
        three = simulate_serving(FakeCost(), trace, layout=ServingLayout(replicas=3, routing=routing))
        assert one.overloaded and not three.overloaded
        assert sorted(set(three.replica.tolist())) == [0, 1, 2]
        assert three.ttft.p99_s < one.ttft.p99_s


def test_ten_minutes_at_twenty_requests_per_second_is_fast() -> None:
    trace = poisson_requests(20.0, 600.0, seed=0, prompt=1024, output=256)
    start = time.perf_counter()
    result = simulate_serving(FakeCost(), trace)
    assert time.perf_counter() - start < 5.0
    assert result.requests_completed == result.requests_arrived > 11_000
    assert not result.overloaded


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), rate=st.floats(2.0, 25.0), small=st.integers(1, 4), factor=st.integers(2, 6))
def test_more_kv_never_costs_throughput(seed: int, rate: float, small: int, factor: int) -> None:
    trace = poisson_requests(rate, 4.0, seed=seed, prompt=LengthDist(256, "uniform", 0.9),
                             output=LengthDist(48, "uniform", 0.9))
    largest = int((trace.prompt_tokens + trace.output_tokens).max()) + 16
    everything = int((trace.prompt_tokens + trace.output_tokens + 16).sum())
    cfg = SchedulerConfig(max_num_seqs=64, max_num_batched_tokens=512)
    runs = [simulate_serving(FakeCost(kv_capacity_tokens=kv), trace, scheduler=cfg, drain_s=1e4)
            for kv in (largest * small, largest * small * factor, everything)]
    for r in runs:
        assert r.requests_unfinished == 0
    # Up to the order of the last completions (a 1% band), more KV never lowers output throughput; preemptions
    # are not monotone in KV (more room admits more requests that can be preempted later), but vanish once every
    # request fits at once.
    for less, more in itertools.pairwise(runs):
        assert more.output_tokens_per_s >= 0.99 * less.output_tokens_per_s
    assert runs[-1].preemptions == 0


# -- configuration errors ----------------------------------------------------------------------------------------


def test_config_errors() -> None:
    with pytest.raises(SpecError, match="max_num_batched_tokens"):
        SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=128)
    with pytest.raises(SpecError, match="block_size_tokens"):
        SchedulerConfig(block_size_tokens=0)
    with pytest.raises(SpecError, match="not both"):
        ServingLayout(replicas=2, disagg=(1, 1))
    with pytest.raises(SpecError, match="disagg"):
        ServingLayout(disagg=(0, 1))
    with pytest.raises(SpecError, match="routing"):
        ServingLayout(routing="random")  # type: ignore[arg-type]
    trace = poisson_requests(2.0, 5.0, seed=1, prompt=4000, output=200)
    with pytest.raises(SpecError, match="KV tokens"):
        simulate_serving(FakeCost(kv_capacity_tokens=4096), trace)
    with pytest.raises(SpecError, match="chunked_prefill"):
        simulate_serving(FakeCost(), trace, scheduler=SchedulerConfig(chunked_prefill=False,
                                                                      max_num_batched_tokens=4096))
    with pytest.raises(SpecError, match="step time"):
        simulate_serving(FakeCost(base_s=0.0, prefill_token_s=0.0, decode_seq_s=0.0, kv_token_s=0.0), trace)
    with pytest.raises(SpecError, match="slo_ttft_s"):
        simulate_serving(FakeCost(), trace, slo_ttft_s=-1.0)


# -- request streams -----------------------------------------------------------------------------------------------


def test_poisson_requests() -> None:
    trace = poisson_requests(50.0, 100.0, seed=11, prompt=LengthDist(1000, "lognormal", 0.5),
                             output=LengthDist(200, "uniform", 0.5))
    assert abs(trace.requests - 5000) < 5 * math.sqrt(5000)
    assert np.all(np.diff(trace.arrival_s) >= 0) and trace.arrival_s.max() < 100.0
    assert trace.prompt_tokens.mean() == pytest.approx(1000, rel=0.05)
    assert trace.output_tokens.min() >= 100 and trace.output_tokens.max() <= 300
    fixed = poisson_requests(5.0, 10.0, seed=1)
    assert set(fixed.prompt_tokens.tolist()) == {1024} and set(fixed.output_tokens.tolist()) == {256}
    with pytest.raises(SpecError, match="rate"):
        poisson_requests(0.0, 10.0, seed=1)
    with pytest.raises(SpecError, match="spread"):
        LengthDist(100, "uniform", 2.0)


def test_trace_file_reads_aliases_blank_lines_and_sorts(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text('{"arrival_s": 1.5, "prompt_tokens": 100, "output_tokens": 10, "id": "a"}\n\n'
                    '{"timestamp": 0.5, "prompt_tokens": 200.0, "output_tokens": 20}\n', encoding="utf-8")
    trace = load_request_trace(path)
    assert trace.arrival_s.tolist() == [0.5, 1.5]
    assert trace.prompt_tokens.tolist() == [200, 100] and trace.output_tokens.tolist() == [20, 10]
    assert trace.duration_s == 1.5
    result = simulate_serving(FakeCost(), trace)
    assert result.requests_completed == 2


@pytest.mark.parametrize(("data", "message"), [
    (b'{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n{"arrival_s": 1,', "line 2: bad JSON"),
    (b'\n\n{"prompt_tokens": 1, "output_tokens": 1}', "line 3: missing 'arrival_s'"),
    (b'{"arrival_s": -1, "prompt_tokens": 1, "output_tokens": 1}', "line 1: arrival_s must be finite"),
    (b'{"arrival_s": NaN, "prompt_tokens": 1, "output_tokens": 1}', "line 1: arrival_s must be finite"),
    (b'{"arrival_s": 1e400, "prompt_tokens": 1, "output_tokens": 1}', "line 1: arrival_s must be finite"),
    (b'{"arrival_s": 0, "prompt_tokens": 12.5, "output_tokens": 1}', "line 1: prompt_tokens must be an integer"),
    (b'{"arrival_s": 0, "prompt_tokens": true, "output_tokens": 1}', "line 1: prompt_tokens must be an integer"),
    (b'{"arrival_s": 0, "prompt_tokens": "9", "output_tokens": 1}', "line 1: prompt_tokens must be an integer"),
    (b'{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 0}', "line 1: output_tokens must be 1.."),
    (b'{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": -3}', "line 1: output_tokens must be 1.."),
    (b'{"arrival_s": 0, "prompt_tokens": 99999999999, "output_tokens": 1}', "line 1: prompt_tokens must be 1.."),
    (b'{"arrival_s": 0, "timestamp": 0, "prompt_tokens": 5, "output_tokens": 1}', "line 1: give 'arrival_s'"),
    (b'[1, 2]', "line 1: expected a JSON object"),
    (b'{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1}\n\xff\xfe', "not UTF-8 text (byte 57, line 2"),
    (b'', "no requests"),
    (b'\n  \n', "no requests"),
    (b'[' * 100_000, "line 1: bad JSON"),
])
def test_trace_errors_are_one_line_and_name_the_line(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(data)
    with pytest.raises(SpecError) as info:
        load_request_trace(path)
    text = str(info.value)
    assert "\n" not in text
    assert message in text
    assert str(path) in text


def test_missing_trace_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not found"):
        load_request_trace(tmp_path / "nope.jsonl")
    with pytest.raises(SpecError, match="line 1"):
        parse_request_trace(b"{", "inline")


def test_empty_trace_and_decode_pool_cost() -> None:
    empty = RequestTrace(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0.0)
    result = simulate_serving(_protocol_check(FakeCost()), empty)
    assert result.requests_arrived == result.requests_completed == 0 and not result.overloaded
    trace = poisson_requests(4.0, 10.0, seed=12, prompt=256, output=64)
    layout = ServingLayout(disagg=(1, 1))
    same = simulate_serving(FakeCost(), trace, layout=layout)
    slower = simulate_serving(FakeCost(), trace, layout=layout, decode_cost=FakeCost(base_s=0.03))
    np.testing.assert_array_equal(same.ttft_s, slower.ttft_s)
    assert slower.tpot.p50_s > 1.5 * same.tpot.p50_s


def test_progress_reports_requests_completed_of_all_and_changes_nothing() -> None:
    """A long run reports (completed, total) now and then, completed never falling, total the trace's size; the
    result is the same with or without the reports."""
    seen: list[tuple[int, int]] = []
    trace = poisson_requests(200.0, 60.0, seed=3)
    cost = FakeCost(kv_capacity_tokens=200_000)
    with_progress = simulate_serving(cost, trace, progress=lambda done, total: seen.append((done, total)))
    assert seen and all(total == trace.requests for _, total in seen)
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))
    assert _same(with_progress, simulate_serving(cost, trace))
