"""How bytes move over a topology: per-path alpha-beta (congestion-unaware), link-load (congestion-aware bound) and
the flow-level simulator (max-min fair sharing, event-driven) behind one protocol, and the timing of collective
schedules on them."""

from fabricsim.network.budget import (
    FlowEstimate,
    check_memory,
    estimate_flow_run,
    flow_count_bound,
    flow_progress,
)
from fabricsim.network.control import FabricControl, fabric_control
from fabricsim.network.flownet import FlowSimNetwork, routed_flowset, stage_timings, time_schedule_flow
from fabricsim.network.flowroute import check_routing
from fabricsim.network.flowsim import FlowResult, FlowSet, simulate
from fabricsim.network.flowstats import finish_quantiles, weighted_quantiles
from fabricsim.network.maxmin import FloatArray, IntArray
from fabricsim.network.models import (
    AnalyticalNetwork,
    LinkLoadNetwork,
    NetworkModel,
    PhaseLike,
    PhaseTiming,
    schedule_time,
)
from fabricsim.network.symmetry import LinkKinds, expand_links, link_kinds, representative_gpus, symmetric_flowset

__all__ = [
    "AnalyticalNetwork",
    "FabricControl",
    "FloatArray",
    "FlowEstimate",
    "FlowResult",
    "FlowSet",
    "FlowSimNetwork",
    "IntArray",
    "LinkKinds",
    "LinkLoadNetwork",
    "NetworkModel",
    "PhaseLike",
    "PhaseTiming",
    "check_memory",
    "check_routing",
    "estimate_flow_run",
    "expand_links",
    "fabric_control",
    "finish_quantiles",
    "flow_count_bound",
    "flow_progress",
    "link_kinds",
    "representative_gpus",
    "routed_flowset",
    "schedule_time",
    "simulate",
    "stage_timings",
    "symmetric_flowset",
    "time_schedule_flow",
    "weighted_quantiles",
]
