"""One JSON schema for every command: SI values under unit-suffixed keys and one rank-count name (`ranks`).

The models keep nccl-tests units where nccl-tests does (GB/s = 1e9 bytes/s, microseconds); `to_si` converts a
document on its way out and `from_si` reads one back, so files written by `--json` load again (`calibrate`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# key suffix -> (SI suffix, factor to SI)
_SUFFIXES: tuple[tuple[str, str, float], ...] = (
    ("_GBps", "_bytes_per_s", 1e9),
    ("_us", "_s", 1e-6),
    ("_ms", "_s", 1e-3),
)
_RENAMED: dict[str, tuple[str, float]] = {
    "GBps": ("bytes_per_s", 1e9),
    "nranks": ("ranks", 1.0),
    "world_size": ("ranks", 1.0),
    "tflops_per_gpu": ("flops_per_s_per_gpu", 1e12),
}


def _si_key(key: str) -> tuple[str, float]:
    """The SI name of one key and the factor its value takes (1 when already SI)."""
    if key in _RENAMED:
        return _RENAMED[key]
    for old, new, factor in _SUFFIXES:
        if key.endswith(old):
            return key[: -len(old)] + new, factor
    return key, 1.0


def _scaled(value: Any, factor: float) -> Any:
    if factor == 1.0 or isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return value * factor


def to_si(data: Any) -> Any:
    """A JSON document with nccl-tests units converted to SI and `nranks`/`world_size` renamed `ranks`."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            new, factor = _si_key(str(key))
            out[new] = _scaled(to_si(value), factor)
        return out
    if isinstance(data, list | tuple):
        return [to_si(v) for v in data]
    return data


def from_si(data: Any, names: Iterable[str]) -> Any:
    """The inverse of `to_si` for the given model field names: maps each field's SI name back to it (and scales)."""
    names = tuple(names)
    back = {_si_key(name)[0]: (name, _si_key(name)[1]) for name in names}
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            name, factor = back.get(key, (key, 1.0))
            out[name] = _scaled(from_si(value, names), 1.0 / factor) if factor != 1.0 else from_si(value, names)
        return out
    if isinstance(data, list):
        return [from_si(v, names) for v in data]
    return data
