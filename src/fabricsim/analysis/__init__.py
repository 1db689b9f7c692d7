"""Analysis of a training step: what-if deltas per layer (compute, HBM, NVLink, PCIe, network) and for named cluster
swaps priced from the bill of materials, and the verdict of where the next dollar goes."""

from fabricsim.analysis.deltas import LayerDelta, SwapDelta
from fabricsim.analysis.scenario import Capex, Scenario
from fabricsim.analysis.swaps import SWAP_KEYS, Swap, apply_swap, parse_swap
from fabricsim.analysis.variants import VARIED_LAYERS, faster_catalog
from fabricsim.analysis.verdict import Verdict, verdict
from fabricsim.analysis.whatif import WhatIf, layer_deltas, swap_delta, varied_layers, what_if

__all__ = [
    "SWAP_KEYS",
    "VARIED_LAYERS",
    "Capex",
    "LayerDelta",
    "Scenario",
    "Swap",
    "SwapDelta",
    "Verdict",
    "WhatIf",
    "apply_swap",
    "faster_catalog",
    "layer_deltas",
    "parse_swap",
    "swap_delta",
    "varied_layers",
    "verdict",
    "what_if",
]
