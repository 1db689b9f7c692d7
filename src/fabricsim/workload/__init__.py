"""Deprecated: ``fabricsim.workload`` was split into ``fabricsim.model``, ``fabricsim.comm``, ``fabricsim.training``,
``fabricsim.inference`` and ``fabricsim.serving`` (see the README's architecture section).

This module keeps the names the old package exported working for one release: each resolves to its new home and
warns once with a ``DeprecationWarning`` naming it. The old submodules (``fabricsim.workload.training`` and the
rest) are gone; import from the new packages.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_MOVED: dict[str, str] = {
    **dict.fromkeys(("ModelSpec", "MoESpec", "ParameterCount", "Preset", "list_presets", "load_model",
                     "load_model_file", "preset", "ForwardFlops", "forward_flops", "megatron_step_flops",
                     "achievable_flops_per_s", "compute_time", "default_matmul_efficiency", "flops_utilization",
                     "hbm_time", "matmul_efficiency"), "fabricsim.model"),
    **dict.fromkeys(("ParallelPlan", "check_plan", "stage_layers", "DEFAULT_MBS", "place", "Placement",
                     "rank_groups", "domains_spanned", "leaves_nvlink", "placement_warnings", "node_of",
                     "StepFlops", "step_flops", "stage_microbatch_flops", "memory_report", "stage_memory",
                     "MemoryReport"), "fabricsim.training"),
}

__all__ = sorted(_MOVED)


def __getattr__(name: str) -> Any:
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'fabricsim.workload' has no attribute {name!r} (the package was split into "
                             "fabricsim.model, comm, training, inference and serving)")
    warnings.warn(f"fabricsim.workload.{name} moved to {home}.{name}; fabricsim.workload goes in the next release",
                  DeprecationWarning, stacklevel=2)
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # warn once: later look-ups find it here
    return value
