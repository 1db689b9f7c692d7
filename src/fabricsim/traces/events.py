"""The events of a profiler trace that a summary needs, as compact arrays (not one Python object per event), with
their names interned and the arguments of collective and GEMM operators kept aside: what every trace reader
(Kineto JSON, Nsight Systems SQLite) produces."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.traces.classify import classify

MAX_EVENTS = 8_000_000
"""timeline events (kernels, CPU operators) a trace may hold: about 140 bytes a kept event after reading (the
columns, the argument sets of collectives and GEMMs by row, the step marks) and about 210 at the summary's peak
(benchmarks/bench_trace_import.py: 4 M kept of 5.5 M events, 859 MiB), so 8 M events stay under 2 GB whatever the
file's size; above it the reader refuses the file rather than exhaust memory (--max-events raises it)"""

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


class StepMarks(Sequence[StepMark]):
    """A trace's ``StepMark``s as columns (a 1 GB trace holds half a million): ``number`` and ``device`` int64 (an
    object array where a value is past int64), ``start_s``/``end_s`` float64, ``on_gpu`` False where the device is
    None (a CPU mark). Indexing gives a ``StepMark``; equal to a list of the same marks."""

    def __init__(self, number: Any, start_s: Any, end_s: Any, device: Any, on_gpu: Any) -> None:
        self.number, self.device = _int_array(number), _int_array(device)
        self.start_s = np.asarray(start_s, dtype=np.float64)
        self.end_s = np.asarray(end_s, dtype=np.float64)
        self.on_gpu = np.asarray(on_gpu, dtype=bool)

    @classmethod
    def of(cls, marks: Iterable[StepMark]) -> StepMarks:
        rows = list(marks)
        return cls([m.number for m in rows], [m.start_s for m in rows], [m.end_s for m in rows],
                   [0 if m.device is None else m.device for m in rows], [m.device is not None for m in rows])

    def __len__(self) -> int:
        return len(self.start_s)

    @overload
    def __getitem__(self, i: int) -> StepMark: ...

    @overload
    def __getitem__(self, i: slice) -> list[StepMark]: ...

    def __getitem__(self, i: int | slice) -> StepMark | list[StepMark]:
        if isinstance(i, slice):
            return [self[k] for k in range(len(self))[i]]
        return StepMark(int(self.number[i]), float(self.start_s[i]), float(self.end_s[i]),
                        int(self.device[i]) if self.on_gpu[i] else None)

    def __iter__(self) -> Iterator[StepMark]:
        number, start, end, device = (self.number.tolist(), self.start_s.tolist(), self.end_s.tolist(),
                                      self.device.tolist())
        for n, a, b, d, g in zip(number, start, end, device, self.on_gpu.tolist(), strict=True):
            yield StepMark(n, a, b, d if g else None)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StepMarks | list):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StepMarks({list(self)!r})"


def _int_array(values: Any) -> np.ndarray:
    """Integers as int64, or as Python ints in an object array where one is past int64."""
    if isinstance(values, np.ndarray):
        return values
    if isinstance(values, array):
        return np.frombuffer(values, dtype=np.int64) if values.typecode == "q" else np.array(values, dtype=np.int64)
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        out = np.empty(len(values), dtype=object)
        out[:] = list(values)
        return out


class IntColumn:
    """Appended integers as an int64 array, or a list once one is past int64."""

    def __init__(self) -> None:
        self.values: array[int] | list[int] = array("q")

    def append(self, value: int) -> None:
        try:
            self.values.append(value)
        except OverflowError:
            self.values = list(self.values)
            self.values.append(value)

    def extend(self, values: list[int]) -> None:
        if isinstance(self.values, array):
            try:
                self.values.frombytes(np.array(values, dtype=np.int64).tobytes())
                return
            except OverflowError:
                self.values = list(self.values)
        self.values.extend(values)


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
    steps: StepMarks
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

    def __post_init__(self) -> None:
        if not isinstance(self.steps, StepMarks):  # a list of StepMark, as TraceEvents took before
            self.steps = StepMarks.of(self.steps)


class SpanBuilder:
    """Appends intervals into typed columns (8 bytes a field), interning names and classifying each new name once:
    one at a time (``add``) or a batch of numpy columns at a time (``add_columns``, kept as they come and joined
    once by ``build``: no array is grown and copied batch after batch)."""

    def __init__(self, names: list[str], classes: list[str], index: dict[str, int]) -> None:
        self.names, self.classes, self.index = names, classes, index
        self.start, self.end = array("d"), array("d")
        self.device, self.stream, self.ext = array("q"), array("q"), array("q")
        self.name = array("q")
        self.chunks: list[list[Any]] = []
        """columns (start, end, device, stream, name, ext) of the rows before those in the arrays above"""
        self.rows = 0  # rows in ``chunks``

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
        return self.rows + len(self.start) - 1

    def add_columns(self, name_id: np.ndarray, start: np.ndarray, end: np.ndarray, device: np.ndarray,
                    stream: np.ndarray, ext_id: np.ndarray) -> int:
        """Append intervals given as columns; returns the first new row."""
        self._flush()
        row = self.rows
        self.chunks.append([np.array(start, dtype=np.float64), np.array(end, dtype=np.float64)]
                           + [np.array(c, dtype=np.int64) for c in (device, stream, name_id, ext_id)])
        self.rows += len(start)
        return row

    def extend(self, other: SpanBuilder, names: np.ndarray) -> int:
        """Append ``other``'s intervals (a reader of a later part of the text), its name ids mapped through
        ``names``; returns the first new row."""
        self._flush()
        other._flush()
        row = self.rows
        for c in other.chunks:
            self.chunks.append([*c[:4], names[c[4]], c[5]])
        self.rows += other.rows
        other.chunks, other.rows = [], 0
        return row

    def _flush(self) -> None:
        """The single intervals appended so far become a chunk."""
        if len(self.start):
            self.chunks.append([np.array(self.start, dtype=np.float64), np.array(self.end, dtype=np.float64)]
                               + [np.array(c, dtype=np.int64) for c in (self.device, self.stream, self.name,
                                                                         self.ext)])
            self.rows += len(self.start)
            self.start, self.end = array("d"), array("d")
            self.device, self.stream, self.ext, self.name = array("q"), array("q"), array("q"), array("q")

    def __len__(self) -> int:
        return self.rows + len(self.start)

    def build(self, scale: float, origin: float) -> Spans:
        """The columns, times as ``(t - origin) * scale`` seconds (each column joined then its chunks freed: the
        peak is one column over the rows kept)."""
        self._flush()
        columns: list[np.ndarray] = []
        for k, dtype in enumerate((np.float64, np.float64, np.int64, np.int64, np.int64, np.int64)):
            parts = [c[k] for c in self.chunks]
            joined = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.empty(0, dtype)
            for c in self.chunks:
                c[k] = None
            del parts
            columns.append(joined)
        self.chunks, self.rows = [], 0
        start, end = columns[0], columns[1]
        start -= origin
        start *= scale
        end -= origin
        end *= scale
        np.maximum(end, start, out=end)
        return Spans(start, end, *columns[2:])


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
