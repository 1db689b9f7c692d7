"""Benchmark: analytical collective prediction, the sizing search's hot path.

Targets (issue 4): a full sweep (8 B to 8 GiB, factor 2, auto selection) for a 1,024-GPU all_reduce under
5 ms on one core, a single size under 50 us. Run: `python benchmarks/bench_collectives.py`.
"""

from __future__ import annotations

import time

from fabricsim.collectives import CollectiveModel, group_shape, size_sweep

SIZES = size_sweep(8, 8 * 2**30, 2)


def sweep_cold() -> None:
    """A new group shape each call: costs are computed, not taken from the cache."""
    sweep_cold.counter += 1  # type: ignore[attr-defined]
    shape = group_shape("dgx-h100", 1024, oversubscription=1.0 + sweep_cold.counter * 1e-9)  # type: ignore[attr-defined]
    CollectiveModel(shape).predict("all_reduce", SIZES)


sweep_cold.counter = 0  # type: ignore[attr-defined]
MODEL = CollectiveModel(group_shape("dgx-h100", 1024))


def sweep_warm() -> None:
    MODEL.predict("all_reduce", SIZES)


def single_size() -> None:
    MODEL.time_s("all_reduce", 64 * 2**20)


def test_sweep_cold(benchmark: object) -> None:
    benchmark(sweep_cold)  # type: ignore[operator]


def test_sweep_warm(benchmark: object) -> None:
    benchmark(sweep_warm)  # type: ignore[operator]


def test_single_size(benchmark: object) -> None:
    benchmark(single_size)  # type: ignore[operator]


def _time(fn: object, runs: int) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        fn()  # type: ignore[operator]
    return (time.perf_counter() - start) / runs


if __name__ == "__main__":
    for name, fn, runs in (("sweep, cold shape", sweep_cold, 200), ("sweep, cached shape", sweep_warm, 500),
                           ("single size", single_size, 20000)):
        print(f"{name:22s} {_time(fn, runs) * 1e6:9.1f} us")
