"""Tokenising nccl-tests logs: launcher prefixes stripped, the column header read into a layout, and each result
line checked and split into values; kept apart from the table parser in :mod:`fabricsim.nccltests.parse`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from fabricsim.errors import SpecError
from fabricsim.nccltests.rows import canonical_dtype, dtype_size

_PREFIXES = (
    re.compile(r"^\s*\[\d+,(?P<rank>\d+)\]<(?:stdout|stderr)>:"),  # mpirun --tag-output
    re.compile(r"^\s*(?P<rank>\d+):\s"),  # srun --label
    re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s"),  # log timestamps
)
_INT = re.compile(r"^-?\d+$")
_DATE = re.compile(r"^\d{4}-\d\d-\d\d$")

_TIME_NAMES = ("time", "cputime")
_PREFIX_NAMES = ("size", "count", "type", "redop", "root")


@dataclass
class _Line:
    number: int
    body: str  # launcher prefix removed, indentation kept
    rank: int | None  # launcher tag, when the line had one

    @property
    def text(self) -> str:
        return self.body.strip()


@dataclass
class _Columns:
    """The layout a column header line announces."""

    prefix: list[str]
    groups: list[list[str]]
    in_place: list[bool]
    timestamp: bool
    group_ends: list[int]  # end column of each group's time header, to place a row with one blank group
    width: int

    @property
    def ntokens(self) -> int:
        return len(self.prefix) + sum(len(g) for g in self.groups)



def _normalize(text: str) -> list[_Line]:
    lines: list[_Line] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        body = raw.rstrip()
        rank: int | None = None
        stripped = True
        while stripped:
            stripped = False
            for pattern in _PREFIXES:
                m = pattern.match(body)
                if m:
                    if "rank" in m.groupdict() and m["rank"] is not None and rank is None:
                        rank = int(m["rank"])
                    body = body[m.end():]
                    stripped = True
        lines.append(_Line(number, body, rank))
    return _one_printer(lines)


def _one_printer(lines: list[_Line]) -> list[_Line]:
    """With launcher tags, keep the lowest rank that prints tables (a non-MPI build prints one per process)."""
    printers = {ln.rank for ln in lines if ln.rank is not None and _is_header(ln.text)}
    if len(printers) <= 1:
        return lines
    keep = min(printers)
    return [ln for ln in lines if ln.rank is None or ln.rank == keep]


def _is_header(text: str) -> bool:
    tokens = text.lstrip("#").split()
    return text.startswith("#") and len(tokens) > 2 and tokens[0] == "size" and tokens[1] == "count"


def _labels(text: str) -> list[bool]:
    """The order of 'out-of-place' / 'in-place' on the line above the header."""
    found = [(m.start(), m.group(0) == "in-place") for m in re.finditer(r"out-of-place|in-place", text)]
    return [in_place for _, in_place in sorted(found)]


def _columns(line: _Line, labels: list[bool] | None) -> _Columns:
    body = line.body
    hash_at = body.index("#")
    tokens = [(m.group(0), m.end()) for m in re.finditer(r"\S+", body[hash_at + 1:])]
    names = [t for t, _ in tokens]
    timestamp = bool(names) and names[-1] == "timestamp"
    if timestamp:
        tokens = tokens[:-1]
        names = names[:-1]
    starts = [i for i, name in enumerate(names) if name in _TIME_NAMES]
    if not starts:
        raise SpecError(f"line {line.number}: the column header has no 'time' column")
    prefix = names[: starts[0]]
    if prefix[:2] != ["size", "count"]:
        raise SpecError(f"line {line.number}: the column header does not start with 'size count'")
    groups = [names[s:e] for s, e in zip(starts, [*starts[1:], len(names)], strict=True)]
    for group in groups:
        if "algbw" not in group or "busbw" not in group:
            raise SpecError(f"line {line.number}: a column group lacks 'algbw' or 'busbw': {' '.join(group)}")
    if len(groups) > 2:
        raise SpecError(f"line {line.number}: expected at most two column groups, found {len(groups)}")
    if labels and len(labels) == len(groups):
        in_place = labels
    elif len(groups) == 2:
        in_place = [False, True]
    else:
        in_place = [labels[0] if labels else False]
    offset = hash_at + 1
    return _Columns(
        prefix=prefix,
        groups=groups,
        in_place=in_place,
        timestamp=timestamp,
        group_ends=[offset + tokens[s][1] for s in starts],
        width=len(body),
    )


def _value_tokens(line: _Line, columns: _Columns) -> list[tuple[str, int]]:
    tokens = [(m.group(0), m.end()) for m in re.finditer(r"\S+", line.body)]
    if columns.timestamp and len(tokens) >= 2 and _DATE.match(tokens[-2][0]):
        tokens = tokens[:-2]
    return tokens


def _float(text: str, name: str, line: int) -> float | None:
    if text.upper() == "N/A":
        return None
    try:
        value = float(text)
    except ValueError:
        raise SpecError(f"line {line}: cannot read {text!r} as the {name} column") from None
    if math.isinf(value):
        raise SpecError(f"line {line}: {text!r} in the {name} column is not a finite number")
    return None if math.isnan(value) else value


MAX_LOG_SIZE = 2**50  # bytes: a size column above 1 PiB is not a measurement


def _check_row(row: dict[str, Any], line: int) -> None:
    """Sizes a benchmark can have run: at most 1 PiB, at least ``count`` elements of the row's type."""
    size, count = row.get("size"), row.get("count")
    if size is not None and size > MAX_LOG_SIZE:
        raise SpecError(f"line {line}: size {size} bytes is more than 1 PiB; not a measurement")
    if size is not None and count is not None and "type" in row and count * dtype_size(row["type"]) > size:
        raise SpecError(f"line {line}: {count} {row['type']} elements do not fit in size {size} bytes")


def _int(text: str, name: str, line: int) -> int:
    if not _INT.match(text):
        raise SpecError(f"line {line}: cannot read {text!r} as the {name} column (a whole number)")
    return int(text)


def _row(line: _Line, columns: _Columns) -> dict[str, Any]:
    """One result line as {prefix columns..., 'groups': [(in_place, time_us, algbw, busbw, wrong)]}."""
    tokens = _value_tokens(line, columns)
    npre = len(columns.prefix)
    present: list[int]
    if len(tokens) == columns.ntokens:
        present = list(range(len(columns.groups)))
    elif len(columns.groups) == 2 and len(tokens) in (npre + len(g) for g in columns.groups):
        # One group left blank (nccl-tests prints spaces for a group it did not run): place it by column.
        end = tokens[npre][1]
        present = [min(range(2), key=lambda g: abs(columns.group_ends[g] - end))]
        if len(tokens) != npre + len(columns.groups[present[0]]):
            raise SpecError(f"line {line.number}: a result row does not fit the column header")
    else:
        raise SpecError(
            f"line {line.number}: a result row has {len(tokens)} values where the column header has "
            f"{columns.ntokens} (truncated or malformed line: {line.text!r})"
        )
    values = [t for t, _ in tokens]
    row: dict[str, Any] = {"line": line.number, "groups": []}
    for name, text in zip(columns.prefix, values[:npre], strict=True):
        if name in ("size", "count", "root"):
            row[name] = _int(text, name, line.number)
        elif name == "type":
            try:
                row["type"] = canonical_dtype(text)
            except SpecError as exc:
                raise SpecError(f"line {line.number}: {exc}") from None
        else:
            row[name] = text
    _check_row(row, line.number)
    at = npre
    for g in present:
        names = columns.groups[g]
        cells = dict(zip(names, values[at: at + len(names)], strict=True))
        at += len(names)
        time_us = _float(cells[names[0]], names[0], line.number)
        algbw = _float(cells["algbw"], "algbw", line.number)
        busbw = _float(cells["busbw"], "busbw", line.number)
        if time_us is None or algbw is None or busbw is None:
            continue  # the group was not measured (N/A)
        if time_us <= 0:
            raise SpecError(f"line {line.number}: time {time_us:g} us must be positive")
        if algbw < 0 or busbw < 0:
            raise SpecError(f"line {line.number}: negative bandwidth ({algbw:g}, {busbw:g} GB/s)")
        wrong: int | None = None
        if "#wrong" in cells:
            count = _float(cells["#wrong"], "#wrong", line.number)
            wrong = None if count is None else round(count)
        row["groups"].append((columns.in_place[g], time_us, algbw, busbw, wrong))
    return row

