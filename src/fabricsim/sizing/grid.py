"""`sweep`: every plan of a space that fits, timed and priced, as one table. The same evaluation as `size`
(`evaluate_task`: step terms per plan shape, every batch assembled with numpy) with no bound, no ranking and no
constraints: a grid study's raw material, in cluster order whatever executor ran it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fabricsim.sizing.evaluate import ChunkResult
from fabricsim.sizing.executor import Executor, run_tasks
from fabricsim.sizing.search import Progress, checked_clusters, tasks_of
from fabricsim.sizing.spec import SizingSpec

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Sweep:
    """The table (a row per plan that fits), the clusters swept, the candidates enumerated and why clusters gave
    no row (chunk -> its counts and reasons, as `size` keeps them)."""

    frame: pd.DataFrame
    clusters: int
    candidates: int
    wall_s: float
    chunks: dict[str, dict[str, Any]]

    @property
    def errors(self) -> dict[str, str]:
        """Clusters that could not be priced or built, and why."""
        return {chunk: str(c["error"]) for chunk, c in self.chunks.items() if c["error"]}


def sweep(spec: SizingSpec, *, executor: Executor = "local", workers: int | None = None,
          ray_address: str | None = None, progress: Progress | None = None) -> Sweep:
    """Time and price every plan of ``spec``'s space that fits in memory, on ``executor``."""
    import pandas as pd

    start = time.perf_counter()
    choices = checked_clusters(spec)
    order = [c.chunk_id for c in choices]
    columns: dict[str, dict[str, np.ndarray]] = {}
    chunks: dict[str, dict[str, Any]] = {}
    plans = 0

    def on_result(result: ChunkResult) -> None:
        nonlocal plans
        chunks[result.chunk] = result.meta()
        if result.rows:
            columns[result.chunk] = result.columns
        plans += result.rows
        if progress is not None:
            progress(len(chunks), len(order), plans)

    if progress is not None:
        progress(0, len(order), 0)
    run_tasks(spec, tasks_of(choices), frozenset(), on_result, executor=executor, workers=workers,
              ray_address=ray_address, bound=None)
    present = [columns[c] for c in order if c in columns]
    if present:
        names = list(present[0])
        frame = pd.DataFrame({k: np.concatenate([p[k] for p in present]) for k in names})
    else:
        frame = pd.DataFrame()
    candidates = sum(int(c["candidates"]) for c in chunks.values())
    return Sweep(frame, len(order), candidates, time.perf_counter() - start, chunks)
