"""Auto knobs for `train`: the pipeline interleaving (vpp), micro-batch, recompute and ZeRO stage the user left
unset, chosen as the fastest setting that fits in GPU memory; the knobs the user set stay as given.

Candidates: vpp = the divisors of layers // pp when pp > 1 (1 otherwise), and only where Megatron-LM runs the
interleaved schedule (pp > 2, micro-batches a multiple of pp); mbs = the powers of two up to ``MAX_AUTO_MBS``
dividing gbs / dp; recompute none, selective, full; ZeRO 0-2, and 3 (FSDP) only without pipeline parallelism.
Each candidate is checked against memory first (``memory_report``, no timing) and only those that fit are timed
with ``predict_training``; ties go to the simpler setting (less recompute, lower ZeRO, fewer virtual stages,
smaller micro-batch). When nothing fits the candidate with the smallest shortfall is returned, marked as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from math import isclose
from typing import Any

import numpy as np

from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.model import ModelSpec
from fabricsim.training.memory import GIB, memory_report
from fabricsim.training.plan import ParallelPlan, megatron_runs_interleaved
from fabricsim.training.result import TrainingPrediction
from fabricsim.training.schedule import assemble_steps
from fabricsim.training.step import predict_training, step_terms

# Search bound on the micro-batch: Megatron-LM / NeMo pretraining recipes run micro-batches of 1 to 8 sequences.
MAX_AUTO_MBS = 8
# Knob (plan field) -> its CLI name, in the order the output lists them.
AUTO_KNOBS = {"virtual_stages": "vpp", "mbs": "mbs", "recompute": "recompute", "zero": "zero"}
RECOMPUTE_ORDER = ("none", "selective", "full")
# Float tolerance under which two step times count as a tie (the simpler setting wins).
TIE_REL = 1e-9


@dataclass(frozen=True)
class AutoChoice:
    """The plan the search chose, its prediction, and what it chose and how."""

    plan: ParallelPlan
    prediction: TrainingPrediction
    chosen: dict[str, Any]  # CLI knob name -> value, only for the knobs the search set
    fits: bool
    candidates: int  # settings enumerated
    timed: int  # settings that fit and were timed

    def note(self) -> str:
        """One line: what was chosen and that the search chose it."""
        if not self.chosen:
            return "all knobs set by the user (no search)"
        knobs = ", ".join(f"{k}={v}" for k, v in self.chosen.items())
        if self.fits:
            return f"auto: chose {knobs} (fastest that fits of {self.timed} fitting / {self.candidates} settings)"
        short = self.prediction.memory.shortfall_bytes / GIB
        return (f"auto: no setting of {', '.join(self.chosen)} fits; closest is {knobs}, short by {short:.1f} GiB "
                f"({self.candidates} settings)")

    def to_json(self) -> dict[str, Any]:
        return {"knobs": dict(self.chosen), "chosen_by": "search" if self.chosen else "user", "fits": self.fits,
                "candidates": self.candidates, "timed": self.timed, "note": self.note()}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def knob_values(model: ModelSpec, base: ParallelPlan, knob: str) -> list[Any]:
    """Candidate values of one auto knob for a plan whose other fields are fixed."""
    if knob == "virtual_stages":
        return _divisors(model.layers // base.pp) if base.pp > 1 else [1]
    if knob == "mbs":
        per_replica = base.gbs // base.dp
        return [m for m in (2**k for k in range(MAX_AUTO_MBS.bit_length())) if m <= MAX_AUTO_MBS
                and per_replica % m == 0]
    if knob == "recompute":
        return list(RECOMPUTE_ORDER)
    if knob == "zero":
        return [0, 1, 2, 3] if base.pp == 1 else [0, 1, 2]
    raise SpecError(f"unknown knob {knob!r}; allowed: {', '.join(AUTO_KNOBS)}", field="knob")


def _complexity(plan: ParallelPlan) -> tuple[int, int, int, int]:
    return RECOMPUTE_ORDER.index(plan.recompute), plan.zero, plan.virtual_stages, plan.mbs


def _better(time_s: float, key: tuple[int, int, int, int], best_s: float, best_key: tuple[int, int, int, int]) -> bool:
    """Faster wins; within ``TIE_REL`` the simpler setting wins."""
    if isclose(time_s, best_s, rel_tol=TIE_REL):
        return key < best_key
    return time_s < best_s


def _candidate(fields: dict[str, Any], setting: dict[str, Any]) -> ParallelPlan | None:
    """The plan for one setting, or None where the setting is not a valid plan (or, for an auto vpp, an interleaved
    schedule Megatron-LM cannot run: pp <= 2, or micro-batches not a multiple of pp)."""
    try:
        plan = ParallelPlan.build(**fields, **setting)
    except SpecError:
        return None
    if "virtual_stages" in setting and plan.virtual_stages > 1 and not megatron_runs_interleaved(plan.pp,
                                                                                              plan.microbatches):
        return None
    return plan


def _step_times(model: ModelSpec, plans: list[ParallelPlan], cluster: Cluster) -> np.ndarray:
    """Each plan's step time as ``predict_training`` gives it (its terms assembled by the same numpy code, so to
    the bit), without the breakdown, memory and FLOP counts only the chosen plan needs."""
    terms = [step_terms(model, p, cluster) for p in plans]
    return assemble_steps(np.array([t.microbatch_exposed for t in terms]),
                          np.array([t.microbatch_overlapped for t in terms]),
                          np.array([t.sync_exposed for t in terms]), np.array([t.sync_overlapped for t in terms]),
                          np.array([t.optimizer_s for t in terms]), np.array([p.pp for p in plans]),
                          np.array([p.virtual_stages for p in plans]),
                          np.array([p.microbatches for p in plans])).step_time_s


def _fastest(plans: list[ParallelPlan], times: np.ndarray) -> int:
    """The index of the fastest plan, ties (within ``TIE_REL``) to the simpler setting, in enumeration order."""
    best = 0
    for i in range(1, len(plans)):
        if _better(float(times[i]), _complexity(plans[i]), float(times[best]), _complexity(plans[best])):
            best = i
    return best


def search_knobs(model: ModelSpec, fields: dict[str, Any], cluster: Cluster) -> AutoChoice:
    """Fill the knobs that are None in ``fields`` with the fastest setting that fits; keep the others."""
    given = {k: v for k, v in fields.items() if v is not None}
    auto = [k for k in AUTO_KNOBS if fields.get(k) is None]
    base = ParallelPlan.build(**given)  # validates what the user set (auto knobs at their defaults)
    if not auto:
        pred = predict_training(model, base, cluster)
        return AutoChoice(base, pred, {}, pred.memory.fits, 1, 1)
    fixed = {k: v for k, v in given.items() if k != "schedule"}
    gpu = cluster.catalog.gpu(cluster.system.gpu)
    fitting: list[ParallelPlan] = []
    closest: tuple[float, ParallelPlan] | None = None
    candidates = 0
    for values in product(*(knob_values(model, base, k) for k in auto)):
        plan = _candidate(fixed, dict(zip(auto, values, strict=True)))
        if plan is None:
            continue
        candidates += 1
        memory = memory_report(model, plan, gpu)
        if not memory.fits:
            if closest is None or memory.shortfall_bytes < closest[0]:
                closest = (memory.shortfall_bytes, plan)
            continue
        fitting.append(plan)
    timed = len(fitting)
    if fitting:
        plan = fitting[_fastest(fitting, _step_times(model, fitting, cluster))]
        pred = predict_training(model, plan, cluster)
        fits = True
    elif closest is not None:
        plan = closest[1]
        pred = predict_training(model, plan, cluster)
        fits = False
    else:
        raise SpecError(f"no valid setting of {', '.join(AUTO_KNOBS[k] for k in auto)} for this plan; set them",
                        field="--" + AUTO_KNOBS[auto[0]])
    chosen = {AUTO_KNOBS[k]: getattr(plan, k) for k in auto}
    return AutoChoice(plan, pred, chosen, fits, candidates, timed)
