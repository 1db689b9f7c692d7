"""Benchmark: the flow simulator on 16,384-GPU (2,048 DGX H100, NDR) instances of every fabric issue 27 added,
beside the 3-tier rail-optimized fat tree of bench_flowsim.py: the same workload (100,000 flows of 16 MiB in
seeded permutation steps of <= 16,384 GPUs, ECMP), each fabric in a fresh single-threaded process.
Reported: build s (topology), route s, simulate s, peak RSS, makespan.

Run: `PYTHONPATH=src python benchmarks/bench_fabrics_16k.py [flows]` (default 100,000).

Measured 2026-12-05 (one core of a 2-core development machine, numpy 2.4, numba kernels cached):

    fabric                build s  route s    sim s  events  RSS MB  makespan ms
    fat-tree (3 tiers)       0.02     0.13     0.92     758     208        15.46
    rail-only                0.02     0.05     0.70     638     206        15.46
    fat-tree, 2 planes       0.02     0.06     0.68     136     211        16.13
    dragonfly+ minimal       0.02     0.06     0.68     322     209        15.46
    dragonfly+ ugal          0.02     0.09     1.58   6,968     211        22.51
    slim-fly                 0.03     0.79     0.94     228     233        15.12

Every design routes and simulates 100,000 flows on 16k GPUs within 1.7x the fat tree's time (Slim Fly's routing
finds common neighbours in a dense router adjacency; UGAL under ECMP hashes flows onto Valiant paths too, more
events and a longer makespan for a permutation, as non-minimal routing costs benign traffic).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_flowsim import FLOW_BYTES, workload
from fabricsim.network.flownet import routed_flowset
from fabricsim.network.flowsim import simulate
from fabricsim.topology import build_cluster

FABRICS: dict[str, dict[str, Any]] = {
    "fat-tree (3 tiers)": {"tiers": 3},
    "rail-only": {"fabric": "rail-only"},
    "fat-tree, 2 planes": {"planes": 2},
    "dragonfly+ minimal": {"fabric": "dragonfly"},
    "dragonfly+ ugal": {"fabric": "dragonfly", "dragonfly_routing": "ugal"},
    "slim-fly": {"fabric": "slim-fly"},
}


def measure(name: str, flows: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    topo = build_cluster("dgx-h100", nodes=2048, link="ib-ndr", **FABRICS[name])
    t1 = time.perf_counter()
    src, dst, step = workload(topo, flows)
    chain = np.arange(step.max(), dtype=np.int64)
    fs = routed_flowset(topo, src, dst, FLOW_BYTES, step, np.zeros(step.max() + 1), "ecmp", chain, chain + 1)
    t2 = time.perf_counter()
    res = simulate(fs, topo.link_capacity)
    t3 = time.perf_counter()
    return {"fabric": name, "build_s": t1 - t0, "route_s": t2 - t1, "simulate_s": t3 - t2, "events": res.events,
            "makespan_s": res.makespan, "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    flows = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    print(f"16,384 GPUs (2,048 DGX H100, NDR); {flows:,} flows of 16 MiB in permutation steps, ECMP; one core")
    print(f"{'fabric':<20} {'build s':>8} {'route s':>8} {'sim s':>8} {'events':>7} {'RSS MB':>7} {'makespan ms':>12}")
    for name in FABRICS:
        proc = subprocess.run([sys.executable, __file__, "--one", name, str(flows)], capture_output=True, text=True,
                              env=env, check=True)
        r = json.loads(proc.stdout)
        print(f"{r['fabric']:<20} {r['build_s']:>8.2f} {r['route_s']:>8.2f} {r['simulate_s']:>8.2f} "
              f"{r['events']:>7,} {r['max_rss_mb']:>7.0f} {r['makespan_s'] * 1e3:>12.2f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]))))
    else:
        main()
