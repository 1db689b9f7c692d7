"""Packaged serving data: the per-request lengths of benchmark datasets (YAML)."""
