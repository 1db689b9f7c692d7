"""Jobs and background traffic on a cluster, simulated at flow level: placements, patterns (collectives through
their schedules), the jobs YAML, per-job metrics and link utilisation. Sits above `collectives` and `network`."""
