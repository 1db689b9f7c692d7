"""Typed run specs: each command's options declared once, as fields of pydantic models (`opt`), from which
`fabricsim.api.specs.generate` writes the CLI options, the API functions and the options reference page. Imported only
where a run validates its options or the generator runs (pydantic stays out of `fabricsim --help`)."""

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
