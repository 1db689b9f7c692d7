"""Hugging Face ``config.json`` import: reading the file, mapping each architecture family to a ``ModelSpec``,
and the configs shipped in ``model/data/hf``."""
