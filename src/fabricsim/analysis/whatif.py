"""What-if deltas of a training step: each layer made ``factor`` times faster, and named cluster swaps priced
from the bill of materials, so the next dollar goes where it buys the most step time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricsim.analysis.deltas import LayerDelta, SwapDelta
from fabricsim.analysis.scenario import Scenario
from fabricsim.analysis.swaps import Swap, apply_swap
from fabricsim.analysis.variants import faster_catalog
from fabricsim.analysis.verdict import Verdict, verdict
from fabricsim.errors import SpecError
from fabricsim.model import ModelSpec
from fabricsim.training import ParallelPlan, TrainingPrediction, predict_training

LOCAL_LAYERS = ("compute", "hbm", "nvlink", "pcie")


@dataclass(frozen=True)
class WhatIf:
    """The base step and every delta, with the verdict."""

    base: TrainingPrediction
    base_capex_usd: float | None
    factor: float
    layers: tuple[LayerDelta, ...]
    swaps: tuple[SwapDelta, ...]
    verdict: Verdict

    def to_json(self) -> dict[str, Any]:
        return {"base_step_s": float(self.base.step_time_s), "base_bottleneck": self.base.bottleneck,
                "base_capex_usd": self.base_capex_usd, "factor": self.factor,
                "layers": [d.to_json() for d in self.layers],
                "swaps": [s.to_json(self.base_capex_usd) for s in self.swaps],
                "verdict": self.verdict.to_json()}


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
               base_capex_usd: float | None, swap: Swap) -> SwapDelta:
    """The step and the capital cost difference on the cluster with ``swap`` applied."""
    swapped = apply_swap(scenario, swap)
    pred = predict_training(model, plan, swapped.cluster())
    capex = swapped.capex()
    delta = None if capex.usd is None or base_capex_usd is None else capex.usd - base_capex_usd
    step = float(pred.step_time_s)
    return SwapDelta(swap.label, step, base_step / step, delta, bool(pred.memory.fits), capex.missing)


def what_if(model: ModelSpec, plan: ParallelPlan, scenario: Scenario, factor: float = 2.0,
            swaps: tuple[Swap, ...] = ()) -> WhatIf:
    """Base prediction, layer deltas, priced swaps and the verdict for one plan on one cluster."""
    if not factor > 1.0 or factor == float("inf"):
        raise SpecError(f"must be a finite speed-up > 1 (2 = twice as fast), got {factor}", field="--factor")
    base = predict_training(model, plan, scenario.cluster())
    base_capex = scenario.capex()
    base_step = float(base.step_time_s)
    layers = layer_deltas(model, plan, scenario, base_step, factor)
    deltas = tuple(swap_delta(model, plan, scenario, base_step, base_capex.usd, s) for s in swaps)
    return WhatIf(base, base_capex.usd, factor, layers, deltas,
                  verdict(base, factor, layers, deltas, base_capex.usd, base_capex.missing))
