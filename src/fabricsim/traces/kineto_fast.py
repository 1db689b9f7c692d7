"""The fast Kineto JSON reader: the same result as the reference reader (``traces.read``, ijson one event at a time)
at disk speed, in the same bounded memory.

Each chunk is scanned for brackets outside strings (``DepthScan``, which also guards the depth); the items of
``traceEvents`` are the containers that close back to the array's depth, so a chunk's whole items are one byte
range, decoded and reduced as a batch (``traces.kineto_batch``); the incomplete last item waits for the next
chunk. Everything else (the header, the array's brackets, what follows it) still goes through ijson, which checks
that the array cut out is ``traceEvents`` and that the text around it is valid JSON; the header is read as the
reference reader does, from the chunks up to the one where the first item ends, but from their text around the
items only (the same values: the items are decoded, and checked, by the batches; a small file's header is not
parsed through all its events three more times).

Whatever this reader cannot vouch for raises ``Fallback`` and the reference reader reads the file again and
decides: invalid JSON (so its messages are yajl's, as before), a nesting too deep, a damaged gzip stream, items
that are not objects first, a trace with no events. The max-events refusal is raised here, once the text up to it
is known to be valid."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import IO, Any, Protocol

from fabricsim.errors import SpecError
from fabricsim.traces.events import Progress, TraceEvents
from fabricsim.traces.kineto import KinetoReader
from fabricsim.traces.kineto_batch import WHITESPACE, Event, Slow, add_batch, decode
from fabricsim.traces.scan import DepthScan

BEFORE, ITEMS, AFTER = range(3)
KEY = b'"traceEvents"'
SEPARATOR = re.compile(rb"[ \t\r\n]*[^ \t\r\n]")
"""up to the first byte after whitespace: a later run starts with the comma after the previous one"""
LOOK_BACK = 64
"""bytes kept from the previous chunk to find the ``"traceEvents":`` key before the array's ``[``"""


class Readable(Protocol):
    """A stream of the JSON text (a file, or a range of it)."""

    def read(self, size: int = -1, /) -> bytes: ...


class Fallback(Exception):
    """The reference reader must read this file."""


class Splitter:
    """Cuts the JSON text into what ijson checks (all but the items of the events array) and runs of whole items."""

    def __init__(self, bare: bool) -> None:
        self.bare = bare
        self.level = 1 if bare else 2  # the depth inside the events array
        self.mode = BEFORE
        self.look = b""
        self.pending: list[bytes] = []
        self.pending_shape: list[bytes] = []  # the pending text's shape (``DepthScan.shape``)
        self.first_run = True
        self.items = False  # a whole item has been seen

    def feed(self, chunk: bytes, where: Any, path: Any,
             shape: bytes) -> tuple[list[tuple[str, bytes]], list[tuple[bytearray, bytearray]]]:
        """The pieces of ``chunk`` for ijson, tagged ``before``/``start``/``end``/``after``, and its runs of whole
        items, each as a JSON array with its shape (``shape`` is the chunk's: ``DepthScan.shape``)."""
        main: list[tuple[str, bytes]] = []
        runs: list[tuple[bytearray, bytearray]] = []
        pos = 0
        if self.mode == BEFORE:
            start = self._start(chunk, where, path)
            if start < 0:
                self.look = (self.look + chunk[-LOOK_BACK:])[-LOOK_BACK:]
                return [("before", chunk)], runs
            main.append(("start", chunk[:start + 1]))
            self.mode, pos = ITEMS, start + 1
        if self.mode == ITEMS:
            later = where >= pos
            where, path = where[later], path[later]
            closes = (path == self.level - 1).nonzero()[0]
            stop = int(where[closes[0]]) if len(closes) else len(chunk)
            ends = where[(path == self.level) & (where < stop)]
            view, form = memoryview(chunk), memoryview(shape)
            if len(ends):
                last = int(ends[-1]) + 1
                runs.append(self._array(view[pos:last], form[pos:last]))
                self.items, pos = True, last
            if not len(closes):
                self.pending.append(chunk[pos:])
                self.pending_shape.append(shape[pos:])
                return main, runs
            if view[pos:stop].tobytes().strip(WHITESPACE) or any(p.strip(WHITESPACE) for p in self.pending):
                if not self.items:
                    raise Fallback  # items that are not containers before the first one
                runs.append(self._array(view[pos:stop], form[pos:stop]))
            main.append(("end", chunk[stop:]))
            self.mode = AFTER
            return main, runs
        return [("after", chunk)], runs

    def _array(self, tail: memoryview, tail_shape: memoryview) -> tuple[bytearray, bytearray]:
        """The pending text and ``tail`` as a JSON array of items (the comma before a later run made a space), and
        its shape."""
        text, shape = bytearray(b"["), bytearray(b"\x02")
        for part, form in zip(self.pending, self.pending_shape, strict=True):
            text += part
            shape += form
        text += tail
        text += b"]"
        shape += tail_shape
        shape += b"\x03"
        self.pending, self.pending_shape = [], []
        found = SEPARATOR.match(text, 1)
        if self.first_run:
            if found is None or text[found.end() - 1] != 0x7B:
                raise Fallback  # the reference reader ends its header on the first item: only an object is simple
        elif found is None or text[found.end() - 1] != 0x2C:
            raise Fallback  # not valid JSON: the reference reader says so
        else:
            text[found.end() - 1] = 0x20
        self.first_run = False
        return text, shape

    def tail(self) -> bytes:
        """The incomplete item at the end of the text so far, as the start of a JSON array."""
        text = b"".join(self.pending)
        return b"[" + text if self.first_run else b"[0" + text

    def _start(self, chunk: bytes, where: Any, path: Any) -> int:
        """The offset in ``chunk`` of the events array's ``[`` (-1: not in this chunk)."""
        for i in (path == self.level).nonzero()[0].tolist():
            at = int(where[i])
            if chunk[at] != 0x5B:
                continue
            if self.bare:
                return at
            before = (self.look + chunk[max(0, at - LOOK_BACK):at]).rstrip(WHITESPACE)
            if before.endswith(b":") and before[:-1].rstrip(WHITESPACE).endswith(KEY):
                return at
        return -1


def _check(events: list[Any], tag: str, key: str) -> None:
    """What ijson parsed of the text around the items: the events array opens and closes where the splitter says,
    and no other text is items of it."""
    inside = [e for e in events if e[0] == key or e[0].startswith(key + ".") or (key == "" and e[0])]
    if tag == "start":
        ok = bool(events) and events[-1] == (key, "start_array", None) and len(inside) == 1
    elif tag == "end":
        ok = bool(events) and events[0] == (key, "end_array", None) and len(inside) == 1
    else:
        ok = not inside
    if not ok:
        raise Fallback


class Part:
    """The reading of the JSON text, or of one byte range of it (``traces.parallel``): ``start`` 0 is the text
    from its beginning (the header read as the reference reader does); a later ``start`` is the offset of the comma
    after an item of the events array, the range read as that array's items (ijson checks the end of the array,
    and what follows it, after the events array's opening as its prefix). ``last``: the range runs to the end of
    the text (``close`` checks it is done); otherwise ``close`` checks the range ends between two items."""

    def __init__(self, source: str, max_events: int, bare: bool, start: int = 0, last: bool = True) -> None:
        import ijson

        self.key = "" if bare else "traceEvents"
        self.start, self.last = start, last
        self.reader = KinetoReader(source, max_events)
        self.scan, self.split = DepthScan(source), Splitter(bare)
        self.parsed: list[Any] = ijson.sendable_list()
        self.main = ijson.parse_coro(self.parsed)
        self.devices: list[Any] = ijson.sendable_list()
        self.dist: list[Any] = ijson.sendable_list()
        self.host: list[Any] = ijson.sendable_list()
        self.header = [] if bare or start else [ijson.items_coro(self.devices, "deviceProperties.item", use_float=True),
                                                 ijson.items_coro(self.dist, "distributedInfo", use_float=True),
                                                 ijson.items_coro(self.host, "host_name", use_float=True)]
        if start:  # between two items: inside the events array, as the text before it left the parser
            self.scan.depth, self.scan.offset = self.split.level, start
            self.split.mode, self.split.first_run, self.split.items = ITEMS, False, True
            self.main.send(b"[" if bare else b'{"traceEvents": [')
            _check(self.parsed, "start", self.key)
            del self.parsed[:]

    def feed(self, chunk: bytes) -> None:
        """The next chunk of the text (or of the range)."""
        where, path = self.scan.feed(chunk)
        pieces, runs = self.split.feed(chunk, where, path, self.scan.shape)
        for tag, text in pieces:
            for coro in self.header:  # the text around the items: what the header is (the items are checked below)
                coro.send(text)
            self.main.send(text)
            _check(self.parsed, tag, self.key)
            del self.parsed[:]
        _add(self.reader, self.split, [_decode(array, shape) for array, shape in runs])
        if self.split.items:
            self.header = []  # as the reference reader: the header ends with the chunk where the first item ends

    def close(self) -> None:
        """At the end of the text (or of the range): Fallback unless it was read whole (or ends between items)."""
        split, scan = self.split, self.scan
        if self.last:
            self.main.close()
            _check(self.parsed, "after", self.key)
            if split.mode != AFTER or self.reader.seen == 0:
                raise Fallback
        elif (split.mode != ITEMS or not split.items or self.header or scan.depth != split.level or scan.in_string
              or scan.escaped or any(p.strip(WHITESPACE) for p in split.pending)):
            raise Fallback  # the range does not end between two items of the events array

    def finish(self) -> TraceEvents:
        return self.reader.finish(self.devices, self.dist[0] if self.dist else None,
                                  self.host[0] if self.host else None)


def read_kineto_fast(first: bytes, stream: IO[bytes], raw: IO[bytes], total: int, source: str, max_events: int,
                     progress: Progress | None, chunk_bytes: int, batch_bytes: int) -> TraceEvents:
    """The events of a Kineto JSON whose first chunk (``chunk_bytes`` long, its lead byte ``{`` or ``[``) is
    ``first``; later chunks are read from ``stream``, ``batch_bytes`` at a time once the header is behind."""
    part = Part(source, max_events, is_bare(first))
    read_part(part, first, stream, chunk_bytes, batch_bytes, lambda: progress(raw.tell(), total) if progress else None)
    return part.finish()


def is_bare(first: bytes) -> bool:
    """A bare event array (not an object with ``traceEvents``), by the text's first chunk."""
    return first.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] == b"["


def read_part(part: Part, first: bytes, stream: Readable, chunk_bytes: int, batch_bytes: int,
              report: Callable[[], None], whole: Callable[[], bool] = lambda: True) -> None:
    """Feed ``part`` the text: ``first`` then ``stream``'s chunks (``chunk_bytes`` while the header is read, then
    ``batch_bytes``), and close it; Fallback where the reference reader must decide (the max-events refusal
    stands). ``whole``: False once a read came back short of what was asked before the stream's end (a range cut
    at its end): the header must not be read from such a chunk (the reference reader's chunk would hold more)."""
    chunk = first
    try:
        while chunk:
            if part.header and not whole():
                raise Fallback
            part.feed(chunk)
            chunk = stream.read(chunk_bytes if part.header else batch_bytes)
            if chunk:
                report()
        part.close()
    except _MaxEvents as refused:
        raise refused.error from None
    except Exception:  # not valid JSON, too deep, a damaged stream, an id past int64: the reference reader's words
        raise Fallback from None


def _decode(array: bytearray, shape: bytearray) -> tuple[bytearray, list[Any]]:
    """A run of items (and its shape) and its items: msgspec structs, or ijson's dicts where msgspec cannot be
    trusted to read as yajl does."""
    import ijson

    try:
        return array, decode(array, shape)
    except Slow:
        return array, list(ijson.items(bytes(array), "item", use_float=True))


class _MaxEvents(Exception):
    def __init__(self, error: SpecError) -> None:
        self.error = error


def _add(reader: KinetoReader, split: Splitter, runs: list[tuple[bytearray, list[Any]]]) -> None:
    """Reduce the chunk's runs of items; the max-events refusal stands only when the incomplete item after them is
    valid so far (the reference reader parses a whole chunk before it counts its events)."""
    import ijson

    try:
        for array, items in runs:
            if items and isinstance(items[0], Event):
                try:
                    add_batch(reader, items)
                    continue
                except Slow:
                    items = list(ijson.items(bytes(array), "item", use_float=True))
            for item in items:
                reader.add(item)
    except SpecError as exc:
        try:
            ijson.basic_parse_coro(ijson.sendable_list()).send(split.tail())
        except ijson.JSONError:
            raise Fallback from None
        raise _MaxEvents(exc) from None
