"""How bytes move over a topology: per-path alpha-beta (congestion-unaware) and link-load (congestion-aware bound)
network models behind one protocol, and the timing of collective schedules on them."""

from fabricsim.network.models import (
    AnalyticalNetwork,
    LinkLoadNetwork,
    NetworkModel,
    PhaseLike,
    PhaseTiming,
    schedule_time,
)

__all__ = ["AnalyticalNetwork", "LinkLoadNetwork", "NetworkModel", "PhaseLike", "PhaseTiming", "schedule_time"]
