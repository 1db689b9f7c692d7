"""Packaged model data: model presets and the compute-efficiency defaults (YAML)."""
