"""Branch and bound for `size`: each plan's time to train has a lower bound that needs no network (its slowest
stage's compute and HBM time x (micro-batches + bubble) + the optimizer: `training.microbatch_floor`), so a
cluster prices its plans' collectives in order of that bound and stops once no plan left can change the answer.

What the answer needs of a cluster, and why the bound keeps it exactly:
- its fastest plan (the Pareto front, the best per system x fabric and the "fastest" of a constraint that binds
  all come from it: within one cluster cost, energy and the constraints are increasing in time, so its fastest
  plan is also its cheapest and the first to qualify);
- every qualifying plan that can be among the `top` shown or a tie with the search's best (within the model's
  comparison error of it, `Bound.spread`): the cluster's own `top` fastest qualifying plans and its best
  qualifying plan x exp(spread) bound those from above (the whole search's can only be lower).
A plan whose bound exceeds all of these cannot be any of them; the plans left are never timed, nor checked for
memory (a plan that does not fit is skipped when reached; it changes no incumbent). Results equal the
exhaustive search's (`size(..., exhaustive=True)`): same best, Pareto front, top rows, ties and pick
(tests/test_sizing_bound.py); only the evaluated-plan counts (and an --out file's rows) differ.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabricsim.catalog import Catalog
from fabricsim.sizing.economics import Economics, run_costs
from fabricsim.sizing.rank import meets_constraints
from fabricsim.sizing.space import ClusterChoice
from fabricsim.sizing.spec import SizingSpec

SLACK = 1e-9
"""relative margin a bound must clear before a plan is dropped (the bound and the time round differently)"""


@dataclass(frozen=True)
class Bound:
    """What a bounded search keeps: ties within ``spread`` (a log ratio; None: only the best ties) and ``top``;
    ``search`` names one search (the objective values its processes have found are shared under it)."""

    spread: float | None
    top: int
    search: str = ""


@dataclass
class SharedIncumbent:
    """The objective values of qualifying plans timed so far in one search, over all its clusters: this
    process's, and with a local pool every worker's (``pool``: a shared array of the `top` least values found by
    any worker, ascending, inf where fewer). The search's best is at most the least of them and its `top`-th at
    most their `top`-th least, so a plan whose objective is above max(`top`-th least, least x exp(spread)) can be
    neither a top row nor a tie, whatever cluster it is on (within a cluster the objective, cost or energy or
    time, is proportional to time). Values only fall, so a read racing a worker's write still bounds."""

    bound: Bound
    pool: Any = None
    best: float = math.inf
    least: list[float] = field(default_factory=list)  # max-heap (negated) of the `top` least

    def add(self, values: np.ndarray) -> None:
        found = values[np.isfinite(values)].tolist()
        for v in found:
            self.best = min(self.best, v)
            if len(self.least) < self.bound.top:
                heapq.heappush(self.least, -v)
            elif v < -self.least[0]:
                heapq.heapreplace(self.least, -v)
        if self.pool is not None and found:
            with self.pool.get_lock():
                merged = sorted([*self.pool[:], *found])[:self.bound.top]
                self.pool[:] = merged

    def threshold(self) -> float:
        """No plan whose objective is above this can be a top row or a tie."""
        best = self.best
        nth = -self.least[0] if len(self.least) == self.bound.top else math.inf
        if self.pool is not None:
            best = min(best, self.pool[0])
            nth = min(nth, self.pool[self.bound.top - 1])
        return max(nth, best * math.exp(self.bound.spread or 0.0))


_SHARED: dict[str, SharedIncumbent] = {}
_POOLS: dict[str, Any] = {}


def attach_pool(search: str, values: Any) -> None:
    """Share a search's incumbent with the other workers of a local pool (a process pool's initializer)."""
    _POOLS[search] = values


def shared_incumbent(bound: Bound) -> SharedIncumbent:
    """This process's incumbent of ``bound``'s search (one per search; a process keeps the last few)."""
    found = _SHARED.get(bound.search)
    if found is None or found.bound != bound:
        if len(_SHARED) >= 8:
            _SHARED.clear()
        found = _SHARED[bound.search] = SharedIncumbent(bound, _POOLS.get(bound.search))
    return found


def tie_spread_bound(moe: bool, choices: list[ClusterChoice], catalog: Catalog) -> float | None:
    """The widest comparison band (its high end) any best plan of this search could get: the tie rule uses the
    best plan's regime (dense/MoE, sharded or not, GPU architecture, precision, scale), so the largest over every
    regime the candidates can have bounds it (``moe``: whether the model is a mixture of experts)."""
    from fabricsim.validation import ComparisonBand, comparison_band, published_residuals, training_regime

    residuals = published_residuals()
    highs = []
    for gpu_id in sorted({catalog.system(c.system).gpu for c in choices}):
        gpu = catalog.gpu(gpu_id)
        for precision in ("bf16", "fp8"):
            for gpus in sorted({c.gpus for c in choices}):
                for sharded in (False, True):
                    band = comparison_band(training_regime(moe, gpu, precision, gpus, sharded), residuals)
                    if isinstance(band, ComparisonBand):
                        highs.append(max(0.0, band.high))
    return max(highs) if highs else None


@dataclass
class Incumbents:
    """A cluster's exact times so far, and the test of whether a plan with a given lower bound is still needed."""

    bound: Bound
    spec: SizingSpec
    econ: Economics
    gpus: int
    shared: SharedIncumbent | None = None
    best: float = math.inf
    best_qualifying: float = math.inf
    fastest: list[float] = field(default_factory=list)  # max-heap (negated) of the `top` fastest qualifying times

    def qualifies(self, time_s: np.ndarray) -> np.ndarray:
        """Which runs of these times meet the spec's deadline, budget and power cap (`rank.meets_constraints`)."""
        cost, _ = run_costs(time_s, self.econ, self.gpus, self.spec)
        power = np.nan if self.econ.power_w is None else self.econ.power_w
        ok = np.ones(len(time_s), dtype=bool)
        for mask in meets_constraints(self.spec, time_s, cost, power).values():
            ok &= mask
        return ok

    def objective(self, time_s: np.ndarray) -> np.ndarray:
        """The spec's objective (`rank.OBJECTIVE_COLUMN`) of runs of these times on this cluster (NaN: unknown)."""
        if self.spec.objective == "time":
            return np.asarray(time_s, dtype=np.float64)
        cost, energy = run_costs(time_s, self.econ, self.gpus, self.spec)
        return np.asarray(cost if self.spec.objective == "cost" else energy, dtype=np.float64)

    def add(self, time_s: np.ndarray) -> None:
        """Exact times to train of newly priced plans."""
        if len(time_s) == 0:
            return
        self.best = min(self.best, float(time_s.min()))
        ok = self.qualifies(time_s)
        if self.shared is not None:
            self.shared.add(self.objective(time_s[ok]))
        for t in time_s[ok].tolist():
            self.best_qualifying = min(self.best_qualifying, t)
            if len(self.fastest) < self.bound.top:
                heapq.heappush(self.fastest, -t)
            elif t < -self.fastest[0]:
                heapq.heapreplace(self.fastest, -t)

    def needed(self, lower_bound_s: float, can_qualify: bool | None = None, objective: float = math.nan) -> bool:
        """Whether a plan whose time to train is at least ``lower_bound_s`` can still change the answer
        (``can_qualify``: whether a run that fast meets the constraints, when already known; ``objective``: that
        run's objective, checked against the search's shared incumbent when known)."""
        if lower_bound_s <= self.best * (1 + SLACK):
            return True  # it may be the cluster's fastest
        if can_qualify is None:
            can_qualify = bool(self.qualifies(np.array([lower_bound_s]))[0])
        if not can_qualify:
            return False  # constraints only tighten with time: it cannot qualify
        nth = -self.fastest[0] if len(self.fastest) == self.bound.top else math.inf
        tie = self.best_qualifying * math.exp(self.bound.spread or 0.0)
        if lower_bound_s > max(nth, tie) * (1 + SLACK):
            return False
        return not (self.shared is not None and objective > self.shared.threshold() * (1 + SLACK))
