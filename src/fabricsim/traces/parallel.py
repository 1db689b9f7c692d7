"""A large Kineto JSON read on several cores: the text cut into byte ranges between two items of ``traceEvents``,
each range read by the fast reader (``traces.kineto_fast.Part``) in its own process (this one reads the first,
forked children the others, each from the file itself: no process holds more than a batch of the text), and the
readers merged in order (``KinetoReader.absorb``) into what one reader of the whole text builds: the same names in
the same order, rows, argument sets shared, dropped counts and first examples.

A cut is a guess: the comma of a ``}, {`` found near an equal share of the file. The range before it vouches for it
(its bracket scan ends between two items of the events array, outside strings, the array still open); where a
range cannot (a guess inside a string or a nested list, invalid text, a nesting too deep, more events than
max-events, a child that died) the whole file is read again by one process (``Serial``), which decides as
before: so errors and refusals are the serial reader's."""

from __future__ import annotations

import os
import pickle
import re
from multiprocessing.connection import Connection
from typing import IO, Any

from fabricsim.traces.events import Progress, TraceEvents
from fabricsim.traces.kineto import KinetoReader
from fabricsim.traces.kineto_fast import Part, is_bare, read_part

PARALLEL_BYTES = 64 << 20
"""a JSON file at least this big (and not gzip'd) is read on several cores; a smaller one by one process"""
MAX_PARTS = 4
"""processes reading one file at most (memory: each holds its range's columns until they are merged)"""
WINDOW = 1 << 20
"""bytes looked through for a cut after each share's nominal offset"""
CUT = re.compile(rb"\}[ \t\r\n]*(,)[ \t\r\n]*\{")
"""the end of an item, its comma and the start of the next: a cut falls on the comma"""


class Serial(Exception):
    """One process must read this file."""


def parts_for(total: int) -> int:
    """How many processes read a file of ``total`` bytes (1: this one alone; also in a worker of a process pool,
    as ``trace import`` of many ranks' files runs: its cores are taken)."""
    import multiprocessing

    if total < PARALLEL_BYTES or multiprocessing.parent_process() is not None:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_PARTS, cores, total // (PARALLEL_BYTES // 2)))


def find_cuts(raw: IO[bytes], total: int, parts: int, skip: int) -> list[int]:
    """Offsets of commas between two items, one near each ``k / parts`` of the file (after ``skip`` bytes, in
    increasing order; fewer where a window holds none)."""
    cuts: list[int] = []
    for k in range(1, parts):
        at = max(total * k // parts, skip, cuts[-1] + 1 if cuts else 0)
        raw.seek(at)
        found = CUT.search(raw.read(WINDOW))
        if found is not None:
            cuts.append(at + found.start(1))
    return cuts


class Limited:
    """A file's bytes from its position up to ``stop`` (None: its end); ``whole()`` is False once a read came back
    short because of ``stop``."""

    def __init__(self, raw: IO[bytes], stop: int | None) -> None:
        self.raw, self.stop, self.cut = raw, stop, False

    def read(self, size: int = -1, /) -> bytes:
        if self.stop is None or size < 0:
            return self.raw.read(size if self.stop is None else max(0, self.stop - self.raw.tell()))
        left = self.stop - self.raw.tell()
        if left < size:
            self.cut = True
        return self.raw.read(max(0, min(size, left)))

    def whole(self) -> bool:
        return not self.cut


def read_parallel(path: str, first: bytes, raw: IO[bytes], total: int, source: str, max_events: int,
                  progress: Progress | None, chunk_bytes: int, batch_bytes: int, parts: int) -> TraceEvents:
    """The events of the (uncompressed) Kineto JSON ``path`` read by ``parts`` processes; ``first`` is its first
    chunk (``raw`` is after it). Serial where one process must read it."""
    import multiprocessing

    cuts = find_cuts(raw, total, parts, 4 * chunk_bytes)
    if not cuts:
        raise Serial
    raw.seek(len(first))
    bare = is_bare(first)
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:  # no fork here (Windows)
        raise Serial from None
    children: list[tuple[Any, Connection]] = []
    try:
        for start, stop in zip(cuts, [*cuts[1:], None], strict=True):
            mine, theirs = context.Pipe(duplex=False)
            child = context.Process(target=_child, args=(theirs, path, source, max_events, bare, start, stop,
                                                         batch_bytes), daemon=True)
            child.start()
            theirs.close()
            children.append((child, mine))
        part = Part(source, max_events, bare, last=False)
        stream = Limited(raw, cuts[0])
        scale = total / cuts[0]
        read_part(part, first, stream, chunk_bytes, batch_bytes,
                  lambda: progress(min(total, int(raw.tell() * scale)), total) if progress else None, stream.whole)
        for _, conn in children:
            part.reader.absorb(_receive(conn))
        part.reader.check()
    except Exception:  # a range that cannot vouch for its cut, invalid text, too many events: one process decides
        raise Serial from None
    finally:
        for child, conn in children:
            conn.close()
            if child.is_alive():
                child.terminate()
            child.join()
    return part.finish()


def _child(conn: Connection, path: str, source: str, max_events: int, bare: bool, start: int, stop: int | None,
           batch_bytes: int) -> None:
    """A forked process: read the range ``start``..``stop`` of ``path`` and send its reader (None: it cannot vouch
    for the range)."""
    reader: KinetoReader | None = None
    try:
        with open(path, "rb") as raw:
            raw.seek(start)
            stream = Limited(raw, stop)
            part = Part(source, max_events, bare, start=start, last=stop is None)
            read_part(part, stream.read(batch_bytes), stream, batch_bytes, batch_bytes, lambda: None)
            reader = part.reader
            reader.args_by_key = {}  # only for reading on: not sent
    except Exception:  # the parent reads the file with one process
        reader = None
    try:
        if reader is None:
            conn.send(None)
        else:  # the columns as they are, after the rest (pickled without them): no copy of them in this process
            columns: list[pickle.PickleBuffer] = []
            rest = pickle.dumps(reader, protocol=5, buffer_callback=columns.append)
            del reader
            conn.send((rest, [c.raw().nbytes for c in columns]))
            for column in columns:
                conn.send_bytes(column.raw())
    finally:
        conn.close()


def _receive(conn: Connection) -> KinetoReader:
    """A child's reader: each column read straight into its own (writable) buffer."""
    sent = conn.recv()
    if sent is None:
        raise Serial
    rest, sizes = sent
    columns = []
    for size in sizes:
        column = bytearray(size)
        if size:
            conn.recv_bytes_into(column)
        else:
            conn.recv_bytes()
        columns.append(column)
    reader: KinetoReader = pickle.loads(rest, buffers=columns)
    return reader
