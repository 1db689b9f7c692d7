"""Serving: a discrete-event continuous-batching simulator over request streams (Poisson or a trace), priced by
the inference step cost; replicas, prefill/decode disaggregation and latency percentiles.
"""

from fabricsim.serving.config import SchedulerConfig, ServingLayout, StepCost, engine_scheduler_config
from fabricsim.serving.requests import LengthDist, RequestTrace, load_request_trace, poisson_requests
from fabricsim.serving.result import ServingResult
from fabricsim.serving.simulate import simulate_serving

__all__ = [
    "LengthDist",
    "RequestTrace",
    "SchedulerConfig",
    "ServingLayout",
    "ServingResult",
    "StepCost",
    "engine_scheduler_config",
    "load_request_trace",
    "poisson_requests",
    "simulate_serving",
]
