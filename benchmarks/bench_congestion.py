"""Benchmark: issue 46's 1,024-GPU all-to-all with congestion control on, end to end through the CLI (2 cores).

`fabricsim traffic --system dgx-h100 --fabric fat-tree --nodes 128 --pattern all_to_all --bytes 64M --routing ecmp
--cc CC --json`: 1.05M flows at once, held by back-pressure until rate control reacts, then at their fair shares.
Must finish in under 60 s and 4 GB. Each run is a fresh process; reported: flows, events, wall seconds (start-up
included), peak RSS, and the makespan against ideal sharing's.

Run: `python benchmarks/bench_congestion.py [cc@network ...]` (default: ideal@ndr ib@ndr roce-dcqcn@eth-400g
spectrum-x@eth-400g).

Measured 2026-12-06 (2-core sandbox, numba 0.68, kernels cached):

          cc   network       flows  events  wall s  peak RSS   makespan
       ideal       ndr   1,047,552   2,113     4.1    0.40 GB    1.380 ms
          ib       ndr   1,047,552     361    13.5    0.92 GB    1.380 ms
  roce-dcqcn  eth-400g   1,047,552     410    31.1    0.92 GB    1.381 ms
  spectrum-x  eth-400g   1,047,552     361    12.7    0.92 GB    1.381 ms

(before the drain batching of CONTROLLED_DRAIN_RTOL, ib took 93 s over 48,015 events; a uniform all-to-all has no hot
port, so its makespan is ideal sharing's: the held phase only reorders which flows finish first)
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

RUNS = ("ideal@ndr", "ib@ndr", "roce-dcqcn@eth-400g", "spectrum-x@eth-400g")


def run(cc: str, network: str) -> dict[str, float]:
    """One CLI run in a fresh process: its wall time, peak RSS (bytes) and the JSON it printed."""
    cmd = [sys.executable, "-m", "fabricsim", "traffic", "--system", "dgx-h100", "--fabric", "fat-tree", "--ib",
           network, "--nodes", "128", "--pattern", "all_to_all", "--bytes", "64M", "--routing", "ecmp", "--cc", cc,
           "--json"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    data = json.loads(proc.stdout)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {"flows": data["flows"], "events": data["events"], "wall_s": wall, "peak_rss_bytes": rss,
            "makespan_s": data["makespan_s"]}


def main() -> None:
    runs = sys.argv[1:] or list(RUNS)
    print(f"{'cc':>12} {'network':>9} {'flows':>11} {'events':>7} {'wall s':>7} {'peak RSS':>9} {'makespan':>10}")
    for item in runs:
        cc, _, network = item.partition("@")
        r = run(cc, network or "ndr")
        print(f"{cc:>12} {network:>9} {r['flows']:>11,} {r['events']:>7,} {r['wall_s']:>7.1f} "
              f"{r['peak_rss_bytes'] / 1e9:>7.2f} GB {r['makespan_s'] * 1e3:>8.3f} ms", flush=True)


if __name__ == "__main__":
    main()
