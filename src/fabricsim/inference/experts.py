"""Routed experts under a step's tokens (``fabricsim.model.experts``, shared with the training model)."""

from __future__ import annotations

from fabricsim.model import (
    ExpertLoad,
    expected_max_normal,
    expert_load_peak,
    expert_load_terms,
    touched_experts,
)

__all__ = ["ExpertLoad", "expected_max_normal", "expert_load_peak", "expert_load_terms", "touched_experts"]
