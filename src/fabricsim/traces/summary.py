"""Summarise a trace per device and per step: busy time by kernel class, the unions of compute and communication
intervals, their overlap and the exposed communication (one sort-and-sweep over interval arrays per device),
collectives grouped by operation and size, and the FLOP rate of the GEMMs whose shapes were recorded."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fabricsim.traces.classify import CLASSES, COMPUTE_CLASSES
from fabricsim.traces.events import MAX_EVENTS, Progress, Spans, TraceEvents
from fabricsim.traces.intervals import Intervals, clip, coverage, union
from fabricsim.traces.links import CollectiveCall, GemmOps, Linker
from fabricsim.traces.pages import small_pages
from fabricsim.traces.read import read_trace
from fabricsim.traces.results import (
    ClassTime,
    CollectiveStat,
    DeviceSummary,
    GemmStat,
    TraceSummary,
    pick_device,
)

NO_KERNEL_GEMMS = ("no GEMM rate: the trace has no GPU kernels, and a GEMM's rate is measured on its kernels (a CPU "
                   "operator's time is its launch on a GPU run); profile with ProfilerActivity.CUDA")
ORDER = ("attention", "gemm", "elementwise", "communication", "memory")
"""priority of classes where intervals of several overlap: busy time goes to the first, so compute classes keep
their time and communication's busy time is the exposed communication; the busy times add up to the step less
its idle time"""


def import_trace(path: str | Path, *, device: int | None = None, max_events: int = MAX_EVENTS,
                 progress: Progress | None = None) -> TraceSummary:
    """Read a trace (Kineto JSON, .json.gz or Nsight Systems SQLite) and summarise it."""
    return summarise(read_trace(path, max_events=max_events, progress=progress), device=device)


@small_pages()
def summarise(events: TraceEvents, *, device: int | None = None) -> TraceSummary:
    """Per device (GPU kernels; a CPU profile: operators of each process), the step figures of ``DeviceSummary``
    (numpy's huge pages off meanwhile: ``traces.pages``)."""
    gpu = len(events.kernels) > 0
    spans = events.kernels if gpu else events.cpu
    code_of = {c: i for i, c in enumerate(CLASSES)}
    name_codes = np.array([code_of.get(c, -1) for c in events.classes] or [-1], dtype=np.int8)
    codes = name_codes[spans.name] if len(spans) else np.empty(0, dtype=np.int8)
    busy_rows = codes >= 0  # launch-only operators are not work
    found = sorted(int(d) for d in np.unique(spans.device[busy_rows]))
    if device is not None:
        found = [pick_device(device, found, gpu=gpu, rank=events.rank, world_size=events.world_size)]
    linker = Linker(events)
    gemms = linker.gemm_ops()
    summaries = []
    warnings = list(events.warnings)
    note = events.dropped.note()
    if note is not None:
        warnings.append(note)
    for d in found:
        rows = np.flatnonzero((spans.device == d) & busy_rows)
        summaries.append(_device(events, spans, rows, codes[rows], d, gpu, linker, gemms))
    if not gpu and events.format == "kineto" and events.backend == "nccl":
        warnings.append("the trace has no GPU kernels (profile with ProfilerActivity.CUDA); CPU operators summarised")
    return TraceSummary(source=events.source, format=events.format, backend=events.backend, rank=events.rank,
                        world_size=events.world_size, host=events.host, device_names=dict(events.device_names),
                        devices=tuple(summaries), warnings=warnings, dropped=events.dropped)


def _window(events: TraceEvents, d: int, gpu: bool, sub: Spans) -> tuple[Intervals, int, str]:
    """The profiled steps on device ``d``: its ProfilerStep ranges on the GPU, else the CPU's, else the span of
    its events as one step."""
    marks = events.steps
    chosen = marks.on_gpu & (marks.device == d) if gpu else np.zeros(len(marks), dtype=bool)
    source = "ProfilerStep (GPU)"
    if not chosen.any():
        chosen, source = ~marks.on_gpu, "ProfilerStep (CPU)"
    if chosen.any():
        window = union(marks.start_s[chosen], marks.end_s[chosen])
        return window, len(np.unique(marks.number[chosen])), source
    return (np.array([sub.start_s.min()]), np.array([sub.end_s.max()])), 1, "span"


def _device(events: TraceEvents, spans: Spans, rows: np.ndarray, codes: np.ndarray, d: int, gpu: bool,
            linker: Linker, gemms: GemmOps) -> DeviceSummary:
    sub = spans if len(rows) == len(spans) else spans.take(rows)  # one device: no copy
    window, steps, step_source = _window(events, d, gpu, sub)
    inside = clip(sub.start_s, sub.end_s, window)
    sets = {"window": window}
    for i, cls in enumerate(CLASSES):
        mask = codes == i
        sets[cls] = union(sub.start_s[mask], sub.end_s[mask])  # each class's copy freed as soon as it is merged
    cov = coverage(sets, disjoint=True)
    win = cov.covered["window"]
    compute = cov.any(*COMPUTE_CLASSES)
    comm = cov.covered["communication"]
    classes = []
    higher = np.zeros(len(cov.lengths), dtype=bool)
    busy = {}
    for cls in ORDER:
        busy[cls] = cov.length(win & cov.covered[cls] & ~higher)
        higher |= cov.covered[cls]
    for i, cls in enumerate(CLASSES):
        mask = (codes == i) & (inside > 0)
        classes.append(ClassTime(cls, int(mask.sum()) / steps, float(inside[mask].sum()) / steps, busy[cls] / steps))
    comm_rows = rows[(codes == CLASSES.index("communication")) & (inside > 0)]
    comm_time = inside[(codes == CLASSES.index("communication")) & (inside > 0)]
    if gpu:
        inverse, calls = linker.kernel_calls(comm_rows)
    else:
        found = [linker.cpu_call(r) for r in comm_rows.tolist()]
        index: dict[CollectiveCall, int] = {}
        inverse = np.fromiter((index.setdefault(c, len(index)) for c in found), dtype=np.int64, count=len(found))
        calls = list(index)
    name = events.device_names.get(d, "") if gpu else f"CPU process {d}"
    return DeviceSummary(
        device=d, kind="gpu" if gpu else "cpu", name=name, steps=steps, step_source=step_source,
        step_time_s=float(np.sum(window[1] - window[0])) / steps,
        compute_s=cov.length(win & compute) / steps, communication_s=cov.length(win & comm) / steps,
        overlap_s=cov.length(win & comm & compute) / steps, exposed_comm_s=cov.length(win & comm & ~compute) / steps,
        idle_s=cov.length(win & ~higher) / steps, classes=tuple(classes),
        collectives=_group(inverse, calls, comm_time, steps),
        gemm=_gemm(sub, codes, window, gemms, steps, events.cpu.ext_id) if gpu else None,
        gemm_note=None if gpu or not len(gemms) else NO_KERNEL_GEMMS)


def _group(inverse: np.ndarray, calls: list[CollectiveCall], times: np.ndarray,
           steps: int) -> tuple[CollectiveStat, ...]:
    """Calls (``calls[inverse[i]]`` that of the i-th time) grouped by (operation, size, group, type) in the order
    each group first appears, largest total time first; a group's time summed in row order (``np.bincount``: the
    same sums as adding them one by one)."""
    if not len(inverse):
        return ()
    present, first = np.unique(inverse, return_index=True)
    group_of = np.full(len(calls), -1, dtype=np.int64)
    groups: dict[tuple[str, int, int, str | None], int] = {}
    for c in present[np.argsort(first, kind="stable")].tolist():
        call = calls[c]
        group_of[c] = groups.setdefault((call.op, call.size_bytes, call.nranks, call.dtype), len(groups))
    row_group = group_of[inverse]
    sums = np.bincount(row_group, weights=times, minlength=len(groups)).tolist()
    counts = np.bincount(row_group, minlength=len(groups)).tolist()
    out = [CollectiveStat(op, size, n, dtype, counts[g] / steps, sums[g] / steps, sums[g] / counts[g])
           for (op, size, n, dtype), g in groups.items()]
    return tuple(sorted(out, key=lambda c: (-c.time_s, c.op, c.size_bytes)))


def _gemm(sub: Spans, codes: np.ndarray, window: Intervals, gemms: GemmOps, steps: int,
          cpu_ext_id: np.ndarray) -> GemmStat | None:
    """FLOPs and time of the recorded GEMM operators inside the window, timed by the GEMM kernels each launched
    (linked by External id): never by the operators' own CPU time, which on a GPU run is the launch. Sums run in
    row order (``cumsum``, ``bincount``), as adding them one by one."""
    if not len(gemms):
        return None
    g = codes == CLASSES.index("gemm")
    ext, dur = sub.ext_id[g], clip(sub.start_s[g], sub.end_s[g], window)
    keys, inverse = np.unique(ext, return_inverse=True)
    per_ext = np.bincount(inverse.reshape(-1), weights=dur, minlength=len(keys))
    wanted = cpu_ext_id[gemms.rows]
    at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
    t = np.where(keys[at] == wanted, per_ext[at], 0.0) if len(keys) else np.zeros(len(wanted))
    ok = t > 0
    count = int(ok.sum())
    if count == 0:
        return None
    f, dtype = gemms.flops[ok], gemms.dtype[ok]
    flops, time = float(np.cumsum(f)[-1]), float(np.cumsum(t[ok])[-1])
    by_dtype = np.bincount(dtype, weights=f, minlength=len(gemms.dtypes)).tolist()
    present, first = np.unique(dtype, return_index=True)
    order = present[np.argsort(first, kind="stable")].tolist()  # as a dict filled in row order
    dominant = gemms.dtypes[max(order, key=lambda c: by_dtype[c])]
    return GemmStat(count / steps, flops / steps, time / steps, dominant)
