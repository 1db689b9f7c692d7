"""Evaluate every candidate plan of a cluster at once: prune by divisibility and memory, price each plan shape's
step terms once with the training model (``step_terms``, the function ``predict_training`` uses), and assemble
every (shape, batch) plan with numpy (``assemble_steps``): the same arithmetic, so the same numbers."""

from __future__ import annotations

import gc
import heapq
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from fabricsim.catalog import GPU, Catalog
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.model import ModelSpec, load_model
from fabricsim.sizing.bound import Bound, Incumbents, shared_incumbent
from fabricsim.sizing.economics import Economics, economics, run_costs
from fabricsim.sizing.floors import ClusterLows, TaskFloors, task_floors
from fabricsim.sizing.power_points import point_catalog
from fabricsim.sizing.reliability import Reliability, cluster_reliability
from fabricsim.sizing.space import ClusterChoice, Shape, no_shape_reason, shapes
from fabricsim.sizing.spec import SizingSpec
from fabricsim.topology import why_not_hosted
from fabricsim.training import (
    LAYERS,
    ParallelPlan,
    StepTerms,
    assemble_steps,
    check_plan,
    megatron_runs_interleaved,
    mfu_peak,
    plan_memory,
    step_flops,
    step_terms,
)

_Candidate = tuple[Shape, ParallelPlan, list[tuple[int, int]]]  # a shape, its valid plan and (gbs, m) batches
STRING_COLUMNS = ("system", "fabric", "recompute", "precision", "bottleneck", "chunk")


@dataclass
class ChunkResult:
    """The feasible plans of one cluster as columns, how many candidates were pruned before timing, and why
    (``why``: the counts behind an empty result; ``missing``: catalog prices or powers the cluster lacks)."""

    chunk: str
    columns: dict[str, np.ndarray]
    candidates: int
    pruned: int
    error: str | None = None
    why: dict[str, Any] = field(default_factory=dict)
    missing: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        return len(self.columns.get("gpus", ()))

    def meta(self) -> dict[str, Any]:
        """The counts and reasons of the chunk (JSON: the Parquet sidecar, and what ranking reads)."""
        return {"chunk": self.chunk, "candidates": self.candidates, "pruned": self.pruned, "rows": self.rows,
                "error": self.error, "why": self.why, "missing": list(self.missing)}


@dataclass
class _Caches:
    """Per-task caches shared by the clusters of one system and size (memory does not depend on the network)."""

    candidates: dict[tuple[str, int], tuple[list[_Candidate], int, list[int], str | None]] = \
        field(default_factory=dict)
    floors: dict[tuple[str, int, float | None], TaskFloors] = field(default_factory=dict)
    """the candidates' network-free bound parts, per GPU power point (the compute clock sets them)"""
    clusters: dict[tuple[str, str, float, float | None], Cluster] = field(default_factory=dict)
    """one timing cluster per system, link, oversubscription and power point: the scale-out kinds (fat-tree,
    rail-only, 2-plane) differ in price and reliability, not in the step model's network, so they share it and
    every cache keyed on it"""
    lows: dict[tuple[tuple[str, str, float, float | None], int], ClusterLows] = field(default_factory=dict)
    """per timing cluster and size: the candidates' network-aware bounds (`sizing.floors.ClusterLows`)"""
    terms: dict[tuple[tuple[str, str, float, float | None], int, int], StepTerms] = field(default_factory=dict)
    """per timing cluster, size and candidate: its priced step terms"""
    shapes: dict[tuple[str, int], list[Shape]] = field(default_factory=dict)
    memory: dict[tuple[Shape, int], tuple[float, float]] = field(default_factory=dict)
    model_flops: dict[tuple[str, int], float] = field(default_factory=dict)
    batch_rows: dict[tuple[str, int], int] = field(default_factory=dict)  # (plan, batch) rows of the candidates


def spec_model(spec: SizingSpec) -> ModelSpec:
    """The model a spec names: a preset or file, or an inline mapping (one object per process, so caches hit)."""
    if isinstance(spec.model, str):
        return load_model(spec.model)
    return _inline_model(json.dumps(spec.model, sort_keys=True))


@lru_cache(maxsize=64)
def _inline_model(text: str) -> ModelSpec:
    return ModelSpec.from_data(json.loads(text), source="model")


def plan_for(model: ModelSpec, spec: SizingSpec, shape: Shape, gbs: int) -> ParallelPlan:
    """The validated training plan of a shape and batch (raises SpecError where it cannot run)."""
    plan = ParallelPlan.build(tp=shape.tp, pp=shape.pp, dp=shape.dp, cp=shape.cp, ep=shape.ep,
                              etp=None if shape.etp == shape.tp else shape.etp, mbs=shape.mbs,
                              gbs=gbs, seq=spec.seq, virtual_stages=shape.vpp, recompute=shape.recompute,
                              zero=shape.zero, precision=shape.precision, **spec.fixed)
    check_plan(model, plan)
    return plan


def _valid_batches(spec: SizingSpec, shape: Shape) -> list[tuple[int, int]]:
    """(gbs, micro-batches) pairs a shape can run: gbs divisible by mbs * dp; interleaving as Megatron-LM runs it."""
    out = []
    for gbs in spec.gbs:
        if gbs % (shape.mbs * shape.dp):
            continue
        m = gbs // (shape.mbs * shape.dp)
        if shape.vpp > 1 and not megatron_runs_interleaved(shape.pp, m):
            continue
        out.append((gbs, m))
    return out


def _candidates(model: ModelSpec, spec: SizingSpec, all_shapes: list[Shape], caches: _Caches,
                key: tuple[str, int]) -> tuple[list[_Candidate], int, list[int], str | None]:
    """The shapes with a valid plan and batch (the task's clusters share them), how many shapes no --gbs divides,
    their dp, and the first reason a plan was invalid."""
    if key not in caches.candidates:
        valid: list[_Candidate] = []
        no_batch, dps, plan_error = 0, set[int](), None
        for shape in all_shapes:
            batches = _valid_batches(spec, shape)
            if not batches:
                no_batch += 1
                dps.add(shape.dp)
                continue
            try:
                valid.append((shape, plan_for(model, spec, shape, batches[0][0]), batches))
            except SpecError as exc:
                plan_error = plan_error or str(exc)
        caches.candidates[key] = (valid, no_batch, sorted(dps), plan_error)
    return caches.candidates[key]


def _memory(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, shape: Shape, m: int,
            caches: _Caches) -> tuple[float, float]:
    """(bytes needed, capacity) of a plan; depends on the batch only through the micro-batches in flight, which
    stop growing at 2 pp (1F1B: pp - stage; interleaved: below (pp (v + 1) - 1) / v)."""
    m_eff = min(m, 2 * shape.pp)
    key = (shape, m_eff)
    if key not in caches.memory:
        probe = plan.model_copy(update={"gbs": m_eff * shape.mbs * shape.dp})
        report = plan_memory(model, probe, cluster)
        caches.memory[key] = (report.total_bytes, report.capacity_bytes)
    return caches.memory[key]


def evaluate_chunk(spec: SizingSpec, choice: ClusterChoice, caches: _Caches | None = None,
                   catalog: Catalog | None = None, bound: Bound | None = None) -> ChunkResult:
    """All candidate plans of one cluster: pruned, timed, costed; with a `bound`, only those that can change the
    answer are timed (`fabricsim.sizing.bound`)."""
    catalog = point_catalog(catalog or spec.catalog(), choice.system, choice.gpu_power)
    caches = caches or _Caches()
    model = spec_model(spec)
    system = catalog.system(choice.system)
    gpu = catalog.gpu(system.gpu)
    econ = economics(choice, spec.rail_optimized, catalog)
    fp8 = gpu.fp8_flops_per_s is not None
    key = (choice.system, choice.gpus)
    if key not in caches.shapes:  # the clusters of one task share their shapes
        caches.shapes[key] = list(shapes(model, spec, system, fp8, choice.gpus))
    all_shapes = caches.shapes[key]
    candidates = len(all_shapes) * len(spec.gbs)
    if econ.error is not None:
        return ChunkResult(choice.chunk_id, {}, candidates, candidates, econ.error)
    if spec.cooling is not None:  # a hall that cannot host the system: the cluster is not searched
        refused = why_not_hosted(system, gpu, catalog.cooling_class(spec.cooling))
        if refused is not None:
            return ChunkResult(choice.chunk_id, {}, candidates, candidates, refused)
    if not all_shapes:
        why = {"shapes": 0, "no_shape": no_shape_reason(model, spec, system, fp8, choice.gpus)}
        return ChunkResult(choice.chunk_id, {}, 0, 0, None, why, econ.missing)
    timing = (choice.system, choice.link, choice.oversubscription, choice.gpu_power)
    if timing not in caches.clusters:
        caches.clusters[timing] = Cluster(system, fabric=choice.link, oversubscription=choice.oversubscription,
                                          catalog=catalog)
    cluster = caches.clusters[timing]
    chosen = cluster_reliability(model, spec, choice, cluster, catalog)
    econ, good = chosen.econ, chosen.goodput
    if econ.error is not None:
        return ChunkResult(choice.chunk_id, {}, candidates, candidates, econ.error)
    if good <= 0.0:
        why = {"shapes": len(all_shapes), "goodput": 0.0}
        return ChunkResult(choice.chunk_id, {}, candidates, candidates, None, why, econ.missing)
    valid, no_batch, dps, plan_error = _candidates(model, spec, all_shapes, caches, key)
    fits = _Fits(model, cluster, caches, good)
    if bound is None:
        for k, (shape, plan, batches) in enumerate(valid):
            fitting = fits.fitting(shape, plan, batches)
            if fitting:
                fits.priced.append((k, fitting, _terms(model, plan, cluster, caches, (timing, choice.gpus, k))))
    else:
        _bounded(model, spec, choice, econ, valid, bound, fits, (timing, choice.gpus))
    terms: list[StepTerms] = []
    rows: list[tuple[int, Shape, int, int, float, float]] = []  # (terms index, shape, gbs, m, memory, capacity)
    for k, fitting, t in fits.priced:
        terms.append(t)
        for gbs, m, need, have in fitting:
            rows.append((len(terms) - 1, valid[k][0], gbs, m, need, have))
    if key not in caches.batch_rows:
        caches.batch_rows[key] = sum(len(c[2]) for c in valid)
    bounded = caches.batch_rows[key] - len(rows) - fits.misfits
    why = {"shapes": len(all_shapes), "no_batch": no_batch, "dp": dps, "plan_error": plan_error,
           "bounded": bounded,
           "memory_need": None if fits.least is None else fits.least[0],
           "memory_have": None if fits.least is None else fits.least[1]}
    if not rows:
        return ChunkResult(choice.chunk_id, {}, candidates, candidates, None, why, econ.missing)
    return ChunkResult(choice.chunk_id, _columns(model, spec, choice, gpu, terms, rows, caches, chosen),
                       candidates, candidates - len(rows), None, why, econ.missing)


_Fitting = list[tuple[int, int, float, float]]  # (gbs, m, bytes needed, capacity) of the batches that fit
_BLOCK = 128
"""candidates whose network-aware bounds a bounded search prices at once"""


@dataclass
class _Fits:
    """A cluster's memory checks and priced shapes: ``priced`` holds (candidate index, its fitting batches, step
    terms) in candidate order; ``least`` the (bytes, capacity) of the least memory a plan found not to fit needs
    (every plan's when none fits), ``misfits`` how many batches did not fit."""

    model: ModelSpec
    cluster: Cluster
    caches: _Caches
    goodput: float
    priced: list[tuple[int, _Fitting, StepTerms]] = field(default_factory=list)
    least: tuple[float, float] | None = None
    misfits: int = 0

    def fitting(self, shape: Shape, plan: ParallelPlan, batches: list[tuple[int, int]]) -> _Fitting:
        """The batches of a shape whose plan fits in GPU memory."""
        out = []
        for gbs, m in batches:
            need, have = _memory(self.model, plan, self.cluster, shape, m, self.caches)
            if need <= have:
                out.append((gbs, m, need, have))
            else:
                self.misfits += 1
                if self.least is None or need < self.least[0]:
                    self.least = (need, have)
        return out


def _bounded(model: ModelSpec, spec: SizingSpec, choice: ClusterChoice, econ: Economics, valid: list[_Candidate],
             bound: Bound, fits: _Fits, timing: tuple[tuple[str, str, float, float | None], int]) -> None:
    """Price the shapes a bounded search must time: in order of their lowest time-to-train bound (network
    included: `sizing.floors`), each checked for memory only when reached, until none left can change the answer
    (`fabricsim.sizing.bound`); shapes never reached are neither checked nor timed."""
    caches = fits.caches
    key = (choice.system, choice.gpus, choice.gpu_power)
    if key not in caches.floors:
        caches.floors[key] = task_floors(model, [(plan, batches) for _, plan, batches in valid], fits.cluster,
                                         spec.seq, spec.tokens)
    floors = caches.floors[key]
    if timing not in caches.lows:
        caches.lows[timing] = ClusterLows(model, floors, fits.cluster)
    net = caches.lows[timing]  # network-aware bounds, computed as the search reaches them
    compute = floors.compute / fits.goodput
    by_compute = np.argsort(compute, kind="stable")
    incumbents = Incumbents(bound, spec, econ, choice.gpus, shared_incumbent(bound))
    priced: list[tuple[int, _Fitting, StepTerms]] = []
    heap: list[tuple[float, int, bool, float]] = []  # (network-aware bound, candidate, whether a run that fast
    # qualifies, its objective) of the candidates reached
    reached = 0
    while True:
        # reach candidates in order of their network-free bound until the least network-aware bound reached is
        # at most every unreached one's (which is at least its network-free bound): then it is the least of all
        while reached < len(by_compute) and (not heap or compute[by_compute[reached]] < heap[0][0]):
            block = by_compute[reached:reached + _BLOCK]
            reached += len(block)
            lows = net.of(block) / fits.goodput
            for item in zip(lows.tolist(), block.tolist(), incumbents.qualifies(lows).tolist(),
                            incumbents.objective(lows).tolist(), strict=True):
                heapq.heappush(heap, item)
        if not heap:
            break
        low, k, can_qualify, objective = heapq.heappop(heap)
        if not incumbents.needed(low, can_qualify, objective):
            break
        shape, plan, batches = valid[k]
        fitting = fits.fitting(shape, plan, batches)
        if not fitting:
            continue
        t = _terms(model, plan, fits.cluster, caches, (*timing, k))
        priced.append((k, fitting, t))
        n = len(fitting)
        steps = assemble_steps(_rows(t.microbatch_exposed, n), _rows(t.microbatch_overlapped, n),
                               _rows(t.sync_exposed, n), _rows(t.sync_overlapped, n), np.full(n, t.optimizer_s),
                               np.full(n, t.pp), np.full(n, t.virtual_stages), np.array([f[1] for f in fitting]))
        gbs = np.array([f[0] for f in fitting], dtype=np.int64)
        incumbents.add(spec.tokens / ((gbs * spec.seq) / steps.step_time_s) / fits.goodput)
    fits.priced.extend(sorted(priced, key=lambda p: p[0]))


def _terms(model: ModelSpec, plan: ParallelPlan, cluster: Cluster, caches: _Caches,
           key: tuple[tuple[str, str, float, float | None], int, int]) -> StepTerms:
    """`step_terms` of a candidate, once per timing cluster (the scale-out kinds share it)."""
    if key not in caches.terms:
        caches.terms[key] = step_terms(model, plan, cluster)
    return caches.terms[key]


def _rows(values: tuple[float, ...], n: int) -> np.ndarray:
    """One step term as ``n`` identical rows."""
    return np.array([values] * n)


def _columns(model: ModelSpec, spec: SizingSpec, choice: ClusterChoice, gpu: GPU, terms: list[StepTerms],
             rows: list[tuple[int, Shape, int, int, float, float]], caches: _Caches,
             chosen: Reliability) -> dict[str, np.ndarray]:
    idx = np.array([r[0] for r in rows])
    pick = [terms[i] for i in idx]
    steps = assemble_steps(np.array([t.microbatch_exposed for t in pick]), np.array([t.microbatch_overlapped
                                                                                      for t in pick]),
                           np.array([t.sync_exposed for t in pick]), np.array([t.sync_overlapped for t in pick]),
                           np.array([t.optimizer_s for t in pick]), np.array([t.pp for t in pick]),
                           np.array([t.virtual_stages for t in pick]), np.array([r[3] for r in rows]))
    n = len(rows)
    gbs = np.array([r[2] for r in rows], dtype=np.int64)
    step = steps.step_time_s
    tokens_per_s = (gbs * spec.seq) / step
    flops = np.array([_model_flops(model, spec, r[1].recompute, r[2], caches) for r in rows])
    peak = np.array([mfu_peak(gpu, r[1].precision) for r in rows])  # as predict_training: the GEMMs' precision
    mfu = flops / (step * choice.gpus * peak)
    econ, good = chosen.econ, chosen.goodput
    time_s = spec.tokens / tokens_per_s / good  # wall clock: failures, checkpoints and restarts included
    cost, energy = run_costs(time_s, econ, choice.gpus, spec)
    shape_cols: dict[str, Any] = {k: np.array([getattr(r[1], k) for r in rows]) for k in Shape.__dataclass_fields__}
    return {
        "chunk": np.full(n, choice.chunk_id, dtype=object),
        "system": np.full(n, choice.system, dtype=object),
        "fabric": np.full(n, choice.fabric, dtype=object),
        "oversubscription": np.full(n, choice.oversubscription),
        "nodes": np.full(n, choice.nodes, dtype=np.int64),
        "gpus": np.full(n, choice.gpus, dtype=np.int64),
        "gpu_power_w": np.full(n, gpu.tdp_w),
        **{k: (v.astype(object) if v.dtype.kind == "U" else v.astype(np.int64)) for k, v in shape_cols.items()},
        "flash_attn": np.full(n, bool(spec.fixed.get("flash_attention", True))),
        "seq": np.full(n, spec.seq, dtype=np.int64),
        "gbs": gbs,
        "step_time_s": step,
        "tokens_per_s": tokens_per_s,
        "time_to_train_s": time_s,
        "goodput": np.full(n, good),
        "spare_gpus": np.full(n, chosen.spare_gpus, dtype=np.int64),
        "storage": np.full(n, "-" if chosen.option is None else chosen.option.storage, dtype=object),
        "storage_servers": np.full(n, econ.storage_servers, dtype=np.int64),
        "mfu": mfu,
        "memory_per_gpu_bytes": np.array([r[4] for r in rows]),
        "memory_capacity_bytes": np.array([r[5] for r in rows]),
        "bottleneck": np.array([LAYERS[i] for i in steps.bottleneck], dtype=object),
        "capex_usd": np.full(n, np.nan if econ.capex_usd is None else econ.capex_usd),
        "power_w": np.full(n, np.nan if econ.power_w is None else econ.power_w),
        "cost_usd": cost,
        "usd_per_million_tokens": cost / spec.tokens * 1e6,
        "energy_mwh": energy,
    }


def _model_flops(model: ModelSpec, spec: SizingSpec, recompute: str, gbs: int, caches: _Caches) -> float:
    key = (recompute, gbs)
    if key not in caches.model_flops:
        plan = ParallelPlan.build(dp=1, gbs=gbs, seq=spec.seq, recompute=recompute)
        caches.model_flops[key] = step_flops(model, plan).model_flops
    return caches.model_flops[key]


def evaluate_task(spec: SizingSpec, choices: list[ClusterChoice], done: frozenset[str] = frozenset(),
                  bound: Bound | None = None) -> list[ChunkResult]:
    """The clusters of one system and size (they share plan and memory caches), skipping chunks in ``done``."""
    caches = _Caches()
    with _gc_paused():
        return [evaluate_chunk(spec, c, caches, bound=bound) for c in choices if c.chunk_id not in done]


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: a task allocates millions of small acyclic objects while its caches
    hold hundreds of thousands, so each collection rescans them all (a fifth of a task's time, measured); the
    collector resumes as it was, and collects as usual, when the task ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
