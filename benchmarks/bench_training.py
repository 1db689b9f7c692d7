"""Benchmark: one training-plan evaluation, the sizing search's inner loop.

Target (issue 5): a 405B model on 16,384 GPUs under 1 ms on one core. Collective predictions are cached by group
shape; 'cold' evaluates plans it has not seen (different global batch each), 'warm' repeats them.
Run: `python benchmarks/bench_training.py`.
"""

from __future__ import annotations

import time

from fabricsim.catalog import default_catalog
from fabricsim.comm.cluster import Cluster
from fabricsim.model.presets import load_model
from fabricsim.training.plan import ParallelPlan
from fabricsim.training.step import predict_training

MODEL = load_model("llama3-405b")
CLUSTER = Cluster(default_catalog().system("dgx-h100"))
PLANS = [ParallelPlan.build(gpus=16384, tp=8, pp=16, seq=8192, gbs=1024 + 128 * k, recompute="full")
         for k in range(200)]


def evaluate(plan: ParallelPlan) -> float:
    return predict_training(MODEL, plan, CLUSTER).step_time_s


def test_plan_evaluation(benchmark: object) -> None:
    benchmark(evaluate, PLANS[0])  # type: ignore[operator]


if __name__ == "__main__":
    evaluate(PLANS[0])
    start = time.perf_counter()
    for plan in PLANS[1:]:
        evaluate(plan)
    cold = (time.perf_counter() - start) / (len(PLANS) - 1)
    start = time.perf_counter()
    for plan in PLANS:
        evaluate(plan)
    warm = (time.perf_counter() - start) / len(PLANS)
    print(f"llama3-405b on 16,384 H100: {cold * 1e3:.3f} ms per new plan, {warm * 1e3:.3f} ms per repeated plan")
