"""What-if deltas of a training step: each layer made ``factor`` times faster, and named cluster swaps priced
from the bill of materials, so the next dollar goes where it buys the most step time."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from fabricsim.analysis.deltas import LayerDelta, SwapDelta
from fabricsim.analysis.scenario import Scenario
from fabricsim.analysis.swaps import Swap, apply_swap
from fabricsim.analysis.variants import faster_catalog
from fabricsim.analysis.verdict import Verdict, verdict
from fabricsim.errors import SpecError
from fabricsim.model import ModelSpec
from fabricsim.training import ParallelPlan, TrainingPrediction, parts_of, predict_goodput, predict_training
from fabricsim.validation import (
    ComparisonBand,
    NoBand,
    bands,
    comparison_band,
    published_residuals,
    training_regime,
)

LOCAL_LAYERS = ("compute", "hbm", "nvlink", "pcie")
UNPRICED_SWAPS = {"storage": "storage price", "mtbf": "reliability price"}
"""swaps whose cost the catalog cannot price (checkpoint=async costs no hardware; storage is priced when its
network is billed, spares always are)"""


@dataclass(frozen=True)
class WhatIf:
    """The base step and every delta, with the verdict."""

    base: TrainingPrediction
    base_capex_usd: float | None
    factor: float
    layers: tuple[LayerDelta, ...]
    swaps: tuple[SwapDelta, ...]
    verdict: Verdict
    comparison: ComparisonBand | NoBand | None = None
    """the model's error on a speed-up between two clusters (paired published residuals)"""
    base_goodput: float = 1.0
    """the fraction of wall-clock time the base run keeps (failures, checkpoints, restarts); layer speed-ups
    leave it as it is, swaps are compared on the wall clock"""
    base_facility: dict[str, Any] | None = None
    """the base cluster's racks, facility power and floor in a hall of the cooling its system needs"""

    def to_json(self) -> dict[str, Any]:
        return {"base_step_s": float(self.base.step_time_s), "base_bottleneck": self.base.bottleneck,
                "base_capex_usd": self.base_capex_usd, "factor": self.factor,
                "layers": [d.to_json() for d in self.layers],
                "swaps": [s.to_json(self.base_capex_usd) for s in self.swaps],
                "verdict": self.verdict.to_json(), "base_goodput": self.base_goodput,
                "comparison_band": None if self.comparison is None else self.comparison.to_json(),
                "base_facility": self.base_facility}


def varied_layers(scenario: Scenario) -> tuple[str, ...]:
    """Compute, HBM, NVLink, PCIe and the cluster's network kind (infiniband, or ethernet on RoCE fabrics)."""
    return (*LOCAL_LAYERS, scenario.link().kind)


def layer_deltas(model: ModelSpec, plan: ParallelPlan, scenario: Scenario, base_step: float,
                 factor: float) -> tuple[LayerDelta, ...]:
    """The step with each layer in turn ``factor`` times faster, on the same cluster options."""
    out = []
    for layer in varied_layers(scenario):
        cluster = scenario.cluster(faster_catalog(scenario.catalog, layer, factor))
        step = float(predict_training(model, plan, cluster).step_time_s)
        out.append(LayerDelta(layer, step, base_step / step))
    return tuple(out)


def swap_delta(model: ModelSpec, plan: ParallelPlan, scenario: Scenario, base_step: float,
               base_capex_usd: float | None, swap: Swap, base_goodput: float = 1.0) -> SwapDelta:
    """The step and the capital cost difference on the cluster with ``swap`` applied; the speed-up is of the
    wall-clock step (step / goodput), so failures, checkpoints and restarts count."""
    swapped = apply_swap(scenario, swap)
    pred = predict_training(model, plan, swapped.cluster())
    capex = swapped.capex()
    billed = swapped.goodput is not None and swapped.goodput.storage_network != "none"
    if swap.key in UNPRICED_SWAPS and not (swap.key == "storage" and billed):  # no price for reliability
        capex = replace(capex, usd=None, missing=(*capex.missing, UNPRICED_SWAPS[swap.key]))
    delta = None if capex.usd is None or base_capex_usd is None else capex.usd - base_capex_usd
    step = float(pred.step_time_s)
    good = scenario_goodput(model, swapped, pred)
    return SwapDelta(swap.label, step, (base_step / base_goodput) / (step / good) if good > 0 else 0.0, delta,
                     bool(pred.memory.fits), capex.missing, goodput=good, facility=facility_json(swapped))


def facility_json(scenario: Scenario) -> dict[str, Any] | None:
    """The cluster's facility block (`Scenario.facility`), an add-on: what it cannot give is an ``error`` in it."""
    try:
        return scenario.facility().to_json()
    except SpecError as exc:
        return {"error": exc.message}


def scenario_goodput(model: ModelSpec, scenario: Scenario, pred: TrainingPrediction) -> float:
    """The fraction of wall-clock time the run keeps on this cluster (1 without goodput options)."""
    if scenario.goodput is None:
        return 1.0
    parts = parts_of(scenario.system, pred.gpus, scenario.bill.nics, scenario.bill.cables_total)
    return predict_goodput(model, scenario.cluster(), parts, pred.step_time_s, pred.tokens_per_s,
                           scenario.goodput).goodput


def what_if(model: ModelSpec, plan: ParallelPlan, scenario: Scenario, factor: float = 2.0,
            swaps: tuple[Swap, ...] = (), calibration: tuple[str, ...] = ()) -> WhatIf:
    """Base prediction, layer deltas, priced swaps and the verdict for one plan on one cluster."""
    if not factor > 1.0 or factor == float("inf"):
        raise SpecError(f"must be a finite speed-up > 1 (2 = twice as fast), got {factor}", field="--factor")
    base = predict_training(model, plan, scenario.cluster())
    base_capex = scenario.capex()
    base_step = float(base.step_time_s)
    base_goodput = scenario_goodput(model, scenario, base)
    layers = layer_deltas(model, plan, scenario, base_step, factor)
    comparison = comparison_error(model, base, scenario, calibration)
    layers = tuple(replace(d, band=step_band(model, base, scenario, d.step_time_s, calibration)) for d in layers)
    deltas = tuple(replace(d, speedup_range=None if isinstance(comparison, NoBand) else
                           comparison.ratio_range(d.speedup),
                           band=step_band(model, base, apply_swap(scenario, s), d.step_time_s, calibration))
                   for s, d in ((s, swap_delta(model, plan, scenario, base_step, base_capex.usd, s, base_goodput))
                                for s in swaps))
    return WhatIf(base, base_capex.usd, factor, layers, deltas,
                  verdict(base, factor, layers, deltas, base_capex.usd, base_capex.missing, comparison), comparison,
                  base_goodput, facility_json(scenario))


def step_band(model: ModelSpec, base: TrainingPrediction, scenario: Scenario, step_time_s: float,
              calibration: tuple[str, ...] = ()) -> dict[str, object]:
    """The error band (JSON) of a step time of this plan on ``scenario``'s GPUs, from comparable published runs."""
    gpu = scenario.catalog.gpu(scenario.system.gpu)
    regime = training_regime(model.moe is not None, gpu, base.peak_precision, base.gpus, base.sharded)
    return bands({"step_time_s": (step_time_s, True)}, regime, calibration)["step_time_s"].to_json()


def comparison_error(model: ModelSpec, base: TrainingPrediction, scenario: Scenario,
                     calibration: tuple[str, ...] = ()) -> ComparisonBand | NoBand:
    """How far a predicted speed-up between two clusters for this plan may be off: paired published residuals of
    training runs like this one (``validation.comparison_band``)."""
    gpu = scenario.catalog.gpu(scenario.system.gpu)
    regime = training_regime(model.moe is not None, gpu, base.peak_precision, base.gpus, base.sharded)
    return comparison_band(regime, published_residuals(calibration))
