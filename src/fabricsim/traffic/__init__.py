"""Jobs and background traffic on a cluster, simulated at flow level: placements, patterns (collectives through
their schedules), the jobs YAML, per-job metrics and link utilisation. Sits above `collectives` and `network`."""

from fabricsim.traffic.jobs import (
    BackgroundSpec,
    JobSpec,
    Traffic,
    build_traffic,
    check_pattern,
    check_seed,
    pattern_flow_count,
    traffic_classes,
)
from fabricsim.traffic.run import TrafficRun, job_metrics, link_summary, link_tiers, run_traffic, slowdowns, utilisation
from fabricsim.traffic.spec import JobsFile, load_jobs, load_jobs_file

__all__ = [
    "BackgroundSpec",
    "JobSpec",
    "JobsFile",
    "Traffic",
    "TrafficRun",
    "build_traffic",
    "check_pattern",
    "check_seed",
    "job_metrics",
    "link_summary",
    "link_tiers",
    "load_jobs",
    "load_jobs_file",
    "pattern_flow_count",
    "run_traffic",
    "slowdowns",
    "traffic_classes",
    "utilisation",
]
