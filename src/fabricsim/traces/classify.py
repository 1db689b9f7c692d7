"""Kernel classes of a profiler trace (gemm, attention, elementwise, memory, communication) and the collective a
kernel or operator runs, from the name patterns in ``traces/data/kernels.yaml`` (data, with their sources)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

from fabricsim.inputs import load_packaged_yaml

CLASSES = ("gemm", "attention", "elementwise", "memory", "communication")
"""every kernel class a summary reports; ``elementwise`` is any compute kernel no other pattern names"""
COMPUTE_CLASSES = ("gemm", "attention", "elementwise")
LAUNCH = "launch"
"""the class of CPU operators that only launch or describe a collective: never busy time"""


@dataclass(frozen=True)
class Patterns:
    """The compiled contents of kernels.yaml."""

    classes: tuple[tuple[str, re.Pattern[str]], ...]
    launch_only: re.Pattern[str]
    collective_ops: tuple[tuple[str, re.Pattern[str]], ...]
    step: re.Pattern[str]
    flop_ops: dict[str, str]
    dtype_bytes: dict[str, int]
    bf16_peak_dtypes: frozenset[str]
    fp8_peak_dtypes: frozenset[str]


def _any(patterns: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


@cache
def patterns() -> Patterns:
    """kernels.yaml, parsed and compiled once."""
    text = files("fabricsim.traces").joinpath("data/kernels.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = load_packaged_yaml(text, "traces/data/kernels.yaml")
    return Patterns(
        classes=tuple((name, _any(entry["patterns"])) for name, entry in data["classes"].items()),
        launch_only=_any(data["launch_only"]),
        collective_ops=tuple((e["op"], re.compile(e["pattern"], re.IGNORECASE)) for e in data["collective_ops"]),
        step=re.compile(data["step_pattern"]),
        flop_ops=dict(data["flop_ops"]),
        dtype_bytes={str(k).lower(): int(v) for k, v in data["dtype_bytes"].items()},
        bf16_peak_dtypes=frozenset(str(d).lower() for d in data["bf16_peak_dtypes"]),
        fp8_peak_dtypes=frozenset(str(d).lower() for d in data["fp8_peak_dtypes"]),
    )


def classify(name: str) -> str:
    """The class of a kernel or CPU operator name: one of CLASSES, or LAUNCH for collective launch operators."""
    pats = patterns()
    if pats.launch_only.search(name):
        return LAUNCH
    for cls, pattern in pats.classes:
        if pattern.search(name):
            return cls
    return "elementwise"


def collective_op(name: str) -> str | None:
    """The collective (fabricsim.collectives.OPS) a kernel name or PyTorch 'Collective name' describes, or None.
    NCCL kernel names carry the function after the prefix: ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL``."""
    text = re.sub(r"^(nccl(Dev)?Kernel_|gloo:|nccl:)", "", name.split("(")[0], flags=re.IGNORECASE)
    for op, pattern in patterns().collective_ops:
        if pattern.search(text):
            return op
    return None


def dtype_bytes(name: str | None) -> int | None:
    """Bytes per element of a PyTorch type name (``BFloat16``, ``c10::BFloat16``, ``float``), or None."""
    if not name:
        return None
    return patterns().dtype_bytes.get(str(name).strip().lower())


def step_number(name: str) -> int | None:
    """N of a ``ProfilerStep#N`` annotation, or None for any other name."""
    found = patterns().step.match(name)
    return int(found.group(1)) if found else None


def nccl_tests_size(op: str, in_bytes: float, out_bytes: float) -> int:
    """The size nccl-tests prints for a collective of these per-rank input and output buffers (DESIGN.md
    Conventions): the gathered output of all_gather, the scattered input of reduce_scatter, else the input."""
    if op == "all_gather":
        return int(out_bytes)
    return int(in_bytes if in_bytes > 0 else out_bytes)


def gemm_flops(kind: str, dims: list[Any]) -> float | None:
    """FLOPs (2 per multiply-add) of one ATen GEMM from its record_shapes "Input Dims"; None when they do not read
    as the operator's shapes."""
    try:
        if kind == "mm":
            (m, k), (k2, n) = dims[0], dims[1]
            batch = 1
        elif kind == "addmm":
            (m, k), (k2, n) = dims[1], dims[2]
            batch = 1
        elif kind == "bmm":
            (batch, m, k), (_, k2, n) = dims[0], dims[1]
        elif kind == "baddbmm":
            (batch, m, k), (_, k2, n) = dims[1], dims[2]
        else:
            return None
    except (TypeError, ValueError, IndexError):
        return None
    if k != k2:
        return None
    return 2.0 * float(batch) * float(m) * float(n) * float(k)


def elements(dims: Any) -> int | None:
    """Elements of a tensor from its "Input Dims" entry ([256, 256]; a tensor list [[...], [...]] sums)."""
    if not isinstance(dims, list):
        return None
    if dims and all(isinstance(d, list) for d in dims):
        parts = [elements(d) for d in dims]
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
    if not all(isinstance(d, int | float) for d in dims):
        return None
    return int(math.prod(int(d) for d in dims))
