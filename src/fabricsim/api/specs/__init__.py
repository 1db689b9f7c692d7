"""Typed run specs: each command's options declared once, as fields of pydantic models (`opt`), from which
`fabricsim.api.specs.generate` writes the CLI options, the API functions and the options reference page. The names
load on first use (a run validates its options with its own spec alone; pydantic stays out of `fabricsim --help`)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fabricsim.api.specs.cluster import ROUTING_HELP, ClusterOptions, DesignOptions, FlowOptions, TopologyStorage
    from fabricsim.api.specs.collective import CollectiveOptions, CollectiveRun
    from fabricsim.api.specs.fields import ApiFunction, OptionGroup, field_cli, opt
    from fabricsim.api.specs.goodput import STORAGE_HELP, GoodputOptions, GoodputSwitch
    from fabricsim.api.specs.plan import PlanOptions
    from fabricsim.api.specs.registry import GROUPS, RUNS
    from fabricsim.api.specs.runs import (
        CalibrationOptions,
        TopologyCalibration,
        TopologyRun,
        TrainRun,
        WhatIfOptions,
        WhatIfRun,
    )
    from fabricsim.api.specs.serving import InferRun, ServingPlanOptions
    from fabricsim.api.specs.shared import FABRIC_HELP
    from fabricsim.api.specs.sizing import SizeRun

_MODULES = {
    "ApiFunction": "fabricsim.api.specs.fields",
    "CalibrationOptions": "fabricsim.api.specs.runs",
    "ClusterOptions": "fabricsim.api.specs.cluster",
    "CollectiveOptions": "fabricsim.api.specs.collective",
    "CollectiveRun": "fabricsim.api.specs.collective",
    "DesignOptions": "fabricsim.api.specs.cluster",
    "FABRIC_HELP": "fabricsim.api.specs.shared",
    "FlowOptions": "fabricsim.api.specs.cluster",
    "GROUPS": "fabricsim.api.specs.registry",
    "GoodputOptions": "fabricsim.api.specs.goodput",
    "GoodputSwitch": "fabricsim.api.specs.goodput",
    "InferRun": "fabricsim.api.specs.serving",
    "OptionGroup": "fabricsim.api.specs.fields",
    "PlanOptions": "fabricsim.api.specs.plan",
    "ROUTING_HELP": "fabricsim.api.specs.cluster",
    "RUNS": "fabricsim.api.specs.registry",
    "STORAGE_HELP": "fabricsim.api.specs.goodput",
    "ServingPlanOptions": "fabricsim.api.specs.serving",
    "SizeRun": "fabricsim.api.specs.sizing",
    "TopologyCalibration": "fabricsim.api.specs.runs",
    "TopologyRun": "fabricsim.api.specs.runs",
    "TopologyStorage": "fabricsim.api.specs.cluster",
    "TrainRun": "fabricsim.api.specs.runs",
    "WhatIfOptions": "fabricsim.api.specs.runs",
    "WhatIfRun": "fabricsim.api.specs.runs",
    "field_cli": "fabricsim.api.specs.fields",
    "opt": "fabricsim.api.specs.fields",
}
"""Each exported name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(import_module(_MODULES[name]), name)
    raise AttributeError(f"module 'fabricsim.api.specs' has no attribute {name!r}")

__all__ = [
    "FABRIC_HELP",
    "GROUPS",
    "ROUTING_HELP",
    "RUNS",
    "STORAGE_HELP",
    "ApiFunction",
    "CalibrationOptions",
    "ClusterOptions",
    "CollectiveOptions",
    "CollectiveRun",
    "DesignOptions",
    "FlowOptions",
    "GoodputOptions",
    "GoodputSwitch",
    "InferRun",
    "OptionGroup",
    "PlanOptions",
    "ServingPlanOptions",
    "SizeRun",
    "TopologyCalibration",
    "TopologyRun",
    "TopologyStorage",
    "TrainRun",
    "WhatIfOptions",
    "WhatIfRun",
    "field_cli",
    "opt",
]
