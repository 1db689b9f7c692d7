"""fabricsim: which interconnect layer bounds a GPU workload, and what is the cheapest cluster that meets a target.

The Python API is one function per CLI command, loaded on first use so that ``import fabricsim`` stays light:
``fabricsim.train``, ``whatif``, ``infer``, ``size``, ``sweep``, ``collective`` and ``topology`` (also ``topo``, as the
command; see ``fabricsim.api``).
"""

import importlib
from typing import Any

from fabricsim.errors import SpecError

__version__ = "0.1.0"

# The API's names, resolved from fabricsim.api on first access (PEP 562).
_API_NAMES = frozenset({
    "train", "whatif", "infer", "size", "sweep", "collective", "topology", "topo", "Result", "TrainResult",
    "WhatIfResult", "InferResult", "SizeResult", "SweepResult", "CollectiveResult", "TopologyResult",
})

__all__ = ["SpecError", "__version__", *sorted(_API_NAMES)]


def __getattr__(name: str) -> Any:
    """``fabricsim.train`` and the other API names, imported from ``fabricsim.api`` when first used."""
    if name == "topology":  # the subpackage, callable as the API function (fabricsim.lazy.callable_package)
        return importlib.import_module("fabricsim.topology")
    if name in _API_NAMES:  # imported by name, not statement: fabricsim.api is a layer above every other package
        return getattr(importlib.import_module("fabricsim.api"), name)
    raise AttributeError(f"module 'fabricsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API_NAMES})
