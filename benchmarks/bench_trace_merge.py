"""Benchmark: `fabricsim trace import` of one file per rank, merged: 1,024 synthetic rank files (50 steps each, a
GEMM and an all_reduce a step, a few injected stragglers) written to a temporary directory, merged in a fresh
process; wall time, files per second, the parent's peak RSS (it keeps each rank's per-step figures only) and the
largest worker's (one rank's events at a time), and whether exactly the injected stragglers were named.

Run: `PYTHONPATH=src python benchmarks/bench_trace_merge.py [ranks] [--steps N] [--workers N]` (default 1,024
ranks, 50 steps); `--write DIR` only writes the rank files there (the docs' example: `--write ranks --ranks 8
--steps 6`).

Measured 2026-12-06 on the 2-core development machine while other work ran beside it (load average 4-6: the
second core was rarely free), best of 2 runs: 1,024 files of 50 steps (32 MB in all), stragglers ranks 17 (+20%,
compute), 300 (+8%, exposed communication) and 1,001 (+12%, compute), threshold 5%:

    workers   seconds   files/s   parent peak RSS MB   largest worker peak RSS MB   stragglers named
    1         1.7       616       113                  -                            17, 300, 1001 (as injected)
    2         2.1       477       113                  80                           17, 300, 1001 (as injected)

The parent's peak is its imports (numpy, msgspec, ijson) and one rank's events: each file is reduced to its per-step
figures (4 floats a step) before the next is read, so 1,024 ranks x 50 steps hold 1.6 MB. On this loaded machine the
pool of 2 is slower than reading in the process (forking and the result traffic, with no idle core to gain); it is
there for machines with cores to spare and for large rank files. A small file costs ~1.6 ms: before this benchmark's
change to the fast reader (the header coroutines fed the whole first 64 KB chunk, so a small file's events were
parsed three more times by ijson) it was 7 ms (140 files/s).
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
from test_trace_merge import write_ranks  # the pattern the tests merge

STRAGGLERS = {17: ("compute", 0.20), 300: ("exposed communication", 0.08), 1001: ("compute", 0.12)}
"""rank -> (phase, how much slower): the ranks the merge must name (threshold 5%)"""


def _value(args: list[str], name: str, default: int) -> int:
    if name in args:
        at = args.index(name)
        value = int(args[at + 1])
        del args[at:at + 2]
        return value
    return default


def measure(folder: Path, workers: int) -> dict[str, float | list[int]]:
    """Merge the folder in this process; seconds, stragglers named and peak RSS of this process and its workers."""
    from fabricsim.api.specs.trace import STRAGGLER_THRESHOLD
    from fabricsim.traces import merge_traces

    start = time.perf_counter()
    merged = merge_traces([folder], straggler_threshold=STRAGGLER_THRESHOLD, workers=workers)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "stragglers": sorted(s.rank for s in merged.stragglers),
            "files": float(merged.files), "steps": float(len(merged.steps)),
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--measure"]:  # the child: measure one folder
        print(json.dumps(measure(Path(args[1]), int(args[2]))))
        return
    steps = _value(args, "--steps", 50)
    ranks = _value(args, "--ranks", 0)
    workers = _value(args, "--workers", 2)
    if "--write" in args:
        at = args.index("--write")
        folder = Path(args[at + 1])
        del args[at:at + 2]
        count = ranks or (int(args[0]) if args else 8)
        write_ranks(folder, count, steps, {r: p for r, p in STRAGGLERS.items() if r < count} or
                    {count // 2: ("compute", 0.2)})
        print(f"{count} rank files of {steps} steps in {folder}")
        return
    count = ranks or (int(args[0]) if args else 1024)
    with TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ranks"
        paths = write_ranks(folder, count, steps, {r: p for r, p in STRAGGLERS.items() if r < count})
        size = sum(p.stat().st_size for p in paths) / 2**20
        child = subprocess.run([sys.executable, __file__, "--measure", str(folder), str(workers)],
                               capture_output=True, text=True, check=True)
        got = json.loads(child.stdout.strip().splitlines()[-1])
        expected = sorted(r for r in STRAGGLERS if r < count)
        print(f"{count:,} files ({size:,.0f} MB), {steps} steps, {workers} workers: {got['seconds']:.1f} s "
              f"({count / got['seconds']:,.0f} files/s), peak RSS {got['rss_mb']:,.0f} MB (largest worker "
              f"{got['worker_rss_mb']:,.0f} MB), stragglers {got['stragglers']} "
              f"({'as injected' if got['stragglers'] == expected else f'expected {expected}'})")


if __name__ == "__main__":
    main()
