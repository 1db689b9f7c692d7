"""Benchmark: reading a long nccl-tests log (run: `make bench` or this file as a script).

The log is the shared sample's table repeated for 64 binaries, about 2,000 lines: a large multi-job capture.
"""

from __future__ import annotations

import time
from pathlib import Path

from fabricsim.nccltests import parse_nccl_tests

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "nccl-tests" / "h100-2node-16gpu-all_reduce.log"
LOG = "\n".join([SAMPLE.read_text()] * 64)


def parse_once() -> int:
    return sum(len(result.rows) for result in parse_nccl_tests(LOG, op="all_reduce"))


def test_parse_long_log(benchmark: object) -> None:
    benchmark(parse_once)  # type: ignore[operator]


if __name__ == "__main__":
    start = time.perf_counter()
    runs = 5
    for _ in range(runs):
        rows = parse_once()
    print(f"nccl-tests log ({LOG.count(chr(10))} lines, {rows} rows): "
          f"{(time.perf_counter() - start) / runs * 1e3:.1f} ms")
