"""Every run spec with an API function and every group of options, in the order `generate` writes them."""

from __future__ import annotations

from fabricsim.api.specs.cluster import (
    ClusterOptions,
    DegradeOptions,
    DesignOptions,
    FlowOptions,
    TopologyStorage,
    TrafficOptions,
)
from fabricsim.api.specs.collective import CollectiveOptions, CollectiveRun
from fabricsim.api.specs.fields import OptionGroup
from fabricsim.api.specs.goodput import GoodputOptions, GoodputSwitch
from fabricsim.api.specs.plan import PlanOptions
from fabricsim.api.specs.runs import (
    CalibrationOptions,
    TopologyCalibration,
    TopologyRun,
    TrainRun,
    WhatIfOptions,
    WhatIfRun,
)
from fabricsim.api.specs.serving import (
    DecodeOptions,
    EngineOptions,
    InferRun,
    KvTierOptions,
    LaunchOptions,
    PrefixOptions,
    ServeOptions,
    ServingPlanOptions,
)
from fabricsim.api.specs.sizing import PlanSpaceOptions, SizeRun, SizeSearchOptions, SizeServingOptions, SweepRun
from fabricsim.api.specs.trace import TraceMergeOptions

RUNS: tuple[type[OptionGroup], ...] = (TrainRun, WhatIfRun, TopologyRun, CollectiveRun, InferRun,
                                       SizeRun, SweepRun)
"""Every run spec with an API function (`fabricsim.api.specs.generate` writes them in this order)."""
GROUPS: tuple[type[OptionGroup], ...] = (PlanOptions, DesignOptions, FlowOptions, DegradeOptions, GoodputOptions,
                                         GoodputSwitch,
                                         CalibrationOptions, WhatIfOptions, ClusterOptions, TopologyStorage,
                                         TopologyCalibration, CollectiveOptions, ServingPlanOptions, ServeOptions,
                                         EngineOptions, PrefixOptions, KvTierOptions, DecodeOptions,
                                         LaunchOptions,
                                         PlanSpaceOptions, SizeSearchOptions, SizeServingOptions, TrafficOptions,
                                         TraceMergeOptions)
"""Every group of options, in the order of the reference page."""
