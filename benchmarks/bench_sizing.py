"""Benchmark: the `size` search, vectorised over candidate plans.

Target (issue 11): about 10^6 candidate plans (Llama-3-405B, 1k-16k GPUs, every priced system x 4 fabrics x 2
oversubscriptions) searched in under 60 s on 2 cores with peak memory under 2 GB. The knob space here is
tp, pp, cp, vpp, ZeRO 0-3 at their defaults, micro-batch 1-2, selective or full recompute, BF16 (the default space
with FP8 and the larger micro-batches is ~7x larger: `size` prices it the same way, only longer).
Run: `python benchmarks/bench_sizing.py [workers]` (prints plans, seconds, plans/s and peak MB, parent + workers).

Measured (2-core sandbox, helpers sharing the cores), 2026-12-03 after interleaving was limited to pp > 2 as
Megatron-LM requires: 1,171,072 candidates (308,682 timed, 862,390 pruned by divisibility or memory) in 32.3 s on
2 workers (36k plans/s); peak RSS 606 MB in the parent (all rows as a DataFrame) and 252 MB per worker, at most
1.11 GB together.
"""

from __future__ import annotations

import resource
import sys
import time

from fabricsim.sizing import Knobs, SizingSpec, size

FULL = SizingSpec(model="llama3-405b", tokens=15e12, seq=8192, gbs=(2048,), gpus=(1024, 2048, 4096, 8192, 16384),
                  fabrics=("hdr", "ndr", "xdr", "eth-400g"), oversubscription=(1.0, 2.0), objective="time",
                  knobs=Knobs(mbs=(1, 2), recompute=("selective", "full"), precision=("bf16",)))
SMALL = FULL.model_copy(update={"gpus": (4096,), "systems": ("dgx-h100",), "fabrics": ("ndr",)})


def test_sizing_search(benchmark: object) -> None:
    benchmark(size, SMALL, executor="serial")  # type: ignore[operator]


def peak_mb() -> tuple[float, float]:
    """Peak resident MB of this process and of its largest worker (ru_maxrss is KiB on Linux)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return own / 1024, child / 1024


if __name__ == "__main__":
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    start = time.perf_counter()
    result = size(FULL, executor="local", workers=workers)
    wall = time.perf_counter() - start
    plans = result.plans_evaluated + result.plans_pruned
    parent, child = peak_mb()
    print(f"{plans:,} candidate plans ({result.plans_evaluated:,} timed, {result.plans_pruned:,} pruned) on "
          f"{workers} workers: {wall:.1f} s, {plans / wall:,.0f} plans/s; peak MB: parent {parent:,.0f}, largest "
          f"worker {child:,.0f}, all at most {parent + workers * child:,.0f}; best "
          f"{result.ranked['system'].iloc[0]} {result.ranked['gpus'].iloc[0]} GPUs, "
          f"{result.ranked['time_to_train_s'].iloc[0] / 86400:.1f} days")
