"""Read a profiler trace by streaming: a PyTorch/Kineto (Chrome trace) JSON, plain or gzip'd, through ijson's
event parser one ``traceEvents`` item at a time (never ``json.load``: a 2 GB trace is never in memory), or an
Nsight Systems SQLite export (``traces.nsys``). Anything else is a SpecError."""

from __future__ import annotations

import gzip
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from fabricsim.errors import SpecError
from fabricsim.traces.classify import LAUNCH, step_number
from fabricsim.traces.events import (
    MAX_EVENTS,
    Dropped,
    Progress,
    SpanBuilder,
    StepMark,
    TraceEvents,
    as_int,
    check_count,
    kept_args,
)
from fabricsim.traces.scan import DepthScan, parser_message

CHUNK_BYTES = 1 << 16
KERNEL_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
CPU_CATS = frozenset({"cpu_op", "user_annotation"})
NUMBER = frozenset({int, float})
"""the JSON number types a timeline can hold (bool, a subclass of int, is not one)"""
USED_CATS = KERNEL_CATS | CPU_CATS | {"gpu_user_annotation"}
"""the categories of complete events a summary uses: those dropped as unreadable are counted"""
SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"


def read_trace(path: str | Path, *, max_events: int = MAX_EVENTS, progress: Progress | None = None) -> TraceEvents:
    """The events of a Kineto JSON (``.json``, ``.json.gz``) or Nsight Systems SQLite trace, by content."""
    p = Path(path)
    source = str(path)
    try:
        info = p.stat()
    except FileNotFoundError:
        raise SpecError("trace not found", source=source) from None
    except OSError as exc:
        raise SpecError(f"cannot read trace: {exc.strerror or exc}", source=source) from None
    if not stat.S_ISREG(info.st_mode):
        raise SpecError("not a regular file", source=source)
    with open(p, "rb") as raw:
        head = raw.read(len(SQLITE_MAGIC))
    if head.startswith(SQLITE_MAGIC):
        from fabricsim.traces.nsys import read_nsys

        return read_nsys(p, max_events=max_events, progress=progress)
    with open(p, "rb") as raw:
        stream = cast("IO[bytes]", gzip.GzipFile(fileobj=raw)) if head.startswith(GZIP_MAGIC) else raw
        try:
            return _read_kineto(stream, raw, info.st_size, source, max_events, progress)
        except (OSError, EOFError) as exc:  # a damaged gzip stream
            raise SpecError(f"cannot read trace: {exc}", source=source) from None


def _chunks(stream: IO[bytes], raw: IO[bytes], total: int, progress: Progress | None) -> Iterator[bytes]:
    """The file in CHUNK_BYTES pieces, reporting progress by bytes of the file on disk."""
    while True:
        chunk = stream.read(CHUNK_BYTES)
        if not chunk:
            return
        if progress is not None:
            progress(raw.tell(), total)
        yield chunk


def _first_byte(chunk: bytes) -> bytes:
    text = chunk.lstrip(b" \t\r\n\xef\xbb\xbf")
    return text[:1]


def _read_kineto(stream: IO[bytes], raw: IO[bytes], total: int, source: str, max_events: int,
                 progress: Progress | None) -> TraceEvents:
    """Kineto / Chrome trace JSON: ``{"deviceProperties": [...], "distributedInfo": {...}, "traceEvents": [...]}``
    or a bare event array, each event reduced to a few array fields as it arrives. The header is read by three
    more ijson coroutines fed the same chunks until the first event arrives (Kineto writes it before the events),
    so the bulk of the file is parsed once."""
    import ijson

    chunks = _chunks(stream, raw, total, progress)
    first = next(chunks, b"")
    lead = _first_byte(first)
    if lead not in (b"{", b"["):
        raise SpecError("not a trace: expected a Kineto/Chrome trace JSON (.json, .json.gz) or an Nsight Systems "
                        "SQLite export (nsys export --type sqlite)", source=source)
    reader = _KinetoReader(source, max_events)
    events: list[Any] = ijson.sendable_list()
    devices: list[Any] = ijson.sendable_list()
    dist: list[Any] = ijson.sendable_list()
    host: list[Any] = ijson.sendable_list()
    main = ijson.items_coro(events, "traceEvents.item" if lead == b"{" else "item", use_float=True)
    header = [] if lead != b"{" else [ijson.items_coro(devices, "deviceProperties.item", use_float=True),
                                       ijson.items_coro(dist, "distributedInfo", use_float=True),
                                       ijson.items_coro(host, "host_name", use_float=True)]
    scan = DepthScan(source)
    try:
        for chunk in _prepend(first, chunks):
            scan.feed(chunk)  # before the parser: ijson's memory grows with the square of the depth
            for coro in header:
                coro.send(chunk)
            main.send(chunk)
            if events:
                header = []  # the header is behind us: stop parsing the file twice over
            for event in events:
                reader.add(event)
            del events[:]
        for coro in [main, *header]:
            coro.close()
        for event in events:
            reader.add(event)
    except ijson.JSONError as exc:
        raise SpecError(parser_message(exc), source=source) from None
    if reader.seen == 0:
        raise SpecError("not a trace: no traceEvents (expected a PyTorch profiler / Kineto trace)", source=source)
    return reader.finish(devices, dist[0] if dist else None, host[0] if host else None)


def _unreadable(name: Any, ts: Any, dur: Any) -> str | None:
    """Why a complete event cannot be placed on the timeline (None: it can)."""
    if not isinstance(name, str):
        return "a name that is not a string"
    if not _number(ts):
        return "a ts that is not a finite number"
    if not _number(dur):
        return "a dur that is not a finite number"
    if dur < 0:
        return "a negative dur"
    return None


def _number(value: Any) -> bool:
    """A JSON number a timeline can hold: not a string, bool, NaN, infinity or an integer beyond float range."""
    return isinstance(value, int | float) and not isinstance(value, bool) and -1e300 < value < 1e300


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


class _KinetoReader:
    """Keeps, of each complete ('X') event, what a summary needs: kernels, CPU operators, collective annotations
    and ProfilerStep marks."""

    def __init__(self, source: str, max_events: int) -> None:
        self.source, self.max_events = source, max_events
        self.names: list[str] = []
        self.classes: list[str] = []
        index: dict[str, int] = {}
        self.kernels = SpanBuilder(self.names, self.classes, index)
        self.cpu = SpanBuilder(self.names, self.classes, index)
        self.steps: list[tuple[int, float, float, int | None]] = []
        self.kernel_args: dict[int, dict[str, Any]] = {}
        self.cpu_args: dict[int, dict[str, Any]] = {}
        self.shared_args: dict[Any, dict[str, Any]] = {}  # equal argument sets stored once (kept_args)
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
                self.dropped.add(_unreadable(name, ts, dur) or "an unreadable ts or dur", name)
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
                self.steps.append((step, ts, ts + dur, device))
            elif cat in CPU_CATS:
                self._cpu(name, cat, ts, dur, event, args)

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

    def finish(self, devices: list[Any], dist: Any, host: Any) -> TraceEvents:
        origin = self.origin or 0.0
        steps = [StepMark(n, (a - origin) * 1e-6, (b - origin) * 1e-6, d) for n, a, b, d in self.steps]
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
