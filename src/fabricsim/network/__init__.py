"""How bytes move over a topology: per-path alpha-beta (congestion-unaware), link-load (congestion-aware bound) and
the flow-level simulator (max-min fair sharing, event-driven) behind one protocol, and the timing of collective
schedules on them."""

from fabricsim.network.flownet import FlowSimNetwork, time_schedule_flow
from fabricsim.network.models import (
    AnalyticalNetwork,
    LinkLoadNetwork,
    NetworkModel,
    PhaseLike,
    PhaseTiming,
    schedule_time,
)

__all__ = ["AnalyticalNetwork", "FlowSimNetwork", "LinkLoadNetwork", "NetworkModel", "PhaseLike", "PhaseTiming",
           "schedule_time", "time_schedule_flow"]
