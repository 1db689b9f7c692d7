"""Benchmark: the default `size` call, end to end through the CLI (2 cores, local process pool).

`fabricsim size --model llama3-405b --tokens 15T --deadline 120d --json`: since issue 48 the default space is every
priced system, GPU counts 1024..65536 (powers of two and the whole units inside), the four default networks
(hdr,ndr,xdr,eth-400g), the three scale-out kinds (fat-tree, rail-only, 2-plane) and oversubscriptions 1,2: 2,040
clusters, 57.8M candidate plans. Issue 48 asks for under 60 s and 4 GB. `--old` runs issue 25's call instead (1k-16k,
fat-tree only: `--gpus 1024..16384 --fabrics hdr,ndr,xdr,eth-400g --fabric-kinds fat-tree --oversubscription 1,2`).

Run: `python benchmarks/bench_size_default.py` (one run; `--old` for the 1k-16k call, `--exhaustive` to time every
plan).

Measured 2026-12-06 (2-core sandbox shared with other work, load average 2-5 throughout: wall figures are high and
noisy, user CPU the steadier one; best of the runs taken):
- new default space, bounded: 57.76M candidates, 62,509 plans timed, 84-92 s user CPU over both cores, peak RSS
  0.52 GB (largest process); wall 81.5 s at load 1.5-2.7 (75 s before the pool shared its incumbent, 93-142 s at
  load 3-4.5). One process alone: 85 s CPU, by GPU gb200 26, gb300 21, b200 10, h100 8, h100-pcie 8, h200 8,
  a100 4.5: about 43 s a worker on two free cores. Measured in a quiet minute (load 0.9, nothing else running,
  the merged issue 48 code): 48.3 s wall, 80.5 s user CPU, peak RSS 0.52 GB, 62,509 timed: under the 60 s.
  Best: gb300-nvl72/64, 2,048 GPUs, NDR (oversubscription 2), tp 4 / dp 512 ZeRO-3 FP8 mbs 2,
  105.2 days, $10.6M (the same as the 1k-16k call's: the wider space adds no better plan). Exhaustive: not run (the
  1k-16k call's exhaustive search alone took 461 s before branch and bound).
- the old 1k-16k call (`--old`): 40.7 s wall, 50 s user CPU at load 3.3, peak RSS 0.39 GB, 22,871 plans timed
  (before this change, same load: 221 s wall, 224 s user, 1,048,808 timed); the same JSON but the plan counts.
What took the time out (issue 48): a network-aware lower bound (`training.floor`: the TP/EP/CP collectives past
the windows they can hide under, pipeline sends, ZeRO-3's prefetch formula, the data-parallel sync's last bucket and
what exceeds the longest backward; median 0.99 of the timed step on 41,793 sampled plans, against 0.73 for the
compute floor), priced once per distinct collective shape and timing cluster and only for the plans the search
reaches; the scale-out kinds share one timing cluster and its step terms (the step model prices them alike); an
incumbent of objective values shared by every cluster and pool worker, so clusters far from the best stop after
their fastest plan; one worker runs all tasks of a GPU (stage work priced once per process).
Issue 25's history (1k-16k, fat-tree only), measured 2026-12-05: 12.57M candidates; bounded 47.5 s wall, 84 s user
CPU, peak RSS 1.0 GB, 639,683 plans timed; 105.5 s (2026-12-04), 461 s and 3.6 GB before branch and bound, 818 s
when issue 25 was filed. With goodput in the ranking and storage, XDR and Ethernet priced (issues 26-27): 46.4 s,
628,303 timed; the catalog and model changes since then made it 221 s and 1.05M timed by 2026-12-06 (best the same
cluster and plan, 105.2 days).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

ARGS = ("size", "--model", "llama3-405b", "--tokens", "15T", "--deadline", "120d", "--json")
OLD_ARGS = ("size", "--model", "llama3-405b", "--tokens", "15T", "--deadline", "120d", "--gpus", "1024..16384",
            "--fabrics", "hdr,ndr,xdr,eth-400g", "--fabric-kinds", "fat-tree", "--oversubscription", "1,2", "--json")


def main() -> None:
    extra = tuple(a for a in sys.argv[1:] if a == "--exhaustive")
    args = OLD_ARGS if "--old" in sys.argv[1:] else ARGS
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fabricsim", *args, *extra], capture_output=True, text=True,
                          check=True)
    wall = time.perf_counter() - t0
    user = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    data = json.loads(proc.stdout)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # the largest process (workers included)
    best = data["results"][0]
    print(f"{wall:.1f} s wall, {user:.1f} s user CPU, peak RSS {rss / 1e9:.2f} GB (largest process), "
          f"{data['plans_evaluated']:,} timed, {data['plans_pruned']:,} pruned; best {best['system']} "
          f"{best['fabric']} {best['gpus']} GPUs {best['time_to_train_s'] / 86400:.1f} days")


if __name__ == "__main__":
    main()
