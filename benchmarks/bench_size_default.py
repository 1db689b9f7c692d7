"""Benchmark: issue 25's default `size` call, end to end through the CLI (2 cores, local process pool).

`fabricsim size --model llama3-405b --tokens 15T --deadline 120d --gpus 1024..16384 --fabrics hdr,ndr,xdr,eth-400g
--oversubscription 1,2 --json`: every priced system, the default knob space. Issue 25 asks for under 60 s and 4 GB.

Run: `python benchmarks/bench_size_default.py` (one run; add `--exhaustive` to time every plan).

Measured 2026-12-05 (2-core sandbox): 12.57M candidates; bounded (default) 47.5 s wall, 84 s user CPU over both
cores, peak RSS 1.0 GB, 639,683 plans timed. Before: 105.5 s (2026-12-04, branch and bound with every shape's memory
checked up front), 461 s and 3.6 GB before branch and bound, 818 s when issue 25 was filed; the same JSON throughout
(best gb300-nvl72/64, 2,048 GPUs, NDR, tp 4 / dp 512 FP8, 92.5 days; Pareto front, top rows and 64 ties). What took
the time out: a stage's per-micro-batch work, activations and layout cached on the plan without dp, batch and ZeRO
(shared by every cluster size a worker prices), memory checked only for shapes the bound reaches, the cyclic GC
paused inside a task, node templates built once per system.
With goodput in the ranking (issue 26, times on the wall clock): 46.4 s, 627,019 timed; best the same cluster at
98.6 days (goodput 0.94). With storage networks and hot spares billed per cluster, XDR and Ethernet priced (issues
26-27, 2026-12-05): 46.4 s, peak RSS 1.14 GB, 628,303 timed; best the same cluster at 97.8 days.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

ARGS = ("size", "--model", "llama3-405b", "--tokens", "15T", "--deadline", "120d", "--gpus", "1024..16384",
        "--fabrics", "hdr,ndr,xdr,eth-400g", "--oversubscription", "1,2", "--json")


def main() -> None:
    extra = tuple(a for a in sys.argv[1:] if a == "--exhaustive")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fabricsim", *ARGS, *extra], capture_output=True, text=True,
                          check=True)
    wall = time.perf_counter() - t0
    data = json.loads(proc.stdout)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # the largest process (workers included)
    best = data["results"][0]
    print(f"{wall:.1f} s, peak RSS {rss / 1e9:.2f} GB (largest process), {data['plans_evaluated']:,} timed, "
          f"{data['plans_pruned']:,} pruned; best {best['system']} {best['fabric']} {best['gpus']} GPUs "
          f"{best['time_to_train_s'] / 86400:.1f} days")


if __name__ == "__main__":
    main()
