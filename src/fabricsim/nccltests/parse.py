"""Read nccl-tests output (all its ``*_perf`` binaries) into :class:`BenchResult` tables.

Real logs vary, and all of these are read:
- the column header decides the layout: ``redop``/``root`` columns present or not, ``#wrong`` or the old
  ``error`` column, ``time`` or ``cputime``, per-iteration ``i_*`` columns, a trailing ``timestamp``;
- both column groups (out-of-place, in-place) or a single one, named by the line above the header;
  ``N/A`` in a group (unchecked ``#wrong``, or a group that was not run) and a blank group;
- launcher prefixes on every line (``[1,0]<stdout>:`` from mpirun --tag-output, ``0:`` from srun --label,
  ISO timestamps from container logs) and indentation (blocks pasted from docs);
- interleaved NCCL INFO/WARN lines and other chatter; several tables in one log (one per binary run).

A row that starts like a result but cannot be read, or a table that never reaches its ``# Avg bus bandwidth``
line (a truncated log), is a :class:`SpecError` naming the line. Each log line with two groups becomes two
rows (``in_place`` False/True), see :mod:`fabricsim.nccltests.rows`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricsim.collectives import OPS, busbw_factor, check_op
from fabricsim.errors import SpecError
from fabricsim.inputs import read_text
from fabricsim.nccltests.columns import _Columns, _columns, _float, _is_header, _labels, _Line, _normalize, _row
from fabricsim.nccltests.rows import BenchResult, BenchRow, DeviceInfo

# nccl-tests binary (without _perf) -> our op name
BINARY_OPS: dict[str, str] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "all_to_all",
    "sendrecv": "send_recv",
}
OP_BINARIES: dict[str, str] = {op: f"{binary}_perf" for binary, op in BINARY_OPS.items()}

_DEVICE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>-?\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)$"
)
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(?P<name>\S+)")
_SETTINGS = re.compile(r"^#\s*nThread\s+\d+")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<value>\S+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<value>\d+)")
_FABRICSIM = re.compile(r"^#\s*fabricsim bench collective\b.*?\bbackend (?P<backend>\w+)")
_NCCL_VERSION = re.compile(r"NCCL version (?P<version>\S+)")
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version (?P<version>\S+)(?:.*nccl-library=(?P<lib>\d+))?")


@dataclass
class _Table:
    start: int
    meta: _Meta
    columns: _Columns
    rows: list[dict[str, Any]] = field(default_factory=list)
    avg: float | None = None
    oob: int | None = None
    closed: bool = False


@dataclass
class _Meta:
    """What the lines before a table say about it."""

    op_hint: str | None = None
    op_hint_line: int | None = None
    devices: list[DeviceInfo] = field(default_factory=list)
    warmup: int | None = None
    iters: int | None = None
    check: bool | None = None
    labels: list[bool] | None = None
    backend: str | None = None
    notes: list[str] = field(default_factory=list)


def _op_from_name(name: str) -> str | None:
    """``/opt/nccl-tests/build/all_reduce_perf_mpi`` -> all_reduce; None when the name says nothing."""
    base = re.sub(r"(_perf)?(_mpi)?$", "", Path(name).name)
    if base in BINARY_OPS:
        return BINARY_OPS[base]
    if base in OPS:
        return base
    return None


_NAME_HINTS = (
    ("all_reduce", "all_reduce"), ("allreduce", "all_reduce"),
    ("reduce_scatter", "reduce_scatter"), ("reducescatter", "reduce_scatter"),
    ("all_gather", "all_gather"), ("allgather", "all_gather"),
    ("alltoall", "all_to_all"), ("all_to_all", "all_to_all"),
    ("sendrecv", "send_recv"), ("send_recv", "send_recv"),
    ("broadcast", "broadcast"), ("bcast", "broadcast"),
    ("reduce", "reduce"),
)


def _op_from_source(source: str | None) -> str | None:
    if not source:
        return None
    name = Path(source).name.lower()
    for hint, op in _NAME_HINTS:
        if hint in name:
            return op
    return None


def _op_from_columns(rows: list[dict[str, Any]], nranks: int | None) -> list[str]:
    """Ops consistent with the redop/root columns and the busbw/algbw ratio."""
    candidates = list(OPS)
    redops: set[str] = {r["redop"] for r in rows if r.get("redop") is not None}
    roots: set[int] = {r["root"] for r in rows if r.get("root") is not None}
    if redops == {"none"}:
        candidates = [op for op in candidates if op in ("all_gather", "broadcast", "all_to_all")]
    elif redops:
        candidates = [op for op in candidates if op in ("all_reduce", "reduce_scatter", "reduce", "send_recv")]
    if roots and all(root >= 0 for root in roots):
        candidates = [op for op in candidates if op in ("broadcast", "reduce")]
    elif roots:
        candidates = [op for op in candidates if op not in ("broadcast", "reduce")]
    groups = [g for r in rows for g in r["groups"] if g[2] >= 0.1]
    if not groups:
        return candidates
    _, _, algbw, busbw, _ = max(groups, key=lambda g: g[2])
    ratio = busbw / algbw
    tolerance = 0.011 / algbw + 0.005
    kept = []
    for op in candidates:
        if nranks is not None:
            ok = abs(busbw_factor(op, nranks) - ratio) <= tolerance
        elif op == "all_reduce":
            ok = 1 - tolerance <= ratio < 2
        elif op in ("all_gather", "reduce_scatter", "all_to_all"):
            ok = 0.5 - tolerance <= ratio < 1
        else:
            ok = abs(ratio - 1) <= tolerance
        if ok:
            kept.append(op)
    return kept


def _decide_op(table: _Table, op: str | None, source: str | None, nranks: int | None) -> str:
    if op is not None:
        return check_op(op)
    if table.meta.op_hint is not None:
        hinted = _op_from_name(table.meta.op_hint)
        if hinted is None:
            raise SpecError(
                f"line {table.meta.op_hint_line}: {table.meta.op_hint} is not a collective fabricsim models; "
                f"allowed: {', '.join(OP_BINARIES.values())}"
            )
        return hinted
    named = _op_from_source(source)
    if named is not None:
        return named
    candidates = _op_from_columns(table.rows, nranks)
    if len(candidates) == 1:
        return candidates[0]
    raise SpecError(
        f"line {table.start}: cannot tell which collective this table measured "
        f"(could be {', '.join(candidates) or 'none of ' + ', '.join(OPS)}); pass op= / --op"
    )


def _result(table: _Table, op: str | None, source: str | None) -> BenchResult:
    meta = table.meta
    nranks = len(meta.devices) or None
    chosen = _decide_op(table, op, source, nranks)
    rows: list[BenchRow] = []
    for raw in table.rows:
        size = raw["size"]
        for in_place, time_us, algbw, busbw, wrong in raw["groups"]:
            rows.append(BenchRow(
                op=chosen,
                size_bytes=size,
                count=raw["count"],
                dtype=raw.get("type", "float32"),
                redop=raw.get("redop"),
                root=raw.get("root"),
                in_place=in_place,
                time_s=time_us / 1e6,
                algbw_GBps=algbw,
                busbw_GBps=busbw,
                wrong=wrong,
            ))
    dtypes = {row.dtype for row in rows}
    hosts = list(dict.fromkeys(d.host for d in meta.devices))
    tool = "fabricsim" if meta.backend else "nccl-tests"
    check = meta.check if meta.check is not None else (any(r.wrong is not None for r in rows) if rows else None)
    return BenchResult(
        tool=tool,
        op=chosen,
        backend=meta.backend or "nccl",
        world_size=nranks,
        hosts=hosts,
        devices=meta.devices,
        dtype=dtypes.pop() if len(dtypes) == 1 else None,
        warmup_iters=meta.warmup,
        iters=meta.iters,
        check=check,
        rows=rows,
        avg_busbw_GBps=table.avg,
        out_of_bounds=table.oob,
        source=source,
        notes=list(dict.fromkeys(meta.notes)),
    )


def _settings(text: str, meta: _Meta) -> None:
    for key, pattern in (("warmup", r"warmup iters:\s*(\d+)"), ("iters", r"(?<!warmup )(?<!agg )iters:\s*(\d+)"),
                         ("check", r"validation:\s*(\d+)")):
        m = re.search(pattern, text)
        if m:
            value = int(m.group(1))
            setattr(meta, key, bool(value) if key == "check" else value)


def parse_nccl_tests(text: str, *, source: str | None = None, op: str | None = None) -> list[BenchResult]:
    """Every results table in an nccl-tests log, in order.

    ``op`` names the collective when the log does not (older nccl-tests print no binary name) and then applies to
    every table; otherwise each table's op is taken from ``# Collective test starting:``, the ``source`` file
    name, or the redop/root columns and the busbw/algbw ratio (a SpecError asks for ``op`` when still ambiguous).
    """
    if op is not None:
        op = check_op(op)
    tables: list[_Table] = []
    meta = _Meta()
    current: _Table | None = None
    lines = _normalize(text)
    for line in lines:
        t = line.text
        if not t:
            continue
        if t.startswith("#"):
            if _is_header(t):
                if current is not None and not current.closed:
                    raise SpecError(
                        f"line {line.number}: a new results table starts, but the one at line {current.start} "
                        "never reached its '# Avg bus bandwidth' line (truncated log?)"
                    )
                current = _Table(start=line.number, meta=meta, columns=_columns(line, meta.labels))
                tables.append(current)
                meta = _Meta()
                continue
            if current is not None and not current.closed:
                m = _AVG.match(t)
                if m:
                    current.avg = _float(m["value"], "Avg bus bandwidth", line.number)
                    current.closed = True
                    continue
                m = _OOB.match(t)
                if m:
                    current.oob = int(m["value"])
                continue
            _meta_line(line, meta)
            continue
        m = _NCCL_VERSION.search(t)
        if m and not t.split()[0].isdigit():
            open_table = current is not None and not current.closed
            (current.meta if open_table and current is not None else meta).notes.append(f"NCCL {m['version']}")
            continue
        if current is not None and not current.closed and t.split()[0].isdigit():
            current.rows.append(_row(line, current.columns))
    if current is not None and not current.closed:
        last = lines[-1].number if lines else 0
        raise SpecError(
            f"line {last}: the log ends inside the results table that starts at line {current.start} "
            "(no '# Avg bus bandwidth' line): truncated?"
        )
    if not tables:
        raise SpecError(
            "no nccl-tests results table found (expected a '#  size  count  type ...' column header line)",
            source=source,
        )
    return [_result(table, op, source) for table in tables]


def _meta_line(line: _Line, meta: _Meta) -> None:
    t = line.text
    m = _DEVICE.match(t)
    if m:
        meta.devices.append(DeviceInfo(
            rank=int(m["rank"]),
            group=int(m["group"]) if m["group"] is not None else None,
            pid=int(m["pid"]),
            host=m["host"],
            device=int(m["device"]),
            bus_id=m["bus"],
            name=m["name"].strip(),
        ))
        return
    m = _STARTING.match(t)
    if m:
        meta.op_hint, meta.op_hint_line = m["name"], line.number
        return
    if _SETTINGS.match(t):
        _settings(t, meta)
        return
    m = _TESTS_VERSION.match(t)
    if m:
        note = f"nccl-tests {m['version']}"
        if m["lib"]:
            code = int(m["lib"])
            note += f", NCCL {code // 10000}.{code // 100 % 100}.{code % 100}"
        meta.notes.append(note)
        return
    m = _FABRICSIM.match(t)
    if m:
        meta.backend = m["backend"]
        return
    if "out-of-place" in t or "in-place" in t:
        meta.labels = _labels(t)


def parse_nccl_tests_file(path: str | Path, *, op: str | None = None) -> list[BenchResult]:
    """:func:`parse_nccl_tests` on a file; errors name the file."""
    p = Path(path)
    text = read_text(p)
    try:
        return parse_nccl_tests(text, source=str(path), op=op)
    except SpecError as exc:
        if exc.source:
            raise
        raise SpecError(str(exc), source=str(path)) from None


def parse_nccl_tests_log(text: str, *, source: str | None = None, op: str | None = None) -> BenchResult:
    """The one results table of a log (a SpecError if it holds several: use :func:`parse_nccl_tests`)."""
    results = parse_nccl_tests(text, source=source, op=op)
    if len(results) != 1:
        ops = ", ".join(r.op for r in results)
        raise SpecError(f"the log holds {len(results)} results tables ({ops}); read them with parse_nccl_tests")
    return results[0]
