"""Read an Nsight Systems SQLite export (``nsys export --type sqlite``) with the standard library's sqlite3, in
chunks: kernels of CUPTI_ACTIVITY_KIND_KERNEL (start, end in ns, deviceId, streamId, names as ids into StringIds),
copies and fills of CUPTI_ACTIVITY_KIND_MEMCPY/MEMSET, ProfilerStep ranges of NVTX_EVENTS, GPU names of
TARGET_INFO_GPU. Collective sizes are not in the export (NCCL's NVTX payloads are binary): collectives are named
by their kernels, sizes unknown."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fabricsim.errors import SpecError
from fabricsim.traces.classify import step_number
from fabricsim.traces.events import (
    Dropped,
    Progress,
    SpanBuilder,
    StepMark,
    StepMarks,
    TraceEvents,
    as_int,
    check_count,
)

FETCH_ROWS = 65536


def _tables(con: sqlite3.Connection) -> set[str]:
    return {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def _rows(con: sqlite3.Connection, sql: str) -> Iterator[tuple[Any, ...]]:
    """Rows of a query FETCH_ROWS at a time (never the whole table in memory)."""
    cursor = con.execute(sql)
    while True:
        rows = cursor.fetchmany(FETCH_ROWS)
        if not rows:
            return
        yield from rows


def read_nsys(path: Path, *, max_events: int, progress: Progress | None = None) -> TraceEvents:
    """The kernels, copies, step ranges and GPU names of an Nsight Systems SQLite export."""
    source = str(path)
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise SpecError(f"cannot open the SQLite file: {exc}", source=source) from None
    try:
        return _read(con, source, max_events, progress)
    except sqlite3.Error as exc:
        raise SpecError(f"not an Nsight Systems export: {exc}", source=source) from None
    finally:
        con.close()


def _read(con: sqlite3.Connection, source: str, max_events: int, progress: Progress | None) -> TraceEvents:
    tables = _tables(con)
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables or "StringIds" not in tables:
        raise SpecError("not an Nsight Systems export with CUDA kernels (no CUPTI_ACTIVITY_KIND_KERNEL / StringIds "
                        "tables); profile with nsys --trace=cuda and export with nsys export --type sqlite",
                        source=source)
    names: list[str] = []
    classes: list[str] = []
    kernels = SpanBuilder(names, classes, {})
    cpu = SpanBuilder(names, classes, kernels.index)
    total = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    cols = _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    name_col = "demangledName" if "demangledName" in cols else "shortName"
    corr = "k.correlationId" if "correlationId" in cols else "-1"
    sql = (f"SELECT k.start, k.end, k.deviceId, k.streamId, COALESCE(s.value, k.{name_col}), {corr} "
           f"FROM CUPTI_ACTIVITY_KIND_KERNEL AS k LEFT JOIN StringIds AS s ON s.id = k.{name_col}")
    origin = con.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] or 0
    dropped = Dropped()
    for start, end, device, stream, name, correlation in _rows(con, sql):
        if not isinstance(start, int | float) or not isinstance(end, int | float) or end < start:
            dropped.add("no start, no end or an end before its start", str(name))
            continue
        kernels.add(kernels.name_id(str(name)), float(start), float(end), as_int(device, 0), as_int(stream, 0),
                    as_int(correlation))
        if len(kernels) % FETCH_ROWS == 0:
            check_count(len(kernels), max_events, source)
            if progress is not None:
                progress(len(kernels), total)
    for table, label in (("CUPTI_ACTIVITY_KIND_MEMCPY", "Memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "Memset")):
        if table in tables:
            label_id = kernels.name_id(label)
            for start, end, device, stream in _rows(con, f"SELECT start, end, deviceId, streamId FROM {table}"):
                kernels.add(label_id, float(start), float(end), as_int(device, 0), as_int(stream, 0), -1)
    check_count(len(kernels), max_events, source)
    steps = StepMarks.of(StepMark(n, (a - origin) * 1e-9, (b - origin) * 1e-9, None)
                         for n, a, b in _nvtx_steps(con, tables))
    return TraceEvents(source=source, format="nsys", names=names, classes=classes,
                       kernels=kernels.build(1e-9, float(origin)), cpu=cpu.build(1e-9, float(origin)), steps=steps,
                       kernel_args={}, cpu_args={}, device_names=_gpu_names(con, tables),
                       backend="nccl" if any(c == "communication" for c in classes) else None,
                       dropped=dropped)


def _nvtx_steps(con: sqlite3.Connection, tables: set[str]) -> list[tuple[int, int, int]]:
    """(N, start ns, end ns) of the NVTX ranges named ``ProfilerStep#N`` (text inline or as an id into StringIds)."""
    if "NVTX_EVENTS" not in tables:
        return []
    cols = _columns(con, "NVTX_EVENTS")
    label = "COALESCE(n.text, s.value)" if "textId" in cols else "n.text"
    join = "LEFT JOIN StringIds AS s ON s.id = n.textId" if "textId" in cols else ""
    out = []
    for start, end, text in _rows(con, f"SELECT n.start, n.end, {label} FROM NVTX_EVENTS AS n {join} "
                                       "WHERE n.end IS NOT NULL"):
        number = step_number(str(text or ""))
        if number is not None:
            out.append((number, int(start), int(end)))
    return out


def _gpu_names(con: sqlite3.Connection, tables: set[str]) -> dict[int, str]:
    """Device index -> name from TARGET_INFO_GPU (its ``id`` column, else ``cuDevice``)."""
    if "TARGET_INFO_GPU" not in tables:
        return {}
    cols = _columns(con, "TARGET_INFO_GPU")
    key = "cuDevice" if "cuDevice" in cols else "id" if "id" in cols else None
    if key is None or "name" not in cols:
        return {}
    return {as_int(i, 0): str(n) for i, n in con.execute(f"SELECT {key}, name FROM TARGET_INFO_GPU")}
