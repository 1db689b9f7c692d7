"""Packaged cost and energy defaults of `size` (amortisation, PUE, electricity price), each with its source."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

YEAR_S = 365.25 * 86400.0
DEFAULT_GPUS = "1024..65536"
"""GPU counts `size` searches when neither --gpus nor --nodes is given: the powers of two 1k-64k (issue 48; before,
1024-16384 without the range's whole units in between)"""
DEFAULT_FABRIC_KINDS = ("fat-tree", "rail-only", "2-plane")
"""scale-out designs `size` searches when --fabric-kinds is not given (issue 48; before, fat-tree only)"""


@dataclass(frozen=True)
class Default:
    """One free parameter: its value and where it comes from."""

    value: float
    source: str


@lru_cache(maxsize=1)
def sizing_defaults() -> dict[str, Default]:
    """The packaged defaults (data/defaults.yaml), read once."""
    from fabricsim.inputs import load_packaged_yaml

    text = resources.files("fabricsim.sizing").joinpath("data/defaults.yaml").read_text()
    data = load_packaged_yaml(text, "defaults.yaml")["defaults"]
    return {k: Default(float(v["value"]), " ".join(str(v["source"]).split())) for k, v in data.items()}
