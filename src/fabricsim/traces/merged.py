"""What merging one file per rank reports: per step, the slowest rank and the spread; per rank, its median step
time, compute and exposed communication; the stragglers, by how much and in which phase; the steps some ranks
lack. Everything here works on the ranks' per-step figures (``RankSteps``), as one ranks x steps matrix."""

from __future__ import annotations

import warnings as _warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabricsim.errors import SpecError

PHASES = ("compute", "exposed communication")
PICOSECONDS = 12
"""the excess times are rounded to 1 ps: differences of microsecond timestamps leave ~1e-18 s of float noise"""


@dataclass(frozen=True)
class RankSteps:
    """One rank's file reduced to its steps: step numbers (sorted, unique) and per step its time, compute (union of
    compute kernels) and exposed communication (communication no compute covers), seconds."""

    rank: int
    rank_rule: str
    """how the rank was found: distributedInfo.rank, file name or file order"""
    source: str
    device: int | None
    step: np.ndarray
    step_s: np.ndarray
    compute_s: np.ndarray
    exposed_comm_s: np.ndarray
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class StepSpread:
    """One step over the ranks that profiled it: the slowest rank, the slowest and median step time, their ratio,
    and the ranks without this step."""

    step: int
    ranks: int
    slowest_rank: int
    max_s: float
    median_s: float
    spread: float | None
    """max / median step time (None: a median of 0)"""
    missing_ranks: tuple[int, ...]


@dataclass(frozen=True)
class RankStat:
    """One rank's medians over its steps."""

    rank: int
    source: str
    rank_rule: str
    device: int | None
    steps: int
    median_step_s: float | None
    median_compute_s: float | None
    median_exposed_comm_s: float | None


@dataclass(frozen=True)
class Straggler:
    """A rank whose median step time exceeds the median over ranks by more than the threshold: by how much, and
    the phase whose excess over the ranks' median is the larger (compute, or exposed communication)."""

    rank: int
    median_step_s: float
    slower_by: float
    """median step time / median over ranks - 1"""
    phase: str
    extra_compute_s: float
    extra_exposed_comm_s: float


@dataclass(frozen=True)
class MergedTrace:
    """One job's ranks aligned by step."""

    files: int
    straggler_threshold: float
    median_step_s: float | None
    """the median over ranks of each rank's median step time"""
    steps: tuple[StepSpread, ...]
    ranks: tuple[RankStat, ...]
    stragglers: tuple[Straggler, ...]
    missing_steps: int
    """steps that some ranks lack (listed with those ranks in ``steps``)"""
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "straggler_threshold": self.straggler_threshold,
                "median_step_s": self.median_step_s, "missing_steps": self.missing_steps,
                "stragglers": [vars(s) for s in self.stragglers],
                "steps": [{**vars(s), "missing_ranks": list(s.missing_ranks)} for s in self.steps],
                "ranks": [vars(r) for r in self.ranks], "warnings": list(self.warnings)}


def _median(rows: np.ndarray) -> np.ndarray:
    """Median of each row over its present (not NaN) values; NaN for a row with none."""
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN row: a rank without steps
        out: np.ndarray = np.nanmedian(rows, axis=1) if rows.shape[1] else np.full(len(rows), np.nan)
    return out


def _opt(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def merge_ranks(ranks: list[RankSteps], threshold: float) -> MergedTrace:
    """Align the ranks by step number, find each step's slowest rank and spread, each rank's medians and the
    stragglers (``threshold``: the fraction above the median over ranks)."""
    by_rank: dict[int, RankSteps] = {}
    for r in ranks:
        if r.rank in by_rank:
            raise SpecError(f"two files are rank {r.rank}: {by_rank[r.rank].source} ({by_rank[r.rank].rank_rule}) and "
                            f"{r.source} ({r.rank_rule}); give one file per rank", field="files")
        by_rank[r.rank] = r
    order = sorted(by_rank)
    rows = [by_rank[k] for k in order]
    steps = np.unique(np.concatenate([r.step for r in rows] or [np.empty(0, dtype=np.int64)])).astype(np.int64)
    shape = (len(rows), len(steps))
    step_s, compute, exposed = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    for i, r in enumerate(rows):
        at = np.searchsorted(steps, r.step)
        step_s[i, at], compute[i, at], exposed[i, at] = r.step_s, r.compute_s, r.exposed_comm_s
    rank_ids = np.array(order, dtype=np.int64)
    present = ~np.isnan(step_s)
    spreads = []
    column_median = _median(step_s.T)
    for j, number in enumerate(steps.tolist()):
        have = present[:, j]
        slowest = int(np.argmax(np.where(have, step_s[:, j], -np.inf)))
        top, mid = float(step_s[slowest, j]), float(column_median[j])
        spreads.append(StepSpread(number, int(have.sum()), int(rank_ids[slowest]), top, mid,
                                  top / mid if mid > 0 else None, tuple(rank_ids[~have].tolist())))
    med_step, med_compute, med_exposed = _median(step_s), _median(compute), _median(exposed)
    stats = tuple(RankStat(r.rank, r.source, r.rank_rule, r.device, len(r.step), _opt(a), _opt(b), _opt(c))
                  for r, a, b, c in zip(rows, med_step.tolist(), med_compute.tolist(), med_exposed.tolist(),
                                        strict=True))
    stragglers: list[Straggler] = []
    overall = float(np.nanmedian(med_step)) if (~np.isnan(med_step)).any() else float("nan")
    if not np.isnan(overall) and overall > 0:
        base_compute, base_exposed = float(np.nanmedian(med_compute)), float(np.nanmedian(med_exposed))
        slow = np.flatnonzero(med_step > overall * (1 + threshold))
        for i in slow.tolist():
            extra_c, extra_e = (round(float(med_compute[i] - base_compute), PICOSECONDS) + 0.0,
                                round(float(med_exposed[i] - base_exposed), PICOSECONDS) + 0.0)
            stragglers.append(Straggler(int(rank_ids[i]), float(med_step[i]), float(med_step[i] / overall - 1),
                                        PHASES[0] if extra_c >= extra_e else PHASES[1], extra_c, extra_e))
    stragglers.sort(key=lambda s: -s.slower_by)
    notes = [w for r in rows for w in r.warnings]
    missing = int((~present.all(axis=0)).sum()) if len(rows) else 0
    if missing:
        notes.append(f"{missing} step(s) are missing from some ranks (listed per step): the rank's file holds no "
                     "ProfilerStep mark of that number; the step's figures are over the ranks that have it")
    return MergedTrace(files=len(ranks), straggler_threshold=threshold, median_step_s=_opt(overall),
                       steps=tuple(spreads), ranks=stats, stragglers=tuple(stragglers), missing_steps=missing,
                       warnings=notes)
