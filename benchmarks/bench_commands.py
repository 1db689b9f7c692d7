"""Benchmark: whole commands issue 25 times (a fresh interpreter each, best of 3): `size --inference` with its
defaults under 30 s and `validate` under 30 s; run as a script (`python benchmarks/bench_commands.py`) or under
pytest."""

from __future__ import annotations

import sys

from bench_startup import best_of

COMMANDS: dict[str, tuple[tuple[str, ...], float]] = {
    "size --inference (README call, engine defaults)": (
        ("size", "--inference", "--model", "llama3-70b", "--rate", "20", "--slo-ttft", "2s", "--slo-tpot", "50ms",
         "--json"), 30.0),
    "validate": (("validate", "--json"), 30.0),
}


def command_table(runs: int = 3) -> list[tuple[str, float, float]]:
    """(label, seconds, limit) per command."""
    rows = []
    for label, (args, limit) in COMMANDS.items():
        argv = [sys.executable, "-m", "fabricsim", *args]
        rows.append((label, best_of(argv, runs, check=False), limit))
    return rows


def test_commands_within_their_limits() -> None:
    for label, seconds, limit in command_table(runs=1):
        assert seconds < limit, f"{label}: {seconds:.1f} s (limit {limit:g} s)"


if __name__ == "__main__":
    for label, seconds, limit in command_table():
        print(f"{label:50s} {seconds:7.2f} s  (limit {limit:g} s)")
