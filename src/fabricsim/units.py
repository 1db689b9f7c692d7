"""Parse and print sizes, rates, durations, counts and FLOP rates; SI base units (bytes, s, bytes/s) inside.

Conventions (as nccl-tests and vendors use them):
- buffer sizes: a bare suffix ``K/M/G/T`` or ``KiB/MiB/GiB/TiB`` is a power of 1024 (``4K`` = 4096 bytes);
  ``KB/MB/GB/TB`` with a capital B are powers of 1000 (vendor capacities, e.g. ``80GB``).
- rates: ``Gb/s`` counts bits, ``GB/s`` bytes, both decimal (``400Gb/s`` = 50e9 bytes/s); ``GiB/s`` is binary.
- durations: ``ns/us/ms/s/m/h/d`` (``30d`` = 2,592,000 s).
- counts (tokens, parameters): ``K/M/B/G/T`` are powers of 1000 (``15T`` tokens = 15e12).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from fabricsim.errors import SpecError

_NUMBER = r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_BIN = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
_DEC = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}

_SIZE_RE = re.compile(rf"^{_NUMBER}\s*(?P<prefix>[KMGTP]?)(?P<suffix>iB|B|)$", re.IGNORECASE)
_RATE_RE = re.compile(rf"^{_NUMBER}\s*(?P<prefix>[KMGTP]?)(?P<unit>ib|b)(?:/s|ps)$", re.IGNORECASE)
_FLOPS_RE = re.compile(rf"^{_NUMBER}\s*(?P<prefix>[KMGTP]?)(?:FLOP/s|FLOPS)$", re.IGNORECASE)
_DURATION_RE = re.compile(rf"^{_NUMBER}\s*(?P<unit>ns|us|µs|ms|s|m|min|h|d|w)?$")
_COUNT_RE = re.compile(rf"^{_NUMBER}\s*(?P<prefix>[KMBGT]?)$", re.IGNORECASE)

_DURATION_S = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "": 1.0,
    "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0,
}
_COUNT = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def _fail(kind: str, text: object, example: str, field: str | None) -> SpecError:
    return SpecError(f"cannot read {text!r} as a {kind} (e.g. {example})", field=field)


def _finite_nonneg(value: float, kind: str, text: object, example: str, field: str | None) -> float:
    if not math.isfinite(value) or value < 0:
        raise _fail(kind, text, example, field)
    return value


def _number(value: object, kind: str, example: str, field: str | None) -> float | None:
    """A plain number (already in SI units) passes through; a string is parsed by the caller."""
    if isinstance(value, bool):
        raise _fail(kind, value, example, field)
    if isinstance(value, int | float):
        return _finite_nonneg(float(value), kind, value, example, field)
    if not isinstance(value, str):
        raise _fail(kind, value, example, field)
    return None


def parse_size(value: str | int | float, *, field: str | None = None) -> int:
    """Bytes from ``8``, ``4K``, ``1G``, ``64MiB`` (binary) or ``80GB`` (decimal)."""
    example = "'8', '4K', '1G', '64MiB', '80GB'"
    number = _number(value, "size", example, field)
    if number is not None:
        if number != int(number):
            raise _fail("size", value, example, field)
        return int(number)
    m = _SIZE_RE.match(str(value).strip())
    if not m:
        raise _fail("size", value, example, field)
    prefix, suffix = m["prefix"].upper(), m["suffix"]
    if suffix not in ("", "B", "iB"):
        raise _fail("size", value, example, field)
    scale = int(_DEC[prefix]) if suffix == "B" and prefix else _BIN[prefix]
    exact = Fraction(m["num"]) * scale  # exact: '9007199254740993' must not lose its last digit to a float
    if exact.denominator != 1:
        raise SpecError(f"size {value!r} is not a whole number of bytes", field=field)
    return int(exact)


def parse_rate(value: str | int | float, *, field: str | None = None) -> float:
    """Bytes/s from ``400Gb/s`` (bits), ``50GB/s``, ``1.8TB/s``, ``25GiB/s``; a number is bytes/s."""
    example = "'400Gb/s', '50GB/s', '1.8TB/s'"
    number = _number(value, "rate", example, field)
    if number is not None:
        return number
    m = _RATE_RE.match(str(value).strip())
    if not m:
        raise _fail("rate", value, example, field)
    unit = m["unit"]
    prefix = m["prefix"].upper()
    if unit.lower() == "ib":
        if unit != "iB":
            raise _fail("rate", value, example, field)
        scale = float(_BIN[prefix])
    elif unit == "b":
        scale = _DEC[prefix] / 8.0
    elif unit == "B":
        scale = _DEC[prefix]
    else:
        raise _fail("rate", value, example, field)
    return _finite_nonneg(float(m["num"]) * scale, "rate", value, example, field)


def parse_flops(value: str | int | float, *, field: str | None = None) -> float:
    """FLOP/s from ``989TFLOP/s`` or ``2.25PFLOPS``; a number is FLOP/s."""
    example = "'989TFLOP/s', '2.25PFLOPS'"
    number = _number(value, "FLOP rate", example, field)
    if number is not None:
        return number
    m = _FLOPS_RE.match(str(value).strip())
    if not m:
        raise _fail("FLOP rate", value, example, field)
    return _finite_nonneg(float(m["num"]) * _DEC[m["prefix"].upper()], "FLOP rate", value, example, field)


def parse_duration(value: str | int | float, *, field: str | None = None) -> float:
    """Seconds from ``90s``, ``30d``, ``1.5h``, ``150ns``, ``2us``; a number is seconds."""
    example = "'90s', '30d', '150ns'"
    number = _number(value, "duration", example, field)
    if number is not None:
        return number
    m = _DURATION_RE.match(str(value).strip())
    if not m:
        raise _fail("duration", value, example, field)
    seconds = float(m["num"]) * _DURATION_S[m["unit"] or ""]
    return _finite_nonneg(seconds, "duration", value, example, field)


def parse_count(value: str | int | float, *, field: str | None = None) -> float:
    """A count (tokens, parameters) from ``15T``, ``70B``, ``1.5M``: decimal prefixes."""
    example = "'15T', '70B', '1.5M'"
    number = _number(value, "count", example, field)
    if number is not None:
        return number
    m = _COUNT_RE.match(str(value).strip())
    if not m:
        raise _fail("count", value, example, field)
    return _finite_nonneg(float(m["num"]) * _COUNT[m["prefix"].upper()], "count", value, example, field)


def parse_power(value: str | int | float, *, field: str | None = None) -> float:
    """Watts from ``700W``, ``1.2kW``, ``120kW``; a number is watts."""
    example = "'700W', '10.2kW'"
    number = _number(value, "power", example, field)
    if number is not None:
        return number
    m = re.match(rf"^{_NUMBER}\s*(?P<prefix>[kKM]?)W$", str(value).strip())
    if not m:
        raise _fail("power", value, example, field)
    return _finite_nonneg(float(m["num"]) * _DEC[m["prefix"].upper()], "power", value, example, field)


def format_size(num_bytes: int | float) -> str:
    """``4096`` -> ``4K``; the largest power-of-1024 suffix that divides exactly (nccl-tests style)."""
    n = int(num_bytes)
    if n != num_bytes or n < 0:
        raise SpecError(f"size {num_bytes!r} is not a whole, non-negative number of bytes")
    for suffix in ("P", "T", "G", "M", "K"):
        scale = _BIN[suffix]
        if n and n % scale == 0:
            return f"{n // scale}{suffix}"
    return str(n)


def _scaled(value: float, scales: list[tuple[str, float]], unit: str, digits: int) -> str:
    for prefix, scale in scales:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g}{prefix}{unit}"
    return f"{value:.{digits}g}{unit}"


_DEC_SCALES = [("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)]


def format_rate(bytes_per_s: float, *, bits: bool = False, digits: int = 4) -> str:
    """``50e9`` -> ``50GB/s`` (or ``400Gb/s`` with ``bits``)."""
    if bits:
        return _scaled(bytes_per_s * 8, _DEC_SCALES, "b/s", digits)
    return _scaled(bytes_per_s, _DEC_SCALES, "B/s", digits)


def format_bytes(num_bytes: float, *, digits: int = 4) -> str:
    """Human-readable decimal bytes: ``80e9`` -> ``80GB``."""
    return _scaled(num_bytes, _DEC_SCALES, "B", digits)


def format_flops(flops_per_s: float, *, digits: int = 4) -> str:
    """``989.4e12`` -> ``989.4TFLOP/s``."""
    return _scaled(flops_per_s, _DEC_SCALES, "FLOP/s", digits)


def format_usd(usd: float | None) -> str:
    """Dollars for a table cell: ``2.5e6`` -> ``$2.50M``, ``12345`` -> ``$12,345``; ``?`` when unknown."""
    if usd is None:
        return "?"
    return f"${usd / 1e6:,.2f}M" if usd >= 1e5 else f"${usd:,.0f}"


def format_duration(seconds: float, *, digits: int = 4) -> str:
    """Seconds in the most readable unit: ``1.5e-6`` -> ``1.5us``, ``68.34`` -> ``1.139min`` (never ``m``, which
    reads as milli), ``86400`` -> ``1d``."""
    if seconds >= 86400:
        return f"{seconds / 86400:.{digits}g}d"
    if seconds >= 3600:
        return f"{seconds / 3600:.{digits}g}h"
    if seconds >= 60:
        return f"{seconds / 60:.{digits}g}min"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.{digits}g}{unit}"
    return f"{seconds / 1e-9:.{digits}g}ns"
