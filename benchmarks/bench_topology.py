"""Benchmark: build a 3-tier rail-optimized NDR fat tree of DGX H100 nodes and route a node-pair sample.

For each size (1k, 4k, 16k, 32k GPUs) a fresh process (one thread) builds the topology with the catalog already
loaded, then routes one flow between every GPU pair of 1,024 random node pairs (8 x 8 = 64 flows each, 65,536
flows, vectorized). Reported: build time, routing time, total, tracemalloc peak of the build+route (numpy buffers
included) and the process's peak RSS (interpreter and imports included).

Run: `PYTHONPATH=src python benchmarks/bench_topology.py` (or `make bench` for the pytest-benchmark cases).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from typing import Any

import numpy as np

from fabricsim.catalog import default_catalog
from fabricsim.topology import Topology, build_cluster

SIZES_GPUS = (1024, 4096, 16384, 32768)
NODE_PAIRS = 1024
SEED = 7


def sample_flows(topo: Topology, node_pairs: int = NODE_PAIRS, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Every GPU pair (src local i, dst local j) of ``node_pairs`` random pairs of distinct nodes."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, topo.num_nodes, node_pairs)
    b = (a + rng.integers(1, topo.num_nodes, node_pairs)) % topo.num_nodes
    gpn = topo.gpus_per_node
    i, j = np.meshgrid(np.arange(gpn), np.arange(gpn), indexing="ij")
    src = (a[:, None] * gpn + i.ravel()[None, :]).ravel()
    dst = (b[:, None] * gpn + j.ravel()[None, :]).ravel()
    return src, dst


def build_and_route(gpus: int) -> tuple[Topology, int]:
    topo = build_cluster("dgx-h100", nodes=gpus // 8, link="ib-ndr", tiers=3)
    src, dst = sample_flows(topo)
    routes = topo.route(src, dst, np.arange(len(src)))
    return topo, len(routes.links)


def measure(gpus: int) -> dict[str, Any]:
    """Time (best of 3) and memory of one size, in this process."""
    default_catalog()  # load the YAML catalog once, outside the measurement
    build_cluster("dgx-h100", nodes=2)  # warm imports and caches
    best_build = best_route = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        topo = build_cluster("dgx-h100", nodes=gpus // 8, link="ib-ndr", tiers=3)
        t1 = time.perf_counter()
        src, dst = sample_flows(topo)
        routes = topo.route(src, dst, np.arange(len(src)))
        t2 = time.perf_counter()
        best_build, best_route = min(best_build, t1 - t0), min(best_route, t2 - t1)
        del topo, routes
    tracemalloc.start()
    topo, entries = build_and_route(gpus)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    bom = topo.bom()
    return {
        "gpus": gpus, "nodes": topo.num_nodes, "endpoints": topo.num_endpoints, "links": topo.num_links,
        "switches": bom.switches, "flows": NODE_PAIRS * 64, "route_entries": entries,
        "build_s": best_build, "route_s": best_route, "total_s": best_build + best_route,
        "traced_peak_mb": peak / 2**20,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    rows = []
    for gpus in SIZES_GPUS:
        proc = subprocess.run([sys.executable, __file__, "--one", str(gpus)], capture_output=True, text=True,
                              env=env, check=True)
        rows.append(json.loads(proc.stdout))
    print(f"3-tier rail-optimized NDR fat tree of DGX H100; routing {NODE_PAIRS * 64:,} flows "
          f"(every GPU pair of {NODE_PAIRS} node pairs); catalog preloaded; best of 3")
    print(f"{'GPUs':>6} {'nodes':>6} {'links':>9} {'leaf/spine/core':>16} {'build s':>8} {'route s':>8} "
          f"{'total s':>8} {'traced MB':>10} {'RSS MB':>7}")
    for r in rows:
        sw = r["switches"]
        print(f"{r['gpus']:>6} {r['nodes']:>6} {r['links']:>9,} {sw['leaf']:>5}/{sw['spine']:>4}/{sw['core']:>4} "
              f"{r['build_s']:>9.3f} {r['route_s']:>8.3f} {r['total_s']:>8.3f} {r['traced_peak_mb']:>10.1f}"
              f" {r['max_rss_mb']:>7.0f}")
    first, last = rows[0], rows[-1]
    scale = last["gpus"] / first["gpus"]
    build_growth = last["build_s"] / first["build_s"]
    memory_growth = last["traced_peak_mb"] / first["traced_peak_mb"]
    print(f"growth {first['gpus']} -> {last['gpus']} GPUs (x{scale:.0f}): build time x{build_growth:.1f}, "
          f"traced memory x{memory_growth:.1f}")


def test_build_16k_gpus(benchmark: Any) -> None:
    benchmark(lambda: build_cluster("dgx-h100", nodes=2048, link="ib-ndr", tiers=3))


def test_route_node_pair_sample_16k_gpus(benchmark: Any) -> None:
    topo = build_cluster("dgx-h100", nodes=2048, link="ib-ndr", tiers=3)
    src, dst = sample_flows(topo)
    flows = np.arange(len(src))
    benchmark(lambda: topo.route(src, dst, flows))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(measure(int(sys.argv[2]))))
    else:
        main()
