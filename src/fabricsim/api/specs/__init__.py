"""Typed run specs: each command's options declared once, as fields of pydantic models (`opt`), from which
`fabricsim.api.specs.generate` writes the CLI options, the API functions and the options reference page. The names
load on first use (a run validates its options with its own spec alone; pydantic stays out of `fabricsim --help`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fabricsim.lazy import lazy_exports

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
    from fabricsim.api.specs.sizing import PlanSpaceOptions, SizeRun, SweepRun

# Each exported name -> the module that defines it, imported on first use.
__getattr__ = lazy_exports(__name__, {
    **dict.fromkeys(("ClusterOptions", "DesignOptions", "FlowOptions", "ROUTING_HELP", "TopologyStorage"),
                    "fabricsim.api.specs.cluster"),
    **dict.fromkeys(("CollectiveOptions", "CollectiveRun"), "fabricsim.api.specs.collective"),
    **dict.fromkeys(("ApiFunction", "OptionGroup", "field_cli", "opt"), "fabricsim.api.specs.fields"),
    **dict.fromkeys(("GoodputOptions", "GoodputSwitch", "STORAGE_HELP"), "fabricsim.api.specs.goodput"),
    **dict.fromkeys(("PlanOptions",), "fabricsim.api.specs.plan"),
    **dict.fromkeys(("GROUPS", "RUNS"), "fabricsim.api.specs.registry"),
    **dict.fromkeys(("CalibrationOptions", "TopologyCalibration", "TopologyRun", "TrainRun", "WhatIfOptions",
                     "WhatIfRun"), "fabricsim.api.specs.runs"),
    **dict.fromkeys(("InferRun", "ServingPlanOptions"), "fabricsim.api.specs.serving"),
    **dict.fromkeys(("FABRIC_HELP",), "fabricsim.api.specs.shared"),
    **dict.fromkeys(("PlanSpaceOptions", "SizeRun", "SweepRun"), "fabricsim.api.specs.sizing"),
})

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
    "PlanSpaceOptions",
    "ServingPlanOptions",
    "SizeRun",
    "SweepRun",
    "TopologyCalibration",
    "TopologyRun",
    "TopologyStorage",
    "TrainRun",
    "WhatIfOptions",
    "WhatIfRun",
    "field_cli",
    "opt",
]
