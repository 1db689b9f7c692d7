"""`size` end to end: enumerate candidate clusters, evaluate their plans on an executor (streaming to Parquet,
resumable), then rank under the constraints, find the Pareto frontier and the best plan per system x fabric."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricsim.sizing.bound import Bound, tie_spread_bound
from fabricsim.sizing.evaluate import ChunkResult, spec_model
from fabricsim.sizing.executor import Executor, Task, run_tasks
from fabricsim.sizing.explain import candidates, no_plan_note
from fabricsim.sizing.rank import best_by_system_fabric, binding_note, pareto, rank, tie_mask, tie_winner
from fabricsim.sizing.reliability import goodput_options
from fabricsim.sizing.result import SizingResult, Ties
from fabricsim.sizing.space import ClusterChoice, clusters
from fabricsim.sizing.spec import SizingSpec
from fabricsim.sizing.store import ResultStore

if TYPE_CHECKING:
    import pandas as pd

Progress = Callable[[int, int, int], None]  # (chunks done, chunks in all, plans so far)


def tasks_of(choices: list[ClusterChoice]) -> list[Task]:
    """Clusters grouped by system and size (they share memory and compute caches), in first-seen order."""
    groups: dict[tuple[str, int], Task] = {}
    for c in choices:
        groups.setdefault((c.system, c.nodes), []).append(c)
    return list(groups.values())


def size(spec: SizingSpec, *, executor: Executor = "local", workers: int | None = None, ray_address: str | None = None,
         out: Path | None = None, resume: bool = False, progress: Progress | None = None,
         stop_after: int | None = None, exhaustive: bool = False) -> SizingResult:
    """Search every candidate cluster and plan; ``stop_after`` chunks ends the run early (tests of --resume).

    By default each cluster times only the plans that can change the answer (`fabricsim.sizing.bound`: the same
    best, Pareto front, top rows and ties); ``exhaustive`` times every plan that fits (the whole frame, e.g. for
    an --out file of every plan)."""
    import pandas as pd

    start = time.perf_counter()
    moe = spec_model(spec).moe is not None
    catalog = spec.catalog()
    choices = checked_clusters(spec)
    bound = None if exhaustive else Bound(tie_spread_bound(moe, choices, catalog), spec.top, uuid.uuid4().hex)
    order = [c.chunk_id for c in choices]
    store = ResultStore(out, spec.digest(), resume) if out is not None else None
    counts: dict[str, dict[str, Any]] = {}  # chunk -> its counts and reasons (ChunkResult.meta)
    frames: dict[str, pd.DataFrame] = {}
    if store is not None:
        counts.update(store.done())
    plans = sum(c["candidates"] for c in counts.values())

    def on_result(result: ChunkResult) -> None:
        nonlocal plans
        if stop_after is not None and len(counts) >= stop_after:
            raise _Stopped
        counts[result.chunk] = result.meta()
        if store is not None:
            store.write(result)
        if result.rows:
            frames[result.chunk] = pd.DataFrame(result.columns)
        plans += result.candidates
        if progress is not None:
            progress(len(counts), len(order), plans)

    if progress is not None:
        progress(len(counts), len(order), plans)
    try:
        run_tasks(spec, tasks_of(choices), frozenset(counts), on_result, executor=executor, workers=workers,
                  ray_address=ray_address, bound=bound)
    except _Stopped:
        return SizingResult.interrupted(spec)
    if store is not None:
        frame = store.load(order)
        store.finish(frame)
    else:
        present = [frames[c] for c in order if c in frames]
        frame = pd.concat(present, ignore_index=True) if present else pd.DataFrame()
    return _result(spec, choices, frame, counts, time.perf_counter() - start)


def checked_clusters(spec: SizingSpec) -> list[ClusterChoice]:
    """The candidate clusters of a search (`size`, `sweep`), once the spec's model and every storage tier and server
    it names are known to exist: a bad name fails here, before any work."""
    spec_model(spec)
    catalog = spec.catalog()
    for option in goodput_options(spec):
        catalog.storage_tier(option.storage)
        catalog.storage_server(option.storage_server)
    return clusters(spec, catalog)


class _Stopped(Exception):
    """Raised inside a search to stop it early (as an interrupt would)."""


def _result(spec: SizingSpec, choices: list[ClusterChoice], frame: pd.DataFrame, counts: dict[str, dict[str, Any]],
            wall_s: float) -> SizingResult:
    evaluated = sum(c["candidates"] - c["pruned"] for c in counts.values())
    pruned = sum(c["pruned"] for c in counts.values())
    errors = {chunk: c["error"] for chunk, c in counts.items() if c["error"]}
    missing = {chunk: list(c.get("missing") or ()) for chunk, c in counts.items() if c.get("missing")}
    ranked = rank(frame, spec) if len(frame) else frame
    found = candidates(spec, spec.catalog(), choices, counts, frame, ranked)
    if frame.empty:
        return SizingResult(spec, frame, frame, frame, frame, evaluated, pruned, wall_s, errors, no_plan_note(found),
                            candidates=found, missing=missing)
    note = None if len(ranked) else binding_note(frame, spec)
    ties = ranking_ties(spec, ranked)
    return SizingResult(spec, frame, ranked, pareto(ranked), best_by_system_fabric(ranked), evaluated, pruned,
                        wall_s, errors, note, candidates=found, missing=missing, ties=ties)


def ranking_ties(spec: SizingSpec, ranked: pd.DataFrame) -> Ties | None:
    """The plans the model cannot tell from the best (its error on comparing two training plans like the best,
    from paired published residuals) and the one the secondary objective picks among them."""
    if ranked.empty:
        return None
    from fabricsim.validation import ComparisonBand, comparison_band, published_residuals, training_regime

    catalog = spec.catalog()
    best = ranked.iloc[0]
    gpu = catalog.gpu(catalog.system(str(best["system"])).gpu)
    regime = training_regime(spec_model(spec).moe is not None, gpu, str(best["precision"]), int(best["gpus"]),
                             int(best["zero"]) >= 3)
    band = comparison_band(regime, published_residuals())
    spread = band.high if isinstance(band, ComparisonBand) else None
    mask = tie_mask(ranked, spec.objective, spread)
    nvlink = {s: catalog.system(s).nvlink_domain_gpus for s in set(ranked["system"])}
    return Ties(mask=mask, pick=tie_winner(ranked, mask, nvlink, spec.objective), band=band.to_json(),
                objective=spec.objective)
