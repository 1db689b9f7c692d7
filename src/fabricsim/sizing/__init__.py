"""Sizing: search clusters (system x fabric x oversubscription x size) and parallel plans for the cheapest (or
fastest, or least energy) way to train a model on a token budget, under deadline, budget and power constraints.

Public API: ``SizingSpec``, ``Knobs``, ``size``, ``sweep`` (every plan of a space, one table), ``SizingResult``,
``evaluate_chunk``, ``ClusterChoice``, ``clusters``, ``pareto``, ``rank``, ``sizing_defaults``; parsers
``parse_int_range``, ``parse_list``, ``parse_years``, ``parse_money``, ``parse_power_cap``, ``parse_power_points``;
``unpriced_note`` (the catalog parts a cluster lacks a price or power for). Serving (``size --inference``):
``InferenceSizingSpec``, ``size_inference``, ``InferenceSizingResult``.
"""

from fabricsim.sizing.defaults import DEFAULT_FABRIC_KINDS, DEFAULT_GPUS, sizing_defaults
from fabricsim.sizing.evaluate import ChunkResult, evaluate_chunk, plan_for
from fabricsim.sizing.explain import unpriced_note
from fabricsim.sizing.grid import Sweep, sweep
from fabricsim.sizing.inference.kvtier import check_tier_spec
from fabricsim.sizing.inference.search import InferenceSizingResult, size_inference
from fabricsim.sizing.inference.spec import InferenceSizingSpec
from fabricsim.sizing.plot import plot_pareto
from fabricsim.sizing.rank import pareto, rank
from fabricsim.sizing.result import SizingResult, entries
from fabricsim.sizing.search import size
from fabricsim.sizing.space import ClusterChoice, Shape, clusters, priced_systems
from fabricsim.sizing.spec import (
    DEFAULT_FABRICS,
    Knobs,
    SizingSpec,
    check_plan_value,
    overlay_catalog,
    parse_int_range,
    parse_list,
    parse_money,
    parse_power_cap,
    parse_power_points,
    parse_years,
)

__all__ = [
    "DEFAULT_FABRICS",
    "DEFAULT_FABRIC_KINDS",
    "DEFAULT_GPUS",
    "ChunkResult",
    "ClusterChoice",
    "InferenceSizingResult",
    "InferenceSizingSpec",
    "Knobs",
    "Shape",
    "SizingResult",
    "SizingSpec",
    "Sweep",
    "check_plan_value",
    "check_tier_spec",
    "clusters",
    "entries",
    "evaluate_chunk",
    "overlay_catalog",
    "pareto",
    "parse_int_range",
    "parse_list",
    "parse_money",
    "parse_power_cap",
    "parse_power_points",
    "parse_years",
    "plan_for",
    "plot_pareto",
    "priced_systems",
    "rank",
    "size",
    "size_inference",
    "sizing_defaults",
    "sweep",
    "unpriced_note",
]
