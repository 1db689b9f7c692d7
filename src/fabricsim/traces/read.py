"""Read a profiler trace by streaming: a PyTorch/Kineto (Chrome trace) JSON, plain or gzip'd, or an Nsight Systems
SQLite export (``traces.nsys``). Anything else is a SpecError. A Kineto JSON is read in chunks (never ``json.load``:
a 2 GB trace is never in memory) by the fast reader (``traces.kineto_fast``: a chunk's events a batch at a time);
where it cannot vouch for the result it gives way to the reference reader here (ijson's event parser, one
``traceEvents`` item at a time, each reduced by ``KinetoReader.add``), whose result it reproduces exactly."""

from __future__ import annotations

import gzip
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from fabricsim.errors import SpecError
from fabricsim.traces.events import MAX_EVENTS, Progress, TraceEvents
from fabricsim.traces.kineto import KinetoReader
from fabricsim.traces.kineto_fast import Fallback, read_kineto_fast
from fabricsim.traces.pages import small_pages
from fabricsim.traces.parallel import Serial, parts_for, read_parallel
from fabricsim.traces.scan import DepthScan, parser_message

CHUNK_BYTES = 1 << 16
"""the reference reader's read size (and the fast reader's until the header is behind: the header is what the
chunks up to the first event's hold)"""
BATCH_BYTES = 1 << 19
"""the fast reader's read size after the header: a batch of items is at most this much text (512 KiB: a batch's
scan arrays and decoded events stay in cache; 5% less CPU than 1 MiB, benchmarks/bench_trace_import.py)"""
BATCH_SHARE = 128
"""a file's batches are at most 1/128 of its size (not under CHUNK_BYTES): a small trace keeps a small peak"""
NOT_A_TRACE = ("not a trace: expected a Kineto/Chrome trace JSON (.json, .json.gz) or an Nsight Systems SQLite "
               "export (nsys export --type sqlite)")
SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"


@small_pages()
def read_trace(path: str | Path, *, max_events: int = MAX_EVENTS, progress: Progress | None = None) -> TraceEvents:
    """The events of a Kineto JSON (``.json``, ``.json.gz``) or Nsight Systems SQLite trace, by content (numpy's
    huge pages off meanwhile: ``traces.pages``)."""
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
    gz = head.startswith(GZIP_MAGIC)
    with open(p, "rb") as raw:
        stream = cast("IO[bytes]", gzip.GzipFile(fileobj=raw)) if gz else raw
        try:
            return _read_kineto_fast(stream, raw, info.st_size, source, max_events, progress, path=None if gz else p,
                                     parts=1 if gz else parts_for(info.st_size))
        except Fallback:
            pass  # the reference reader reads it again and decides
        except (OSError, EOFError) as exc:  # a damaged gzip stream
            raise SpecError(f"cannot read trace: {exc}", source=source) from None
    with open(p, "rb") as raw:
        stream = cast("IO[bytes]", gzip.GzipFile(fileobj=raw)) if gz else raw
        try:
            return _read_kineto(stream, raw, info.st_size, source, max_events, progress)
        except (OSError, EOFError) as exc:  # a damaged gzip stream
            raise SpecError(f"cannot read trace: {exc}", source=source) from None


def _read_kineto_fast(stream: IO[bytes], raw: IO[bytes], total: int, source: str, max_events: int,
                      progress: Progress | None, path: Path | None = None, parts: int = 1) -> TraceEvents:
    """The fast reader (``traces.kineto_fast``): raises Fallback where the reference reader must decide. An
    uncompressed file (``path``, ``stream`` is ``raw``) is read by ``parts`` processes (``traces.parallel``)
    where they can vouch for the result, else by this one."""
    first = stream.read(CHUNK_BYTES)
    if first and progress is not None:
        progress(raw.tell(), total)
    if _first_byte(first) not in (b"{", b"["):
        raise SpecError(NOT_A_TRACE, source=source)
    batch = min(BATCH_BYTES, max(CHUNK_BYTES, total // BATCH_SHARE))
    if parts > 1 and path is not None and stream is raw:
        try:
            return read_parallel(str(path), first, raw, total, source, max_events, progress, CHUNK_BYTES, batch,
                                 parts)
        except Serial:
            raw.seek(len(first))  # one process reads it all and decides
    return read_kineto_fast(first, stream, raw, total, source, max_events, progress, CHUNK_BYTES, batch)


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
        raise SpecError(NOT_A_TRACE, source=source)
    reader = KinetoReader(source, max_events)
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


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


