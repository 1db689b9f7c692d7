"""Guards on a trace's JSON text as it streams, before the parser sees it: a nesting-depth bound (ijson keeps the
path prefix of every open level, so memory grows with the square of the depth: 200 KB of ``[`` took 24 GB), found
by a vectorised scan of each chunk for brackets outside strings, and parser errors as one line."""

from __future__ import annotations

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.inputs import MAX_DEPTH

QUOTE, BACKSLASH = 0x22, 0x5C
MARKS = bytes(1 if b == QUOTE else 2 if b in b"[{" else 3 if b in b"]}" else 0x30 if 0x30 <= b <= 0x39
              else 0x65 if b in b"eE" else 0 for b in range(256))
"""a chunk's bytes as 1 (a quote), 2 (an opening bracket), 3 (a closing one), ``0`` (a digit), ``e`` (``e``/``E``)
or 0, by ``bytes.translate``: the brackets for the scan, the digits and exponents for the fast reader's number
screen (``kineto_batch.decode``), in one pass"""


class DepthScan:
    """The nesting depth of a JSON text fed in chunks, carried across chunk boundaries (inside a string or not, an
    odd run of backslashes before the boundary); ``feed`` refuses a text nested deeper than ``limit``. Each chunk
    costs a few array passes: quotes not escaped toggle strings, brackets outside strings move the depth."""

    def __init__(self, source: str, limit: int = MAX_DEPTH) -> None:
        self.source, self.limit = source, limit
        self.depth = 0
        self.in_string = False
        self.escaped = False  # the previous chunk ended in an odd run of backslashes
        self.offset = 0
        self.shape = b""
        """the last chunk's bytes through ``MARKS``"""

    def feed(self, chunk: bytes) -> tuple[np.ndarray, np.ndarray]:
        """Scan a chunk; returns the offsets in it of the brackets outside strings and the depth after each."""
        none = np.zeros(0, dtype=np.int64)
        self.shape = chunk.translate(MARKS)  # one C pass: quotes, brackets, digits and exponents
        if not chunk:
            return none, none
        marks = np.frombuffer(self.shape, dtype=np.uint8)
        at = np.flatnonzero((marks - np.uint8(1)) < 3)  # quotes and brackets (a bool array: numpy's fast nonzero)
        kind = marks[at]
        quote = kind == 1
        if BACKSLASH in chunk or self.escaped:  # bytes membership: a C scan
            data = np.frombuffer(chunk, dtype=np.uint8)
            rows = np.flatnonzero(quote)
            quote[rows[self._escaped_quotes(data, at[rows])]] = False
            self._carry_escape(data)
        quotes = at[quote]
        bracket = kind >= 2
        where, path = at[bracket], none
        if len(where):
            # a bracket is outside strings when an even number of quotes precede it (counting the carried state)
            outside = ((np.searchsorted(quotes, where) + self.in_string) & 1) == 0
            where = where[outside]
            path = self.depth + np.cumsum(np.where(kind[bracket][outside] == 2, 1, -1), dtype=np.int64)
            if len(path):
                over = np.flatnonzero(path > self.limit)
                if len(over):
                    raise SpecError(f"nested more than {self.limit} levels deep (at byte offset "
                                    f"{self.offset + int(where[over[0]]):,} of the JSON text)", source=self.source)
                self.depth = int(path[-1])
        self.in_string ^= bool(len(quotes) & 1)
        self.offset += len(chunk)
        return where, path

    def _escaped_quotes(self, data: np.ndarray, quotes: np.ndarray) -> np.ndarray:
        """Which quotes follow an odd run of backslashes (the run may begin in the previous chunk): only quotes right
        after a backslash are walked back, and each backslash is walked over at most once."""
        escaped = np.zeros(len(quotes), dtype=bool)
        after = np.flatnonzero(data[np.maximum(quotes - 1, 0)] == BACKSLASH) if len(quotes) else quotes
        for k in after.tolist():
            run = self._run_before(data, int(quotes[k]))
            escaped[k] = bool(run & 1)
        if len(quotes) and quotes[0] == 0 and self.escaped:
            escaped[0] = True
        return escaped

    def _run_before(self, data: np.ndarray, end: int) -> int:
        """Backslashes directly before index ``end`` (a run reaching the chunk's start adds the carried parity)."""
        i = end - 1
        while i >= 0 and data[i] == BACKSLASH:
            i -= 1
        return end - 1 - i + (int(self.escaped) if i < 0 else 0)

    def _carry_escape(self, data: np.ndarray) -> None:
        self.escaped = bool(self._run_before(data, len(data)) & 1) if data[-1] == BACKSLASH else False


def parser_message(exc: Exception) -> str:
    """A JSON parser's error as one line: yajl's message, with the text it quotes around the error (yajl prints it on
    a second line and a caret on a third)."""
    raw = exc.args[0] if len(exc.args) == 1 else str(exc)
    text = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else str(raw)  # yajl: bytes at times
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return f"not valid JSON: {type(exc).__name__}"
    message = f"not valid JSON: {lines[0].strip()}"
    if len(lines) >= 3 and "(right here)" in lines[2]:
        near = lines[1].strip()[:60]
        if near:
            message += f" near {near!r}"
    return message
