"""Packaged inference data: the serving engines' free parameters, each with its source (YAML)."""
