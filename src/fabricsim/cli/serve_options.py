"""The serving options `infer` and `size --inference` share, as the run spec `fabricsim.api.specs.InferRun`
declares them (generated into `cli.spec_options`)."""

from __future__ import annotations

from typing import Any

from fabricsim.cli.spec_options import DECODE_OPTIONS, KV_TIER_OPTIONS, PREFIX_OPTIONS, SERVE_OPTIONS

SERVE: dict[str, tuple[Any, Any]] = SERVE_OPTIONS
PREFIX: dict[str, tuple[Any, Any]] = PREFIX_OPTIONS
DECODE: dict[str, tuple[Any, Any]] = DECODE_OPTIONS
KV_TIER: dict[str, tuple[Any, Any]] = KV_TIER_OPTIONS
