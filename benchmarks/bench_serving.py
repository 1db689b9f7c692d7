"""Benchmark: the continuous-batching serving simulation (``fabricsim.serving``).

Target: 10 simulated minutes at 20 requests/s (12,000 requests, prompt 1024, output 256, a linear step cost of
~20-40 ms an iteration) in under 5 s on one core.
Run: `python benchmarks/bench_serving.py` (prints requests, iterations, wall seconds and iterations/s per case).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fabricsim.serving import SchedulerConfig, ServingLayout, ServingResult, simulate_serving
from fabricsim.serving.requests import LengthDist, RequestTrace, poisson_requests


@dataclass(frozen=True)
class LinearCost:
    """Stand-in step cost: 15 ms fixed, 2 us a prefill token, 30 us a decode, 0.02 us a KV token read."""

    kv_capacity_tokens: int = 400_000

    def step_s(self, prefill_tokens: int, prefill_attn_pairs: float, decode_seqs: int,
               decode_kv_tokens: int) -> float:
        return 0.015 + 2e-6 * prefill_tokens + 3e-5 * decode_seqs + 2e-8 * decode_kv_tokens

    def kv_transfer_s(self, tokens: int, same_node: bool) -> float:
        return tokens * (1e-6 if same_node else 1e-5)


TARGET = poisson_requests(20.0, 600.0, seed=0, prompt=1024, output=256)


def test_serving_ten_minutes(benchmark: object) -> None:
    benchmark(simulate_serving, LinearCost(), TARGET)  # type: ignore[operator]


def cases() -> list[tuple[str, RequestTrace, dict[str, object]]]:
    """The benchmarked runs: the target, data-parallel, disaggregated, overloaded, KV-starved, mixed lengths."""
    mixed = poisson_requests(20.0, 600.0, seed=1, prompt=LengthDist(1024, "lognormal", 1.0),
                             output=LengthDist(256, "uniform", 0.9))
    return [
        ("1 replica, 20 req/s, 1024/256 (target)", TARGET, {}),
        ("1 replica, lognormal/uniform lengths", mixed, {}),
        ("4 replicas JSQ, 80 req/s", poisson_requests(80.0, 600.0, seed=2),
         {"layout": ServingLayout(replicas=4, routing="shortest_queue")}),
        ("disagg 2P+2D cross-node, 40 req/s", poisson_requests(40.0, 600.0, seed=3),
         {"layout": ServingLayout(disagg=(2, 2), kv_same_node=False)}),
        ("1 replica overloaded, 40 req/s", poisson_requests(40.0, 600.0, seed=4), {}),
        ("1 replica, KV 40k tokens (preempts), 5 req/s", poisson_requests(5.0, 600.0, seed=5),
         {"scheduler": SchedulerConfig(max_num_seqs=64)}),
    ]


def run_case(name: str, trace: RequestTrace, options: dict[str, object]) -> ServingResult:
    """Time one simulation and print its size, wall time and headline figures."""
    cost = LinearCost(kv_capacity_tokens=40_000) if "KV 40k" in name else LinearCost()
    start = time.perf_counter()
    result = simulate_serving(cost, trace, **options)  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    print(f"{name:46s} {trace.requests:7d} req {result.iterations:8d} it {wall:6.2f} s "
          f"{result.iterations / wall:10.0f} it/s  ttft p99 {result.ttft.p99_s:8.3f} s  "
          f"tpot p99 {result.tpot.p99_s * 1e3:6.1f} ms  preempt {result.preemptions:5d}  "
          f"{'OVERLOADED' if result.overloaded else ''}")
    return result


def run_model_case() -> None:
    """The target run priced by the inference model itself (Llama 3 70B, FP8, TP8 on DGX H100, two replicas)."""
    from fabricsim.catalog import default_catalog
    from fabricsim.comm.cluster import Cluster
    from fabricsim.inference.plan import InferencePlan
    from fabricsim.inference.stepcost import step_cost
    from fabricsim.model.presets import load_model

    catalog = default_catalog()
    plan = InferencePlan(tp=8, batch=32, prompt_tokens=1024, output_tokens=256, weights="fp8")
    cost = step_cost(load_model("llama3-70b"), Cluster(catalog.system("dgx-h100"), catalog=catalog), plan)
    start = time.perf_counter()
    result = simulate_serving(cost, TARGET, layout=ServingLayout(replicas=2, routing="shortest_queue"))
    wall = time.perf_counter() - start
    print(f"{'llama3-70b fp8 tp8 x2 (inference model)':46s} {TARGET.requests:7d} req {result.iterations:8d} it "
          f"{wall:6.2f} s {result.iterations / wall:10.0f} it/s  ttft p99 {result.ttft.p99_s:8.3f} s  "
          f"tpot p99 {result.tpot.p99_s * 1e3:6.1f} ms  {'OVERLOADED' if result.overloaded else ''}")


if __name__ == "__main__":
    for case in cases():
        run_case(*case)
    run_model_case()
