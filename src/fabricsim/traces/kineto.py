"""The reader state of a Kineto (Chrome trace) JSON: what a summary keeps of each complete ('X') event, fed one
event at a time (``KinetoReader.add``, the reference semantics) or a batch at a time (``traces.kineto_batch``)."""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from fabricsim.traces.classify import LAUNCH, step_number
from fabricsim.traces.events import (
    Dropped,
    IntColumn,
    SpanBuilder,
    StepMarks,
    TraceEvents,
    as_int,
    check_count,
    kept_args,
)

KERNEL_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
CPU_CATS = frozenset({"cpu_op", "user_annotation"})
NUMBER = frozenset({int, float})
"""the JSON number types a timeline can hold (bool, a subclass of int, is not one)"""
USED_CATS = KERNEL_CATS | CPU_CATS | {"gpu_user_annotation"}
"""the categories of complete events a summary uses: those dropped as unreadable are counted"""


def unreadable(name: Any, ts: Any, dur: Any) -> str | None:
    """Why a complete event cannot be placed on the timeline (None: it can)."""
    if not isinstance(name, str):
        return "a name that is not a string"
    if not number(ts):
        return "a ts that is not a finite number"
    if not number(dur):
        return "a dur that is not a finite number"
    if dur < 0:
        return "a negative dur"
    return None


def number(value: Any) -> bool:
    """A JSON number a timeline can hold: not a string, bool, NaN, infinity or an integer beyond float range."""
    return isinstance(value, int | float) and not isinstance(value, bool) and -1e300 < value < 1e300


class KinetoReader:
    """Keeps, of each complete ('X') event, what a summary needs: kernels, CPU operators, collective annotations
    and ProfilerStep marks."""

    def __init__(self, source: str, max_events: int) -> None:
        self.source, self.max_events = source, max_events
        self.names: list[str] = []
        self.classes: list[str] = []
        index: dict[str, int] = {}
        self.kernels = SpanBuilder(self.names, self.classes, index)
        self.cpu = SpanBuilder(self.names, self.classes, index)
        # the ProfilerStep marks as columns: number, start and end (trace time), device (0 where on the CPU)
        self.step_number, self.step_device = IntColumn(), IntColumn()
        self.step_start, self.step_end, self.step_on_gpu = array("d"), array("d"), array("b")
        self.kernel_args: dict[int, dict[str, Any]] = {}
        self.cpu_args: dict[int, dict[str, Any]] = {}
        self.shared_args: dict[Any, dict[str, Any]] = {}  # equal argument sets stored once (kept_args)
        self.args_by_key: dict[Any, dict[str, Any]] = {}  # the same, found by their text (traces.kineto_batch)
        self.origin: float | None = None
        self.seen = 0
        self.dropped = Dropped()

    def add(self, event: Any) -> None:
        self.seen += 1
        if not isinstance(event, dict) or event.get("ph") != "X":
            return
        cat = str(event.get("cat", "")).lower()
        name = event.get("name")
        ts: Any = event.get("ts")
        dur: Any = event.get("dur", 0.0)
        if not (type(ts) in NUMBER and type(dur) in NUMBER and -1e300 < ts < 1e300 and 0 <= dur < 1e300
                and isinstance(name, str)):  # the common case in one expression: this runs once an event
            if cat in USED_CATS:
                self.dropped.add(unreadable(name, ts, dur) or "an unreadable ts or dur", name)
            return
        ts, dur = float(ts), float(dur)
        if self.origin is None:
            self.origin = ts
        found = event.get("args")
        args: dict[str, Any] = found if isinstance(found, dict) else {}
        if cat in KERNEL_CATS:
            self._kernel(name, ts, dur, event, args)
        elif cat in CPU_CATS or cat == "gpu_user_annotation":
            step = step_number(name)
            if step is not None:
                device = as_int(event.get("pid"), 0) if cat == "gpu_user_annotation" else None
                self.add_step(step, ts, ts + dur, device)
            elif cat in CPU_CATS:
                self._cpu(name, cat, ts, dur, event, args)

    def add_step(self, number: int, start: float, end: float, device: int | None) -> None:
        self.step_number.append(number)
        self.step_start.append(start)
        self.step_end.append(end)
        self.step_device.append(0 if device is None else device)
        self.step_on_gpu.append(device is not None)

    def check(self) -> None:
        """Refuse the trace once it holds more timeline events than ``max_events``."""
        check_count(len(self.kernels) + len(self.cpu), self.max_events, self.source)

    def _kernel(self, name: str, ts: float, dur: float, event: dict[str, Any], args: dict[str, Any]) -> None:
        name_id = self.kernels.name_id(name)
        device = as_int(args.get("device", event.get("pid")), 0)
        stream = as_int(args.get("stream", event.get("tid")), 0)
        row = self.kernels.add(name_id, ts, ts + dur, device, stream, as_int(args.get("External id")))
        if "Collective name" in args:
            self.kernel_args[row] = kept_args(args, self.shared_args)
        check_count(len(self.kernels) + len(self.cpu), self.max_events, self.source)

    def _cpu(self, name: str, cat: str, ts: float, dur: float, event: dict[str, Any], args: dict[str, Any]) -> None:
        name_id = self.cpu.name_id(name)
        cls = self.classes[name_id]
        if cat == "user_annotation" and cls not in ("communication", LAUNCH):
            return  # user ranges (forward, optimizer) are not work of their own
        row = self.cpu.add(name_id, ts, ts + dur, as_int(event.get("pid"), 0), as_int(event.get("tid"), 0),
                           as_int(args.get("External id")))
        if cls in ("communication", LAUNCH) or ("Input Dims" in args and cls == "gemm"):
            self.cpu_args[row] = kept_args(args, self.shared_args)
        check_count(len(self.kernels) + len(self.cpu), self.max_events, self.source)

    def absorb(self, other: KinetoReader) -> None:
        """Take in ``other``, the reader of the text after this one's (``traces.parallel``), as if this reader had
        read on: its names interned after these in its order, its rows after these, its argument sets shared with
        equal ones seen here (the first one seen stands), its dropped counts added (reasons new here after these)."""
        names = np.array([self.kernels.name_id(n) for n in other.names] or [0], dtype=np.int64)
        same = {id(d): self.shared_args.setdefault(key, d) for key, d in other.shared_args.items()}
        for mine, theirs, args, more in ((self.kernels, other.kernels, self.kernel_args, other.kernel_args),
                                         (self.cpu, other.cpu, self.cpu_args, other.cpu_args)):
            base = mine.extend(theirs, names)
            values = more.values()  # C-level loops: a child sends a million of these
            args.update(zip(map(base.__add__, more), map(same.get, map(id, values), values), strict=True))
        if self.origin is None:
            self.origin = other.origin
        self.seen += other.seen
        for reason, count in other.dropped.counts.items():
            self.dropped.counts[reason] = self.dropped.counts.get(reason, 0) + count
            self.dropped.examples.setdefault(reason, other.dropped.examples[reason])
        self.step_number.extend(list(other.step_number.values))
        self.step_device.extend(list(other.step_device.values))
        self.step_start.extend(other.step_start)
        self.step_end.extend(other.step_end)
        self.step_on_gpu.extend(other.step_on_gpu)

    def finish(self, devices: list[Any], dist: Any, host: Any) -> TraceEvents:
        origin = self.origin or 0.0
        steps = StepMarks(self.step_number.values, (np.frombuffer(self.step_start, dtype=np.float64) - origin) * 1e-6,
                          (np.frombuffer(self.step_end, dtype=np.float64) - origin) * 1e-6, self.step_device.values,
                          np.frombuffer(self.step_on_gpu, dtype=np.int8).astype(bool))
        names = {as_int(d.get("id"), i): str(d.get("name", "")) for i, d in enumerate(devices) if isinstance(d, dict)}
        info = dist if isinstance(dist, dict) else {}
        world = as_int(info.get("world_size"), 0)
        rank = as_int(info.get("rank"), -1)
        return TraceEvents(source=self.source, format="kineto", names=self.names, classes=self.classes,
                           kernels=self.kernels.build(1e-6, origin), cpu=self.cpu.build(1e-6, origin), steps=steps,
                           kernel_args=self.kernel_args, cpu_args=self.cpu_args, device_names=names,
                           backend=str(info["backend"]).lower() if info.get("backend") else None,
                           rank=rank if rank >= 0 else None, world_size=world or None,
                           host=str(host) if isinstance(host, str) else None, dropped=self.dropped)
