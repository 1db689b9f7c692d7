"""Benchmark: `fabricsim trace import` on a large synthetic Kineto trace: parse rate (MB/s of JSON), events per
second and peak RSS, in a fresh process, to check that a trace is streamed (RSS far below the file size) and how
long a 2 GB trace takes.

The trace repeats the two-step GPU pattern of tests/test_trace_import.py (a GEMM, attention, element-wise and copy
kernel, an NCCL all_reduce and all_gather, their CPU operators and ProfilerStep annotations: 13 events a step).

Run: `PYTHONPATH=src python benchmarks/bench_trace_import.py [steps]` (default 200,000 steps: ~2.6M events, ~560 MB).

Measured 2026-12-05 (one core of a 2-core development machine, ijson 3 with the yajl2_c backend):

    steps     events    file MB   import s   MB/s   events/s   peak RSS MB
    20,000    220,001        39        2.1   19.2       107k           187
    200,000   2,200,001     396       20.7   19.1       106k           625
    400,000   4,400,001     793       42.9   18.5       103k         1,144

The file is never in memory: RSS grows with the events, about 250 bytes an event at peak (about 85 kept while
reading, as much again in the summary's interval sweeps) over a 46 MB start, so a 2 GB trace parses in about
110 s. These synthetic events are short (180 bytes of JSON each); a real Kineto kernel event carries more
arguments (400-600 bytes), so real traces peak at less than their size. MAX_EVENTS (8 M, `--max-events`) keeps
the peak near 2 GB.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_trace_import import gpu_trace  # the pattern the tests round-trip


def write_trace(path: Path, steps: int) -> int:
    """A Kineto trace of ``steps`` steps on GPU 0 (the test's two steps, shifted), written event by event; returns
    the number of events."""
    pattern = gpu_trace()
    head = {k: v for k, v in pattern.items() if k != "traceEvents"}
    meta, body = pattern["traceEvents"][:1], pattern["traceEvents"][1:]
    count = 0
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(head)[:-1] + ', "traceEvents": [' + json.dumps(meta[0]))
        for block in range(steps // 2):
            shift = 2000.0 * block
            for event in body:
                moved = dict(event, ts=event["ts"] + shift)
                if isinstance(moved.get("name"), str) and moved["name"].startswith("ProfilerStep#"):
                    moved["name"] = f"ProfilerStep#{int(moved['name'][13:]) + 2 * block}"
                out.write(", " + json.dumps(moved))
                count += 1
        out.write("]}")
    return count + 1


def measure(path: Path) -> dict[str, float]:
    """Import the trace in this process; seconds, steps and peak RSS."""
    from fabricsim.traces import import_trace

    start = time.perf_counter()
    summary = import_trace(path)
    seconds = time.perf_counter() - start
    device = summary.devices[0]
    return {"seconds": seconds, "steps": float(device.steps),
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    if len(sys.argv) > 2:  # the child: measure one file
        print(json.dumps(measure(Path(sys.argv[2]))))
        return
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        events = write_trace(path, steps)
        size_mb = path.stat().st_size / 2**20
        run = subprocess.run([sys.executable, __file__, str(steps), str(path)], capture_output=True, text=True,
                             check=True)
        got = json.loads(run.stdout.strip().splitlines()[-1])
    rate = size_mb / got["seconds"]
    print(f"{events:,} events, {size_mb:,.0f} MB: {got['seconds']:.1f} s ({rate:.1f} MB/s, "
          f"{events / got['seconds'] / 1e3:,.0f}k events/s), {got['steps']:,.0f} steps, peak RSS "
          f"{got['rss_mb']:,.0f} MB; a 2 GB trace: ~{2048 / rate:,.0f} s")


if __name__ == "__main__":
    main()
