"""The events of a profiler trace that a summary needs, as compact arrays (not one Python object per event), with
their names interned and the arguments of collective and GEMM operators kept aside: what every trace reader
(Kineto JSON, Nsight Systems SQLite) produces."""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.traces.classify import classify

MAX_EVENTS = 8_000_000
"""timeline events (kernels, CPU operators) a trace may hold: about 85 bytes an event are kept while reading (the
arrays, interned names, shared argument sets) and the summary's interval sweeps need as much again, about 250 bytes
an event at peak (benchmarks/bench_trace_import.py: 4.4 M events, 1.1 GB), so 8 M events stay near 2 GB whatever
the file's size; above it the reader refuses the file rather than exhaust memory (--max-events raises it)"""

Progress = Callable[[int, int], None]
"""called while a trace is read with (done, total): bytes of a JSON file, kernels of an Nsight export"""

KEPT_ARGS = ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", "Input Dims", "Input type",
             "Process Group Name")
"""the arguments kept for collective and GEMM operators (everything else in ``args`` is dropped while reading)"""


@dataclass(frozen=True)
class Spans:
    """Intervals as parallel arrays: start and end (seconds from the trace's first event), device (GPU index, or
    the process id of a CPU event), stream (CUDA stream, or thread id), name (index into ``TraceEvents.names``) and
    the profiler's External id linking a kernel to the CPU operator that launched it (-1: none)."""

    start_s: np.ndarray
    end_s: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    name: np.ndarray
    ext_id: np.ndarray

    def __len__(self) -> int:
        return len(self.start_s)

    def take(self, mask: np.ndarray) -> Spans:
        """The spans where ``mask`` is True."""
        return Spans(self.start_s[mask], self.end_s[mask], self.device[mask], self.stream[mask], self.name[mask],
                     self.ext_id[mask])


@dataclass(frozen=True)
class StepMark:
    """A ``ProfilerStep#N`` annotation: on the CPU (device None) or projected on one GPU's timeline."""

    number: int
    start_s: float
    end_s: float
    device: int | None


@dataclass
class Dropped:
    """Timeline events (kernels, operators, step marks) a reader could not use, counted by reason, with the name of
    the first one of each: they are left out of every figure, and the summary says so."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, reason: str, name: Any) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        self.examples.setdefault(reason, name[:60] if isinstance(name, str) else repr(name)[:60])

    def __len__(self) -> int:
        return sum(self.counts.values())

    def note(self) -> str | None:
        """One line: how many events were dropped and why (None: none)."""
        if not self.counts:
            return None
        parts = [f"{n:,} with {reason} (first: {self.examples[reason]!r})" for reason, n in self.counts.items()]
        return (f"{len(self):,} kernel/operator event(s) could not be read and are left out of every figure: "
                + "; ".join(parts))

    def to_json(self) -> dict[str, dict[str, Any]]:
        return {reason: {"count": n, "first": self.examples[reason]} for reason, n in self.counts.items()}


@dataclass
class TraceEvents:
    """What a reader kept of a trace."""

    source: str
    format: str
    names: list[str]
    classes: list[str]
    """the class of each name (trace_classify.classify), parallel to ``names``"""
    kernels: Spans
    cpu: Spans
    steps: list[StepMark]
    kernel_args: dict[int, dict[str, Any]]
    """collective metadata a kernel carries itself (PyTorch >= 2.3 copies record_param_comms' onto NCCL kernels),
    by row of ``kernels``"""
    cpu_args: dict[int, dict[str, Any]]
    """``KEPT_ARGS`` of collective, launch and GEMM operators, by row of ``cpu``"""
    device_names: dict[int, str] = field(default_factory=dict)
    backend: str | None = None
    rank: int | None = None
    world_size: int | None = None
    host: str | None = None
    warnings: list[str] = field(default_factory=list)
    dropped: Dropped = field(default_factory=Dropped)
    """timeline events the reader could not use"""


class SpanBuilder:
    """Appends intervals into typed arrays (8 bytes a field), interning names and classifying each new name once."""

    def __init__(self, names: list[str], classes: list[str], index: dict[str, int]) -> None:
        self.names, self.classes, self.index = names, classes, index
        self.start, self.end = array("d"), array("d")
        self.device, self.stream, self.ext = array("q"), array("q"), array("q")
        self.name = array("q")

    def name_id(self, name: str) -> int:
        found = self.index.get(name)
        if found is None:
            found = self.index[name] = len(self.names)
            self.names.append(name)
            self.classes.append(classify(name))
        return found

    def add(self, name_id: int, start: float, end: float, device: int, stream: int, ext_id: int) -> int:
        """Append one interval; returns its row."""
        self.start.append(start)
        self.end.append(end)
        self.device.append(device)
        self.stream.append(stream)
        self.name.append(name_id)
        self.ext.append(ext_id)
        return len(self.start) - 1

    def __len__(self) -> int:
        return len(self.start)

    def build(self, scale: float, origin: float) -> Spans:
        """The arrays, times as ``(t - origin) * scale`` seconds."""
        start = (np.frombuffer(self.start, dtype=np.float64) - origin) * scale
        end = (np.frombuffer(self.end, dtype=np.float64) - origin) * scale
        np.maximum(end, start, out=end)
        # read-only views sharing the builder's buffers: no second copy of a large trace's columns
        return Spans(start, end, np.frombuffer(self.device, dtype=np.int64), np.frombuffer(self.stream, dtype=np.int64),
                     np.frombuffer(self.name, dtype=np.int64), np.frombuffer(self.ext, dtype=np.int64))


def check_count(kept: int, limit: int, source: str) -> None:
    """Refuse a trace with more timeline events than ``limit`` (memory stays bounded)."""
    if kept > limit:
        raise SpecError(f"the trace holds more than {limit:,} kernels and operators; profile fewer steps (a "
                        "torch.profiler schedule with active=1..3) or raise the limit with --max-events",
                        source=source)


def _frozen(value: Any) -> Any:
    """A JSON value as a hashable key: lists (shapes) as tuples."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def kept_args(args: Any, shared: dict[Any, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``KEPT_ARGS`` of an event's args (an empty dict for none). With ``shared``, equal argument sets are one
    object: a trace repeats the same GEMM shapes and collective sizes every layer and step, so memory grows with
    the distinct ones, not with the events."""
    if not isinstance(args, dict):
        return {}
    kept = {k: args[k] for k in KEPT_ARGS if k in args}
    if shared is None:
        return kept
    try:
        return shared.setdefault(tuple((k, _frozen(v)) for k, v in kept.items()), kept)
    except TypeError:  # an unhashable value (a mapping): kept as it is
        return kept


def as_int(value: Any, default: int = -1) -> int:
    """An integer argument (ids arrive as int, float or numeric string), or ``default``."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
