"""Benchmark: issue 25's all-to-all runs of the flow simulator, end to end through the CLI (2 cores).

`fabricsim traffic --system dgx-h100 --fabric fat-tree --ib ndr --nodes N --pattern all_to_all --bytes 64M
--routing ecmp --json`: every GPU sends 64 MiB spread over every GPU (one MoE layer's all-to-all), all flows at
once. N = 128 (1,024 GPUs, 2-tier: 1.05M flows) must finish in under 20 s; N = 512 (4,096 GPUs, 3-tier: 16.8M flows)
in under 120 s and 4 GB; N = 2,048 (16,384 GPUs, 3-tier: 268M flows, issue 48) in under 120 s and 8 GB. Each run
is a fresh process; reported: flows, the classes the simulator ran, events, wall seconds (the command's own,
start-up included), the process's own peak RSS.

Run: `python benchmarks/bench_all_to_all.py [nodes ...]`.

Measured 2026-12-06 (issue 48; 2-core sandbox shared with other work, load average ~3.5: the per-flow runs took
1.5-3x their quiet-machine time; best of 2 runs; numba 0.68, kernels cached):

     nodes     GPUs       flows     classes  events   wall s  peak RSS
       128    1,024   1,047,552   1,047,552   2,113      6.0    0.40 GB
       512    4,096  16,773,120  16,773,120   9,359     99.4    3.69 GB
     2,048   16,384 268,419,072           4       3      1.7    0.24 GB  (by symmetry: `fabricsim.network.
                                                                          symmetry`, flows split evenly over
                                                                          their equal-cost paths; before: refused,
                                                                          39.7 GB estimated)

128 and 512 nodes print the same JSON as before issue 48 (flows hashed one by one; main and this branch run back to
back: 4.2 / 4.1 s and 204 / 206 s under the same load). Quiet machine, 2026-12-04:

       128    1,024   1,047,552              2,113      3.3    0.66 GB  (before issue 25: did not finish in 200 s;
                                                                          ~26 s per max-min filling x 2,113 events)
       512    4,096  16,773,120              9,359     38.5    3.71 GB  (before: 745 s and 8.4 GB at the first
                                                                          rework; grew past 15 GB before it)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

NODES = (128, 512, 2048)


def measured(cmd: list[str]) -> tuple[dict[str, Any], float, int]:
    """Run one command in a fresh process: the JSON it printed, its wall seconds and its own peak RSS (bytes; of
    this child alone, not the largest child so far as RUSAGE_CHILDREN would give)."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, cmd)
        out.seek(0)
        return json.loads(out.read()), wall, usage.ru_maxrss * 1024


def run(nodes: int) -> dict[str, float]:
    """One CLI run in a fresh process: its wall time, peak RSS (bytes) and the JSON it printed."""
    cmd = [sys.executable, "-m", "fabricsim", "traffic", "--system", "dgx-h100", "--fabric", "fat-tree", "--ib",
           "ndr", "--nodes", str(nodes), "--pattern", "all_to_all", "--bytes", "64M", "--routing", "ecmp", "--json"]
    data, wall, rss = measured(cmd)
    return {"nodes": nodes, "gpus": data["gpus"], "flows": data["flows"],
            "classes": data.get("flow_classes", data["flows"]), "events": data["events"], "wall_s": wall,
            "peak_rss_bytes": rss}


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or list(NODES)
    print(f"{'nodes':>6} {'GPUs':>6} {'flows':>11} {'classes':>11} {'events':>7} {'wall s':>7} {'peak RSS':>9}")
    for nodes in sizes:
        r = run(nodes)
        print(f"{r['nodes']:>6} {r['gpus']:>6,} {r['flows']:>11,} {r['classes']:>11,} {r['events']:>7,} "
              f"{r['wall_s']:>7.1f} {r['peak_rss_bytes'] / 1e9:>7.2f} GB", flush=True)


if __name__ == "__main__":
    main()
