"""Summarise a trace per device and per step: busy time by kernel class, the unions of compute and communication
intervals, their overlap and the exposed communication (one sort-and-sweep over interval arrays per device),
collectives grouped by operation and size, and the FLOP rate of the GEMMs whose shapes were recorded."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from fabricsim.traces.classify import CLASSES, COMPUTE_CLASSES
from fabricsim.traces.events import MAX_EVENTS, Progress, Spans, TraceEvents
from fabricsim.traces.intervals import Intervals, clip, coverage, union
from fabricsim.traces.links import CollectiveCall, Linker
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


def summarise(events: TraceEvents, *, device: int | None = None) -> TraceSummary:
    """Per device (GPU kernels; a CPU profile: operators of each process), the step figures of ``DeviceSummary``."""
    gpu = len(events.kernels) > 0
    spans = events.kernels if gpu else events.cpu
    code_of = {c: i for i, c in enumerate(CLASSES)}
    name_codes = np.array([code_of.get(c, -1) for c in events.classes] or [-1], dtype=np.int64)
    codes = name_codes[spans.name] if len(spans) else np.empty(0, dtype=np.int64)
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
            linker: Linker, gemms: list[tuple[int, float, str | None]]) -> DeviceSummary:
    sub = spans if len(rows) == len(spans) else spans.take(rows)  # one device: no copy
    window, steps, step_source = _window(events, d, gpu, sub)
    inside = clip(sub.start_s, sub.end_s, window)
    sets = {"window": window}
    for i, cls in enumerate(CLASSES):
        mask = codes == i
        sets[cls] = (sub.start_s[mask], sub.end_s[mask])
    cov = coverage(sets)
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
    calls = [linker.kernel_call(int(r)) if gpu else linker.cpu_call(int(r))
             for r in rows[(codes == CLASSES.index("communication")) & (inside > 0)]]
    comm_time = inside[(codes == CLASSES.index("communication")) & (inside > 0)]
    name = events.device_names.get(d, "") if gpu else f"CPU process {d}"
    return DeviceSummary(
        device=d, kind="gpu" if gpu else "cpu", name=name, steps=steps, step_source=step_source,
        step_time_s=float(np.sum(window[1] - window[0])) / steps,
        compute_s=cov.length(win & compute) / steps, communication_s=cov.length(win & comm) / steps,
        overlap_s=cov.length(win & comm & compute) / steps, exposed_comm_s=cov.length(win & comm & ~compute) / steps,
        idle_s=cov.length(win & ~higher) / steps, classes=tuple(classes),
        collectives=_group(calls, comm_time, steps),
        gemm=_gemm(sub, codes, window, gemms, steps, events.cpu.ext_id) if gpu else None,
        gemm_note=None if gpu or not gemms else NO_KERNEL_GEMMS)


def _group(calls: list[CollectiveCall], times: np.ndarray, steps: int) -> tuple[CollectiveStat, ...]:
    """Calls grouped by (operation, size, group, type), largest total time first."""
    groups: dict[tuple[str, int, int, str | None], list[float]] = defaultdict(list)
    for call, t in zip(calls, times, strict=True):
        groups[(call.op, call.size_bytes, call.nranks, call.dtype)].append(float(t))
    out = [CollectiveStat(op, size, n, dtype, len(ts) / steps, sum(ts) / steps, sum(ts) / len(ts))
           for (op, size, n, dtype), ts in groups.items()]
    return tuple(sorted(out, key=lambda c: (-c.time_s, c.op, c.size_bytes)))


def _gemm(sub: Spans, codes: np.ndarray, window: Intervals, gemms: list[tuple[int, float, str | None]], steps: int,
          cpu_ext_id: np.ndarray) -> GemmStat | None:
    """FLOPs and time of the recorded GEMM operators inside the window, timed by the GEMM kernels each launched
    (linked by External id): never by the operators' own CPU time, which on a GPU run is the launch."""
    if not gemms:
        return None
    g = codes == CLASSES.index("gemm")
    ext, dur = sub.ext_id[g], clip(sub.start_s[g], sub.end_s[g], window)
    keys, inverse = np.unique(ext, return_inverse=True)
    per_ext = dict(zip(keys.tolist(), np.bincount(inverse, weights=dur, minlength=len(keys)).tolist(), strict=True))
    flops = time = 0.0
    count = 0
    by_dtype: dict[str | None, float] = defaultdict(float)
    exts = cpu_ext_id[np.array([row for row, _, _ in gemms], dtype=np.int64)].tolist()
    for (_, f, dtype), ext_id in zip(gemms, exts, strict=True):
        t = per_ext.get(ext_id, 0.0)
        if t <= 0:
            continue
        flops, time, count = flops + f, time + t, count + 1
        by_dtype[dtype] += f
    if count == 0:
        return None
    dominant = max(by_dtype.items(), key=lambda kv: kv[1])[0]
    return GemmStat(count / steps, flops / steps, time / steps, dominant)
