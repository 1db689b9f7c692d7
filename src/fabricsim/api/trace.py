"""`fabricsim.api.trace_merge`: one job's profiles, one file per rank, aligned by step (`fabricsim trace import`
given several files, a directory or a glob): per step the slowest rank and the spread, per rank its medians, the
stragglers named with the phase that makes them slow."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from fabricsim.api.result import Result


@dataclass(frozen=True, repr=False)
class TraceMergeResult(Result):
    """The merged ranks: ``merged`` (``fabricsim.traces.MergedTrace``); ``to_dict()`` is `trace import --json`'s
    document for the same files; ``to_frame()`` one row per rank."""

    command: ClassVar[str] = "trace import"
    headline_keys: ClassVar[tuple[str, ...]] = ("files", "median_step_s", "missing_steps", "stragglers")

    merged: Any = None


def trace_merge(paths: str | Path | Sequence[str | Path], *, straggler_threshold: float | None = None,
                workers: int | None = None, max_events: int | None = None,
                progress: Callable[[int, int], None] | None = None) -> TraceMergeResult:
    """Merge one job's profiles, one file per rank (files, directories or globs). ``straggler_threshold`` and
    ``workers`` are `TraceMergeOptions` (defaults there); ``max_events`` bounds each file as `trace import`'s
    ``--max-events``; ``progress(files read, files)``."""
    from fabricsim.api.specs.trace import TraceMergeOptions
    from fabricsim.errors import SpecError
    from fabricsim.traces import MAX_EVENTS, merge_traces

    given = [paths] if isinstance(paths, str | Path) else list(paths)
    if not given:
        raise SpecError("give the rank files (files, a directory or a glob)", field="paths")
    options = TraceMergeOptions.model_validate(
        {k: v for k, v in (("straggler_threshold", straggler_threshold), ("workers", workers)) if v is not None})
    if max_events is not None and max_events < 1:
        raise SpecError(f"must be at least 1, got {max_events}", field="max_events")
    merged = merge_traces(given, straggler_threshold=options.straggler_threshold, workers=options.workers,
                          max_events=max_events or MAX_EVENTS, progress=progress)
    inputs = {"files": [str(p) for p in given], **options.model_dump(), "max_events": max_events}
    data = merged.to_json()
    return TraceMergeResult(inputs, data, rows=data["ranks"], merged=merged)
