"""Pydantic field types that read unit strings from YAML (``80GiB``, ``400Gb/s``) into SI floats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from fabricsim import units


def _reader(parse: Callable[[Any], float | int]) -> BeforeValidator:
    def read(value: Any) -> Any:
        if value is None:
            return None
        return parse(value)

    return BeforeValidator(read)


# capacities and rates must be positive (a 0-byte HBM or a 0 B/s link divides by zero later) and finite
Bytes = Annotated[float, _reader(units.parse_size), Field(gt=0, allow_inf_nan=False)]
BytesPerS = Annotated[float, _reader(units.parse_rate), Field(gt=0, allow_inf_nan=False)]
FlopPerS = Annotated[float, _reader(units.parse_flops), Field(gt=0, allow_inf_nan=False)]
Seconds = Annotated[float, _reader(units.parse_duration), Field(ge=0, allow_inf_nan=False)]
Watts = Annotated[float, _reader(units.parse_power), Field(ge=0, allow_inf_nan=False)]
Usd = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0, le=1)]
