"""Benchmark: the flow-level simulator on a 16,384-GPU (2,048 DGX H100) 3-tier rail-optimized NDR fat tree.

Workload: `flows` flows in steps of at most 16,384: each step is a seeded random permutation (derangement) of a
random subset of the GPUs, 16 MiB per flow, ECMP; step k starts when step k-1 has delivered its last byte (a job's
steps). Every size runs in a fresh single-threaded process; reported: flows, events (max-min recomputations),
route + simulate wall time, peak RSS, and microseconds per flow-event (an arrival or a departure: 2 per flow).

Run: `PYTHONPATH=src python benchmarks/bench_flowsim.py [flows ...]` (or pytest-benchmark on the small case below).

Measured 2026-12-04 (one core of a 2-core development machine, numpy 2.4, numba 0.68 with its kernels cached;
the first filling of a process pays ~0.3 s loading them, and RSS includes numba's ~150 MB):

     flows  steps  events  route s    sim s  total s  RSS MB  us/flow-event
     1,000      1       3     0.00     0.32     0.33     229         162.87
    10,000      1      39     0.01     0.34     0.35     232          17.38
   100,000      7     758     0.05     0.54     0.58     246           2.91
 1,000,000     62   9,147     0.44     2.69     3.13     353           1.57

Before issue 25 (numpy round-parallel filling at every event): 0.01, 0.14, 2.93 and 40.96 s. An event now costs
the flows that leave and those whose rate changes (min trees over drain times and rates, the compiled heap
filling refilling only flows at or above the lowest rate that left), not a pass over every flow in flight; many
unrelated flows at once no longer cost a filling per distinct level: 1.05M simultaneous all-to-all flows drain in
2,113 events in about 2 s (benchmarks/bench_all_to_all.py).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

import numpy as np

from fabricsim.network.flownet import routed_flowset
from fabricsim.network.flowsim import simulate
from fabricsim.topology import Topology, build_cluster

FLOWS = (1_000, 10_000, 100_000, 1_000_000)
STEP = 16_384
FLOW_BYTES = 16 * 2**20
SEED = 11


def workload(topo: Topology, flows: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, step) of `flows` flows in permutation steps of at most STEP GPUs."""
    rng = np.random.default_rng(seed)
    steps = -(-flows // STEP)
    per = np.full(steps, flows // steps)
    per[: flows % steps] += 1
    src, dst = [], []
    for k in per:  # one vectorised draw per step (at most 62 steps)
        g = rng.choice(topo.num_gpus, k, replace=False)
        src.append(g)
        dst.append(np.roll(g, 1))
    return np.concatenate(src), np.concatenate(dst), np.repeat(np.arange(steps), per)


def measure(flows: int, routing: str = "ecmp") -> dict[str, Any]:
    topo = build_cluster("dgx-h100", nodes=2048, link="ib-ndr", tiers=3)
    src, dst, step = workload(topo, flows)
    t0 = time.perf_counter()
    chain = np.arange(step.max(), dtype=np.int64)
    fs = routed_flowset(topo, src, dst, FLOW_BYTES, step, np.zeros(step.max() + 1), routing, chain, chain + 1)
    t1 = time.perf_counter()
    res = simulate(fs, topo.link_capacity)
    t2 = time.perf_counter()
    wall = t2 - t0
    return {"flows": flows, "steps": int(step.max()) + 1, "events": res.events, "route_s": t1 - t0,
            "simulate_s": t2 - t1, "wall_s": wall, "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            / 1024, "us_per_flow_event": wall / (2 * flows) * 1e6, "makespan_s": res.makespan}


def main() -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    sizes = [int(a) for a in sys.argv[1:]] or list(FLOWS)
    print("16,384-GPU 3-tier rail-optimized NDR fat tree (2,048 DGX H100); permutation steps of <= 16,384 flows, "
          "16 MiB each, ECMP; one core")
    print(f"{'flows':>10} {'steps':>6} {'events':>7} {'route s':>8} {'sim s':>8} {'total s':>8} {'RSS MB':>7} "
          f"{'us/flow-event':>14}")
    for flows in sizes:
        proc = subprocess.run([sys.executable, __file__, "--one", str(flows)], capture_output=True, text=True,
                              env=env, check=True)
        r = json.loads(proc.stdout)
        print(f"{r['flows']:>10,} {r['steps']:>6} {r['events']:>7,} {r['route_s']:>8.2f} {r['simulate_s']:>8.2f} "
              f"{r['wall_s']:>8.2f} {r['max_rss_mb']:>7.0f} {r['us_per_flow_event']:>14.2f}", flush=True)


def test_flowsim_16k_gpus_16k_flows(benchmark: Any) -> None:
    topo = build_cluster("dgx-h100", nodes=2048, link="ib-ndr", tiers=3)
    src, dst, step = workload(topo, STEP)
    fs = routed_flowset(topo, src, dst, FLOW_BYTES, step, np.zeros(1))
    benchmark(lambda: simulate(fs, topo.link_capacity))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(measure(int(sys.argv[2]))))
    else:
        main()
