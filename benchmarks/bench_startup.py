"""Benchmark: start-up of every command (`fabricsim CMD --help` in a fresh interpreter, min of 3), against the
floor `python -c "import typer, rich"`; run as a script (`python benchmarks/bench_startup.py`) or under pytest."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
COMMANDS: tuple[tuple[str, ...], ...] = (
    (), ("catalog",), ("collective",), ("topo",), ("traffic",), ("train",), ("whatif",), ("infer",), ("size",),
    ("validate",), ("calibrate",), ("compare",), ("demo",), ("bench", "collective"), ("bench", "memory"),
    ("bench", "parse"),
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def best_of(argv: list[str], runs: int = 3, check: bool = True) -> float:
    """Minimum wall time of `runs` fresh runs of argv, in seconds (``check`` False: a non-zero exit, as
    `validate`'s for cases out of tolerance, is not an error)."""
    best = float("inf")
    env = _env()
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=check)
        best = min(best, time.perf_counter() - start)
    return best


def startup_table(runs: int = 3) -> list[tuple[str, float]]:
    """(label, seconds) for the floor and for `--help` of every command."""
    rows = [("python -c 'import typer, rich' (floor)", best_of([sys.executable, "-c", "import typer, rich"], runs))]
    for cmd in COMMANDS:
        label = " ".join(("fabricsim", *cmd, "--help"))
        rows.append((label, best_of([sys.executable, "-m", "fabricsim", *cmd, "--help"], runs)))
    return rows


TRAIN = ("train", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "1024", "--tp", "8", "--pp", "4",
         "--seq", "8192", "--gbs", "1024")
ONE_PLAN = ("--vpp", "1", "--mbs", "1", "--recompute", "none", "--zero", "1")


def train_table(runs: int = 3) -> list[tuple[str, float]]:
    """(label, seconds) of a whole `fabricsim train` call: one plan (every knob given), and the README's call whose
    unset knobs (--vpp, --mbs, --recompute, --zero) are searched."""
    base = [sys.executable, "-m", "fabricsim", *TRAIN, "--json"]
    return [("fabricsim train (one plan)", best_of([*base, *ONE_PLAN], runs)),
            ("fabricsim train (knobs searched)", best_of(base, runs))]


def test_train_call() -> None:
    """Issue 25: one `fabricsim train` call under 0.5 s wall (one plan: start-up plus milliseconds)."""
    seconds = train_table()[0][1]
    assert seconds < 0.5, f"fabricsim train (one plan): {seconds * 1e3:.0f} ms"


def test_startup() -> None:
    """`fabricsim --help` within about twice the typer+rich floor; a command's --help also pays typer's own
    pydantic type adapters (typer 0.29 builds them per option), about 80 ms more."""
    rows = startup_table()
    floor = rows[0][1]
    root = rows[1][1]
    assert root < 2.2 * floor + 0.02, f"fabricsim --help: {root * 1e3:.0f} ms vs floor {floor * 1e3:.0f} ms"
    for label, seconds in rows[2:]:
        assert seconds < 3.5 * floor + 0.1, f"{label}: {seconds * 1e3:.0f} ms vs floor {floor * 1e3:.0f} ms"


if __name__ == "__main__":
    table = startup_table()
    floor = table[0][1]
    for label, seconds in table:
        print(f"{label:45s} {seconds * 1e3:7.1f} ms  {seconds / floor:4.2f}x")
    for label, seconds in train_table():
        print(f"{label:45s} {seconds * 1e3:7.1f} ms")
