"""Packaged cost and energy defaults of `size` (amortisation, PUE, electricity price), each with its source."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

YEAR_S = 365.25 * 86400.0


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
