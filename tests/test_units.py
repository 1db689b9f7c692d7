"""Unit parsing and formatting: round trips and clear errors."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricsim import units
from fabricsim.errors import SpecError


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8", 8), ("4K", 4096), ("1G", 2**30), ("64MiB", 64 * 2**20), ("80GB", 80_000_000_000), ("1.5K", 1536),
     ("16G", 16 * 2**30), ("0", 0), (1024, 1024)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert units.parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("400Gb/s", 50e9), ("50GB/s", 50e9), ("1.8TB/s", 1.8e12), ("25GiB/s", 25 * 2**30), ("200Gbps", 25e9),
     (12.5, 12.5)],
)
def test_parse_rate(text: str, expected: float) -> None:
    assert units.parse_rate(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("90s", 90.0), ("30d", 30 * 86400.0), ("1.5h", 5400.0), ("150ns", 150e-9), ("2us", 2e-6), ("5m", 300.0)],
)
def test_parse_duration(text: str, expected: float) -> None:
    assert units.parse_duration(text) == pytest.approx(expected)


def test_parse_counts_and_flops() -> None:
    assert units.parse_count("15T") == 15e12
    assert units.parse_count("70B") == 70e9
    assert units.parse_flops("989.4TFLOP/s") == pytest.approx(989.4e12)
    assert units.parse_flops("2.25PFLOPS") == pytest.approx(2.25e15)
    assert units.parse_power("10.2kW") == pytest.approx(10200.0)


@pytest.mark.parametrize("bad", ["12Q", "-1G", "abc", "", "1.2.3G", "G", "4Kb", "nan", "inf"])
def test_bad_sizes_raise(bad: str) -> None:
    with pytest.raises(SpecError):
        units.parse_size(bad)


@pytest.mark.parametrize(
    ("parser", "bad"),
    [(units.parse_rate, "12Q"), (units.parse_rate, "-1GB/s"), (units.parse_rate, "abc"), (units.parse_rate, "50GB"),
     (units.parse_duration, "12Q"), (units.parse_duration, "-1s"), (units.parse_duration, "abc"),
     (units.parse_count, "12Q"), (units.parse_count, "-1T"), (units.parse_flops, "abc"), (units.parse_power, "1GW/s")],
)
def test_bad_strings_raise(parser: object, bad: str) -> None:
    with pytest.raises(SpecError):
        parser(bad)  # type: ignore[operator]


def test_error_names_field() -> None:
    with pytest.raises(SpecError, match="--max"):
        units.parse_size("12Q", field="--max")


@given(st.integers(min_value=0, max_value=2**60))
def test_size_round_trip(n: int) -> None:
    assert units.parse_size(units.format_size(n)) == n


@given(st.integers(min_value=0, max_value=2**20), st.sampled_from(["", "K", "M", "G", "T"]))
def test_size_suffix_round_trip(mantissa: int, suffix: str) -> None:
    text = f"{mantissa}{suffix}"
    assert units.parse_size(units.format_size(units.parse_size(text))) == units.parse_size(text)


@given(st.floats(min_value=1.0, max_value=1e16, allow_nan=False))
def test_rate_round_trip(bytes_per_s: float) -> None:
    text = units.format_rate(bytes_per_s, digits=15)
    assert math.isclose(units.parse_rate(text), bytes_per_s, rel_tol=1e-12)
    bits = units.format_rate(bytes_per_s, bits=True, digits=15)
    assert math.isclose(units.parse_rate(bits), bytes_per_s, rel_tol=1e-12)


@given(st.floats(min_value=1e-9, max_value=1e9, allow_nan=False))
def test_duration_round_trip(seconds: float) -> None:
    assert math.isclose(units.parse_duration(units.format_duration(seconds, digits=15)), seconds, rel_tol=1e-12)


@given(st.floats(min_value=1.0, max_value=1e18, allow_nan=False))
def test_flops_round_trip(flops: float) -> None:
    assert math.isclose(units.parse_flops(units.format_flops(flops, digits=15)), flops, rel_tol=1e-12)
