"""One job's profiles, one file per rank, merged: each file is read and reduced to its rank's per-step figures (step
time, compute, exposed communication) before the next is read, in worker processes when there are many, so memory
grows with ranks x steps, never with events; the ranks are then aligned by step number (``ProfilerStep#N``), the
slowest rank of each step and the spread found, and the stragglers named with the phase that makes them slow.

A file's rank is its ``distributedInfo.rank`` where it has one, else the last number in its file name
(``rank12.json``, ``trace_3.pt.trace.json.gz``), else its place in the sorted list of files; two files of one rank
are refused."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.traces.classify import CLASSES, COMPUTE_CLASSES
from fabricsim.traces.events import MAX_EVENTS, TraceEvents
from fabricsim.traces.intervals import clip, union
from fabricsim.traces.merged import MergedTrace, RankSteps, merge_ranks
from fabricsim.traces.read import read_trace

TRACE_SUFFIXES = (".json", ".gz", ".sqlite")
"""the files of a directory that are read as traces"""
GLOB = re.compile(r"[*?\[]")
NUMBER = re.compile(r"\d+")
POOL_FILES = 4
"""fewer files than this are read in this process (a pool's start costs more than it saves)"""

FileProgress = Callable[[int, int], None]
"""called with (files read, files) as the rank files are reduced"""


def trace_files(paths: Sequence[str | Path]) -> list[Path]:
    """The trace files ``paths`` name: files as given, a directory's ``.json``/``.json.gz``/``.sqlite`` files, a
    glob's matches; in natural order of their names (rank2 before rank10), each once."""
    found: list[Path] = []
    for given in paths:
        p = Path(given)
        if p.is_dir():
            inside = [f for f in p.iterdir() if f.is_file() and f.name.lower().endswith(TRACE_SUFFIXES)]
            if not inside:
                raise SpecError("no trace files (.json, .json.gz, .sqlite) in this directory", source=str(p))
            found += inside
        elif not p.exists() and GLOB.search(str(given)):
            matches = [Path(m) for m in glob.glob(str(given)) if Path(m).is_file()]
            if not matches:
                raise SpecError("no trace file matches this pattern", source=str(given))
            found += matches
        else:
            found.append(p)  # read_trace says what is wrong with it
    unique = list(dict.fromkeys(found))
    return sorted(unique, key=_natural)


def _natural(path: Path) -> tuple[object, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path)))


def name_rank(path: Path) -> int | None:
    """The last number in a file's name (suffixes dropped): rank12.json -> 12."""
    name = path.name
    for suffix in (".gz", ".json", ".sqlite"):
        if name.lower().endswith(suffix):
            name = name[:-len(suffix)]
    numbers = NUMBER.findall(name)
    return int(numbers[-1]) if numbers else None


def rank_steps(path: Path, order: int, max_events: int = MAX_EVENTS) -> RankSteps:
    """Read one rank's file and reduce it to its per-step figures (the events are freed on return)."""
    events = read_trace(path, max_events=max_events)
    return reduce_events(events, path, order)


def _rank_of(events: TraceEvents, path: Path, order: int) -> tuple[int, str]:
    if events.rank is not None:
        return events.rank, "distributedInfo.rank"
    named = name_rank(path)
    if named is not None:
        return named, "file name"
    return order, "file order"


def reduce_events(events: TraceEvents, path: Path, order: int) -> RankSteps:
    """A rank's steps: for each ProfilerStep number on its device (the GPU's marks, else the CPU's), the step's time
    (first mark's start to last mark's end), its compute (union of GEMM, attention and element-wise kernels) and its
    exposed communication (communication that no compute covers), as ``summarise`` counts them."""
    rank, rule = _rank_of(events, path, order)
    warnings: list[str] = []
    gpu = len(events.kernels) > 0
    spans = events.kernels if gpu else events.cpu
    code_of = {c: i for i, c in enumerate(CLASSES)}
    name_codes = np.array([code_of.get(c, -1) for c in events.classes] or [-1], dtype=np.int64)
    codes = name_codes[spans.name] if len(spans) else np.empty(0, dtype=np.int64)
    busy = codes >= 0
    found = sorted(int(d) for d in np.unique(spans.device[busy]))
    device: int | None = None
    if found:
        device = rank if len(found) > 1 and rank in found else found[0]
        if len(found) > 1:
            warnings.append(f"{path}: holds {len(found)} devices ({', '.join(map(str, found))}); device {device} is "
                            f"rank {rank}'s")
    marks = events.steps
    chosen = marks.on_gpu & (marks.device == device) if gpu else np.zeros(len(marks), dtype=bool)
    if not chosen.any():
        chosen = ~marks.on_gpu
    empty = np.empty(0)
    if not chosen.any() or device is None:
        warnings.append(f"{path}: no ProfilerStep marks{'' if device is not None else ' and no kernels'}: rank "
                        f"{rank} has no steps to align")
        return RankSteps(rank, rule, str(path), device, np.empty(0, dtype=np.int64), empty, empty, empty,
                         tuple(warnings))
    try:
        numbers, inverse = np.unique(np.asarray(marks.number[chosen], dtype=np.int64), return_inverse=True)
    except OverflowError:
        raise SpecError("a ProfilerStep number past 64 bits: steps cannot be aligned", source=str(path)) from None
    starts = np.full(len(numbers), np.inf)
    ends = np.full(len(numbers), -np.inf)
    np.minimum.at(starts, inverse, marks.start_s[chosen])
    np.maximum.at(ends, inverse, marks.end_s[chosen])
    mine = busy & (spans.device == device)
    compute_rows = mine & np.isin(codes, [CLASSES.index(c) for c in COMPUTE_CLASSES])
    work_rows = compute_rows | (mine & (codes == CLASSES.index("communication")))
    compute = clip(starts, ends, union(spans.start_s[compute_rows], spans.end_s[compute_rows]))
    either = clip(starts, ends, union(spans.start_s[work_rows], spans.end_s[work_rows]))
    return RankSteps(rank, rule, str(path), device, numbers, ends - starts, compute, either - compute,
                     tuple(warnings))


def _reduce(task: tuple[Path, int, int]) -> RankSteps:
    path, order, max_events = task
    return rank_steps(path, order, max_events)


def merge_traces(paths: Sequence[str | Path], *, straggler_threshold: float, workers: int | None = None,
                 max_events: int = MAX_EVENTS, progress: FileProgress | None = None) -> MergedTrace:
    """Merge one job's profiles, one file per rank (files, directories or globs): see the module's docstring."""
    if not straggler_threshold >= 0:
        raise SpecError(f"must be 0 or more, got {straggler_threshold}", field="--straggler-threshold")
    if workers is not None and workers < 1:
        raise SpecError(f"must be at least 1, got {workers}", field="--workers")
    files = trace_files(paths)
    tasks = [(f, i, max_events) for i, f in enumerate(files)]
    ranks: list[RankSteps] = []
    count = min(workers or os.cpu_count() or 1, len(files))
    if count <= 1 or len(files) < POOL_FILES:
        for task in tasks:
            ranks.append(_reduce(task))
            if progress is not None:
                progress(len(ranks), len(files))
    else:
        from concurrent.futures import ProcessPoolExecutor

        # each worker holds one file's events at a time; the parent only the per-step figures
        with ProcessPoolExecutor(max_workers=count) as pool:
            for found in pool.map(_reduce, tasks, chunksize=max(1, len(tasks) // (count * 16))):
                ranks.append(found)
                if progress is not None:
                    progress(len(ranks), len(files))
    return merge_ranks(ranks, straggler_threshold)
