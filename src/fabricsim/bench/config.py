"""What a collective benchmark run measures: operations, the size sweep, iterations, dtype, backend, limits.

Sizes follow nccl-tests: from ``min_bytes`` multiplying by ``step_factor`` while ``<= max_bytes``; each size is
rounded down to whole elements, and for operations that split the buffer into one chunk per rank (all_gather,
reduce_scatter, all_to_all) to a multiple of ``nranks`` elements, as nccl-tests does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabricsim.collectives import OPS, check_op, parse_op
from fabricsim.errors import SpecError
from fabricsim.nccltests import canonical_dtype, dtype_size
from fabricsim.units import format_size

BACKENDS = ("gloo", "nccl")
# operations whose nccl-tests 'size' is split into one equal chunk per rank
CHUNKED_OPS = frozenset({"all_gather", "reduce_scatter", "all_to_all"})
# element types the harness can fill and check on both backends
HARNESS_DTYPES = ("int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64")



def check_sweep(min_bytes: int, max_bytes: int, step_factor: int, warmup: int, iters: int) -> None:
    """The nccl-tests-style sweep options every benchmark shares (-b, -e, -f, -w, -n), or a SpecError."""
    if min_bytes < 1:
        raise SpecError(f"must be at least 1 byte, got {min_bytes}", field="min")
    if max_bytes < min_bytes:
        raise SpecError(f"{format_size(max_bytes)} is smaller than min ({format_size(min_bytes)})", field="max")
    if step_factor < 2:
        raise SpecError(f"must be at least 2, got {step_factor}", field="step_factor")
    if warmup < 0:
        raise SpecError(f"must be 0 or more, got {warmup}", field="warmup")
    if iters < 1:
        raise SpecError(f"must be at least 1, got {iters}", field="iters")


@dataclass(frozen=True)
class CollectiveConfig:
    """A validated benchmark request; invalid values raise SpecError naming the option."""

    ops: tuple[str, ...] = ("all_reduce",)
    backend: str = "gloo"
    min_bytes: int = 1024
    max_bytes: int = 64 * 2**20
    step_factor: int = 2
    warmup: int = 5
    iters: int = 20
    dtype: str = "float32"
    check: bool = True
    root: int = 0
    timeout_s: float = 300.0
    nprocs: int | None = None
    master_addr: str = "127.0.0.1"
    master_port: int = 0

    def __post_init__(self) -> None:
        if not self.ops:
            raise SpecError("give at least one operation", field="op")
        object.__setattr__(self, "ops", tuple(check_op(op) for op in self.ops))
        if len(set(self.ops)) != len(self.ops):
            raise SpecError(f"an operation is listed twice: {', '.join(self.ops)}", field="op")
        if self.backend not in BACKENDS:
            raise SpecError(f"unknown backend {self.backend!r}; allowed: {', '.join(BACKENDS)}", field="backend")
        dtype = canonical_dtype(self.dtype)
        if dtype not in HARNESS_DTYPES:
            raise SpecError(f"the harness cannot check {dtype}; allowed: {', '.join(HARNESS_DTYPES)}", field="dtype")
        object.__setattr__(self, "dtype", dtype)
        check_sweep(self.min_bytes, self.max_bytes, self.step_factor, self.warmup, self.iters)
        if self.root < 0:
            raise SpecError(f"must be a rank (0 or more), got {self.root}", field="root")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise SpecError(f"must be a positive number of seconds, got {self.timeout_s}", field="timeout")
        if self.nprocs is not None and self.nprocs < 1:
            raise SpecError(f"must be at least 1, got {self.nprocs}", field="nprocs")
        if not 0 <= self.master_port <= 65535:
            raise SpecError(f"must be a TCP port (0 picks a free one), got {self.master_port}", field="master_port")

    def check_world(self, world_size: int) -> None:
        """World-size dependent checks: the root exists, the smallest size holds a chunk per rank."""
        if self.root >= world_size:
            raise SpecError(f"rank {self.root} does not exist in a world of {world_size}", field="root")
        if "send_recv" in self.ops and world_size < 2:
            raise SpecError("send_recv needs at least 2 ranks", field="nprocs")
        for op in self.ops:
            unit = self.unit_bytes(op, world_size)
            if self.min_bytes < unit:
                raise SpecError(
                    f"{self.min_bytes} bytes is less than one {self.dtype} element per rank for {op} over "
                    f"{world_size} ranks ({unit} bytes)", field="min")

    def unit_bytes(self, op: str, world_size: int) -> int:
        """The granularity of ``op``'s size: one element, or one element per rank for chunked operations."""
        return dtype_size(self.dtype) * (world_size if op in CHUNKED_OPS else 1)

    def sizes(self, op: str, world_size: int) -> list[tuple[int, int]]:
        """``(size_bytes, count)`` for each step of the sweep, rounded as nccl-tests rounds them."""
        unit = self.unit_bytes(op, world_size)
        elt = dtype_size(self.dtype)
        out: list[tuple[int, int]] = []
        size = self.min_bytes
        while size <= self.max_bytes:
            nbytes = size // unit * unit
            out.append((nbytes, nbytes // elt))
            size *= self.step_factor
        return out


def parse_ops(values: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``--op`` values: comma lists or ``all``, each name spelled by ``collectives.parse_op`` (the rule `fabricsim
    collective --op` uses too; nccl-tests binary names included)."""
    ops: list[str] = []
    for value in values:
        for name in (part.strip() for part in value.split(",")):
            if not name:
                continue
            if name == "all":
                ops.extend(op for op in OPS if op not in ops)
                continue
            name = parse_op(name)
            if name not in ops:
                ops.append(name)
    if not ops:
        raise SpecError("give at least one operation", field="op")
    return tuple(ops)


Step = tuple[str, int, int, bool]  # (op, size_bytes, count, in_place)

# Progress marks a rank publishes (see fabricsim.bench.launch): 0 starting, 1 joining the process group,
# 2+2k preparing step k, 3+2k inside step k's collectives, then 2+2K gathering results, 3+2K done.
MARK_JOINING = 1


def plan(config: CollectiveConfig, world_size: int) -> list[Step]:
    """Every measurement in run order: per operation, per size, out-of-place then in-place."""
    return [(op, size, count, in_place)
            for op in config.ops
            for size, count in config.sizes(op, world_size)
            for in_place in (False, True)]


def phase_name(mark: int, steps: list[Step]) -> str:
    """What a rank whose last progress mark is ``mark`` was doing, in words."""
    if mark <= MARK_JOINING:
        return "start-up" if mark == 0 else "joining the process group"
    k = (mark - 2) // 2
    if k >= len(steps):
        return "gathering results"
    op, size, _, in_place = steps[k]
    return f"{op} {format_size(size)} {'in-place' if in_place else 'out-of-place'}"
