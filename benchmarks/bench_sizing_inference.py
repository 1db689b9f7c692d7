"""Benchmark: `size --inference` (issue 12 item 3), the analytic screen and the confirming simulations.

Target: a default search (every priced system, Llama-3-70B at 20 req/s, 2048 in / 256 out, SLO 2 s TTFT and 50 ms
TPOT at p90, 120 s of simulated arrivals) in a few seconds on 2 cores.
Run: `python benchmarks/bench_sizing_inference.py` (prints candidates, the screen's and the whole search's seconds).

Measured (2-core sandbox shared with other processes): 1,200 candidate plans (706 timed, 494 pruned by divisibility,
formats or memory), screen 1.2 s, 6 simulations, 1.9-2.0 s in all; the cheapest is GB200 tp=1 FP8 x 4 replicas at
about $0.32 per million output tokens.
"""

from __future__ import annotations

import time

from fabricsim.sizing import InferenceSizingSpec, size_inference

DEFAULT = InferenceSizingSpec(model="llama3-70b", rate_per_s=20.0, slo_ttft_s=2.0, slo_tpot_s=0.05)
SMALL = DEFAULT.model_copy(update={"systems": ("dgx-h100",), "duration_s": 60.0})


def test_sizing_inference_search(benchmark: object) -> None:
    benchmark(size_inference, SMALL)  # type: ignore[operator]


if __name__ == "__main__":
    for name, spec in (("default (every priced system)", DEFAULT), ("dgx-h100, 60 s", SMALL)):
        start = time.perf_counter()
        result = size_inference(spec)
        wall = time.perf_counter() - start
        best = result.best
        print(f"{name}: {result.plans_evaluated + result.plans_pruned:,} candidates ({result.plans_evaluated:,} "
              f"timed, {result.plans_pruned:,} pruned), screen {result.screen_wall_s:.2f} s, "
              f"{result.simulations} simulations, {wall:.2f} s in all")
        if best is not None:
            print(f"  best: {best['system']} {best['plan']} x {best['replicas']} replicas = {best['gpus']} GPUs, "
                  f"${best['usd_per_million_output_tokens']:.3f}/M output tokens, ttft p90 "
                  f"{best['ttft_s_p90'] * 1e3:.0f} ms, tpot p90 {best['tpot_s_p90'] * 1e3:.1f} ms")
