"""Analysis of a training step: what-if deltas per layer (compute, HBM, NVLink, PCIe, network) and for named cluster
swaps priced from the bill of materials, the verdict of where the next dollar goes, and a measured step (a
profiler trace) against the prediction."""

from fabricsim.analysis.deltas import LayerDelta, SwapDelta
from fabricsim.analysis.scenario import Capex, Scenario
from fabricsim.analysis.swaps import Swap, apply_swap, parse_swap
from fabricsim.analysis.trace_compare import CompareRow, MeasuredCollective, MeasuredStep, compare_step
from fabricsim.analysis.variants import faster_catalog
from fabricsim.analysis.verdict import Verdict, trade_phrase, verdict
from fabricsim.analysis.whatif import WhatIf, what_if

__all__ = [
    "Capex",
    "CompareRow",
    "LayerDelta",
    "MeasuredCollective",
    "MeasuredStep",
    "Scenario",
    "Swap",
    "SwapDelta",
    "Verdict",
    "WhatIf",
    "apply_swap",
    "compare_step",
    "faster_catalog",
    "parse_swap",
    "trade_phrase",
    "verdict",
    "what_if",
]
