"""Packaged workload data: model presets and the compute-efficiency default (YAML)."""
