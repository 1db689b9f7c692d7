"""Sizing for serving: the spec, the per-replica screen, disaggregated prefill/decode pools and the search."""
