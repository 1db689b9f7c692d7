"""Serving: a discrete-event continuous-batching simulator over request streams (Poisson or a trace), priced by
the inference step cost; replicas, prefill/decode disaggregation and latency percentiles.
"""

from fabricsim.serving.config import SchedulerConfig, ServingLayout, StepCost, engine_scheduler_config
from fabricsim.serving.datasets import DatasetLengths, length_dataset, length_datasets
from fabricsim.serving.requests import LengthDist, RequestTrace, all_at_once, load_request_trace, poisson_requests
from fabricsim.serving.result import ServingResult
from fabricsim.serving.simulate import simulate_serving

__all__ = [
    "DatasetLengths",
    "LengthDist",
    "RequestTrace",
    "SchedulerConfig",
    "ServingLayout",
    "ServingResult",
    "StepCost",
    "all_at_once",
    "engine_scheduler_config",
    "length_dataset",
    "length_datasets",
    "load_request_trace",
    "poisson_requests",
    "simulate_serving",
]
