"""Benchmark: issue 48's API speed, the `fabricsim.sweep` table and the `train` CLI's wall time (2 cores).

1. ``fabricsim.train`` warm, one plan a call with every knob given (a notebook sweep's loop): mean ms a call over
   plans cycling through tp x pp (bands, goodput and the JSON document are computed only when read; reading
   ``to_dict()`` as well is timed separately). Then with the auto knobs left to the search (168 settings).
2. ``fabricsim.sweep`` over a grid of about 100k plans on the local process pool (all cores): plans that fit, wall
   seconds, plans a second.
3. ``fabricsim train`` from the command line, fixed knobs: wall seconds of a fresh process, best of 5 (bytecode
   cached: the first run after an install compiles it).

Run: `PYTHONPATH=src python benchmarks/bench_api.py [train|sweep|cli ...]` (default: all three).

Measured 2026-12-06 on the 2-core sandbox (quiet minute, load 0.5-1.5; issue 48 asks < 0.5 ms, < 10 s, < 0.5 s):

    train, knobs given:          0.37 ms a call   (5.0 ms when issue 48 was filed, 2.1 ms at its first stop)
    train, knobs given + JSON:   3.1 ms a call    (bands, goodput and the launch line read)
    train, auto knobs searched:  15 ms a call     (33 ms: settings timed by their step terms, one predicted)
    sweep, 100,814 plans:        6.6 s wall, 12.0 s CPU over both workers: 15,374 plans/s
                                 (12.7 s wall at load 3: the CPU figure is what two free cores give)
    train CLI:                   0.53-0.55 s best of 5 (not under 0.5 s: about 0.33 s of imports, numpy 60 ms,
                                 pydantic 40 ms, typer/click/rich 60 ms; typer's TypeAdapter per option 40 ms;
                                 catalog, residual table and the step 80 ms)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from itertools import cycle

PLANS = [(tp, pp) for tp in (2, 4, 8) for pp in (1, 2, 4, 8)]
GRID = {"model": "llama3-8b", "tokens": "100B", "gpus": "64,128", "systems": "dgx-h100,dgx-b200", "fabrics": "ndr",
        "oversubscription": "1,2", "fabric_kinds": "fat-tree"}
CLI = ["train", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "1024", "--tp", "8", "--pp", "4",
       "--mbs", "1", "--recompute", "none", "--zero", "1", "--vpp", "1"]


def bench_train(calls: int = 400) -> None:
    import fabricsim

    base = {"model": "llama3-70b", "system": "dgx-h100", "gpus": 1024, "mbs": 1, "recompute": "none", "zero": 1,
            "vpp": 1, "precision": "bf16"}
    plans = cycle(PLANS)
    for tp, pp in PLANS:  # warm: catalog, model, each design's checks
        fabricsim.train(**base, tp=tp, pp=pp)
    t0 = time.perf_counter()
    for _ in range(calls):
        tp, pp = next(plans)
        fabricsim.train(**base, tp=tp, pp=pp)
    one = (time.perf_counter() - t0) / calls
    t0 = time.perf_counter()
    for _ in range(calls // 4):
        tp, pp = next(plans)
        fabricsim.train(**base, tp=tp, pp=pp).to_dict()
    doc = (time.perf_counter() - t0) / (calls // 4)
    auto = {"model": "llama3-70b", "system": "dgx-h100", "gpus": 1024, "tp": 8, "pp": 4}
    fabricsim.train(**auto)
    t0 = time.perf_counter()
    for _ in range(10):
        fabricsim.train(**auto)
    searched = (time.perf_counter() - t0) / 10
    print(f"train, knobs given:         {one * 1e3:7.3f} ms a call ({calls} calls, {len(PLANS)} plans)")
    print(f"train, knobs given + JSON:  {doc * 1e3:7.3f} ms a call (bands, goodput, launch line read)")
    print(f"train, auto knobs searched: {searched * 1e3:7.3f} ms a call")


def bench_sweep() -> None:
    import resource

    import fabricsim

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    t0, c0 = time.perf_counter(), cpu()
    result = fabricsim.sweep(**GRID)
    wall, used = time.perf_counter() - t0, cpu() - c0
    plans = result.to_dict()["plans"]
    print(f"sweep: {plans:,} plans fit ({result.to_dict()['candidates']:,} candidates) in {wall:.1f} s on "
          f"{os.cpu_count()} cores: {plans / wall:,.0f} plans/s; {used:.1f} s CPU (workers included)")


def bench_cli(runs: int = 5) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cmd = [sys.executable, "-m", "fabricsim", *CLI]
    subprocess.run(cmd, capture_output=True, check=True, env=env)  # bytecode written
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, env=env)
        walls.append(time.perf_counter() - t0)
    print(f"train CLI: best {min(walls):.3f} s, median {sorted(walls)[len(walls) // 2]:.3f} s ({runs} runs)")


def main() -> None:
    which = sys.argv[1:] or ["train", "sweep", "cli"]
    for name in which:
        {"train": bench_train, "sweep": bench_sweep, "cli": bench_cli}[name]()


if __name__ == "__main__":
    main()
