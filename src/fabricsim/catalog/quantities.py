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


Bytes = Annotated[float, _reader(units.parse_size), Field(ge=0)]
BytesPerS = Annotated[float, _reader(units.parse_rate), Field(ge=0)]
FlopPerS = Annotated[float, _reader(units.parse_flops), Field(ge=0)]
Seconds = Annotated[float, _reader(units.parse_duration), Field(ge=0)]
Watts = Annotated[float, _reader(units.parse_power), Field(ge=0)]
Usd = Annotated[float, Field(ge=0)]
Fraction = Annotated[float, Field(gt=0, le=1)]
