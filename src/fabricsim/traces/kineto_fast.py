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
from typing import IO, Any

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
        self.first_run = True
        self.items = False  # a whole item has been seen

    def feed(self, chunk: bytes, where: Any, path: Any) -> tuple[list[tuple[str, bytes]], list[bytearray]]:
        """The pieces of ``chunk`` for ijson, tagged ``before``/``start``/``end``/``after``, and its runs of whole
        items, each as a JSON array."""
        main: list[tuple[str, bytes]] = []
        runs: list[bytearray] = []
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
            view = memoryview(chunk)
            if len(ends):
                last = int(ends[-1]) + 1
                runs.append(self._array(view[pos:last]))
                self.items, pos = True, last
            if not len(closes):
                self.pending.append(chunk[pos:])
                return main, runs
            if view[pos:stop].tobytes().strip(WHITESPACE) or any(p.strip(WHITESPACE) for p in self.pending):
                if not self.items:
                    raise Fallback  # items that are not containers before the first one
                runs.append(self._array(view[pos:stop]))
            main.append(("end", chunk[stop:]))
            self.mode = AFTER
            return main, runs
        return [("after", chunk)], runs

    def _array(self, tail: memoryview) -> bytearray:
        """The pending text and ``tail`` as a JSON array of items (the comma before a later run made a space)."""
        text = bytearray(b"[")
        for part in self.pending:
            text += part
        text += tail
        text += b"]"
        self.pending = []
        found = SEPARATOR.match(text, 1)
        if self.first_run:
            if found is None or text[found.end() - 1] != 0x7B:
                raise Fallback  # the reference reader ends its header on the first item: only an object is simple
        elif found is None or text[found.end() - 1] != 0x2C:
            raise Fallback  # not valid JSON: the reference reader says so
        else:
            text[found.end() - 1] = 0x20
        self.first_run = False
        return text

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


def read_kineto_fast(first: bytes, stream: IO[bytes], raw: IO[bytes], total: int, source: str, max_events: int,
                     progress: Progress | None, chunk_bytes: int, batch_bytes: int) -> TraceEvents:
    """The events of a Kineto JSON whose first chunk (``chunk_bytes`` long, its lead byte ``{`` or ``[``) is
    ``first``; later chunks are read from ``stream``, ``batch_bytes`` at a time once the header is behind."""
    import ijson

    bare = first.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] == b"["
    key = "" if bare else "traceEvents"
    reader = KinetoReader(source, max_events)
    scan, split = DepthScan(source), Splitter(bare)
    parsed: list[Any] = ijson.sendable_list()
    main = ijson.parse_coro(parsed)
    devices: list[Any] = ijson.sendable_list()
    dist: list[Any] = ijson.sendable_list()
    host: list[Any] = ijson.sendable_list()
    header = [] if bare else [ijson.items_coro(devices, "deviceProperties.item", use_float=True),
                              ijson.items_coro(dist, "distributedInfo", use_float=True),
                              ijson.items_coro(host, "host_name", use_float=True)]
    chunk = first
    try:
        while chunk:
            where, path = scan.feed(chunk)
            pieces, runs = split.feed(chunk, where, path)
            for tag, text in pieces:
                for coro in header:  # the text around the items: what the header is (the items are checked below)
                    coro.send(text)
                main.send(text)
                _check(parsed, tag, key)
                del parsed[:]
            _add(reader, split, [_decode(array) for array in runs])
            if split.items:
                header = []  # as the reference reader: the header ends with the chunk where the first item ends
            chunk = stream.read(chunk_bytes if header else batch_bytes)
            if progress is not None and chunk:
                progress(raw.tell(), total)
        main.close()
        _check(parsed, "after", key)
    except _MaxEvents as refused:
        raise refused.error from None
    except Exception:  # not valid JSON, too deep, a damaged stream, an id past int64: the reference reader's words
        raise Fallback from None
    if split.mode != AFTER or reader.seen == 0:
        raise Fallback
    return reader.finish(devices, dist[0] if dist else None, host[0] if host else None)


def _decode(array: bytearray) -> tuple[bytearray, list[Any]]:
    """A run of items and its items: msgspec structs, or ijson's dicts where msgspec cannot be trusted to read as
    yajl does."""
    import ijson

    try:
        return array, decode(array)
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
