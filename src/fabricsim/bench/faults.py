"""Test-only fault injection, so the tests can prove a dead, hung or lying rank is caught.

``FABRICSIM_BENCH_FAULT=KIND:RANK`` in the environment of the benchmark (the spawned ranks inherit it; under
torchrun every rank reads its own) makes rank ``RANK``:
- ``die``: exit with code :data:`DIE_EXIT_CODE` just before its first measurement;
- ``hang``: sleep forever at the same point;
- ``corrupt``: add 1 to the first element of its result before every correctness check (so each checked row
  counts exactly one wrong element on that rank; ranks that hold no result, e.g. a non-root of reduce, are
  unaffected).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

from fabricsim.errors import SpecError

FAULT_ENV = "FABRICSIM_BENCH_FAULT"
FAULT_KINDS = ("die", "hang", "corrupt")
DIE_EXIT_CODE = 17


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int

    def strike_before_first_step(self) -> None:
        """``die`` and ``hang`` act here (on the faulty rank only)."""
        if self.kind == "die":
            sys.stderr.write(f"fabricsim: {FAULT_ENV}={self.kind}:{self.rank}: rank {self.rank} exits\n")
            sys.stderr.flush()
            os._exit(DIE_EXIT_CODE)
        if self.kind == "hang":
            sys.stderr.write(f"fabricsim: {FAULT_ENV}={self.kind}:{self.rank}: rank {self.rank} hangs\n")
            sys.stderr.flush()
            while True:
                time.sleep(3600)


def fault_from_env(environ: Mapping[str, str] | None = None) -> Fault | None:
    """The fault asked for in the environment, or None; a malformed value is a SpecError."""
    value = (os.environ if environ is None else environ).get(FAULT_ENV, "").strip()
    if not value:
        return None
    kind, _, rank = value.partition(":")
    if kind not in FAULT_KINDS or not rank.isdigit():
        raise SpecError(f"{value!r} is not KIND:RANK with KIND one of {', '.join(FAULT_KINDS)}", field=FAULT_ENV)
    return Fault(kind, int(rank))
