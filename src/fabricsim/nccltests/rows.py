"""The row schema shared by measurements (fabricsim's harness, imported nccl-tests logs) and model predictions.

One :class:`BenchRow` is one nccl-tests column group at one size: a log line with both the out-of-place and the
in-place group becomes two rows that differ only in ``in_place`` (and the measured figures). Units follow
nccl-tests: ``size_bytes`` is its ``size`` column (see :mod:`fabricsim.collectives.conventions`), ``time_s`` is
seconds, bandwidths are GB/s with GB = 1e9 bytes. A :class:`BenchResult` is one nccl-tests table (one operation)
with the facts around it: backend, ranks, hosts, devices and the ``# Avg bus bandwidth`` figure.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fabricsim.collectives import check_op
from fabricsim.errors import SpecError, unknown_name_error

# canonical name -> (nccl-tests type name, bytes per element)
DTYPES: dict[str, tuple[str, int]] = {
    "int8": ("int8", 1),
    "uint8": ("uint8", 1),
    "int32": ("int32", 4),
    "uint32": ("uint32", 4),
    "int64": ("int64", 8),
    "uint64": ("uint64", 8),
    "float16": ("half", 2),
    "bfloat16": ("bfloat16", 2),
    "float32": ("float", 4),
    "float64": ("double", 8),
    "fp8_e4m3": ("f8e4m3", 1),
    "fp8_e5m2": ("f8e5m2", 1),
}
# other spellings (nccl-tests, NCCL 1, torch) -> canonical
_DTYPE_ALIASES: dict[str, str] = {
    **{nccl: canonical for canonical, (nccl, _) in DTYPES.items()},
    "char": "int8",
    "int": "int32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "fp64": "float64",
}


def canonical_dtype(name: str, *, field: str = "dtype") -> str:
    """``float`` (nccl-tests), ``fp32`` or ``float32`` -> ``float32``; unknown names are a SpecError."""
    key = name.strip().lower()
    if key in DTYPES:
        return key
    if key in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[key]
    raise unknown_name_error("dtype", name, DTYPES, field=field)


def dtype_size(name: str) -> int:
    """Bytes per element of a (canonical or aliased) dtype."""
    return DTYPES[canonical_dtype(name)][1]


def nccl_tests_dtype(name: str) -> str:
    """The name nccl-tests prints in its ``type`` column: ``float32`` -> ``float``."""
    return DTYPES[canonical_dtype(name)][0]


class BenchRow(BaseModel):
    """One size and one buffer placement of one collective: measured, imported or predicted."""

    model_config = ConfigDict(extra="forbid")

    op: str = Field(description="collective operation, one of fabricsim.collectives.OPS")
    size_bytes: int = Field(ge=0, description="nccl-tests 'size' column (bytes)")
    count: int = Field(ge=0, description="nccl-tests 'count' column (elements)")
    dtype: str = Field(description="canonical element type, e.g. float32")
    redop: str | None = Field(None, description="reduction operator ('sum'); None or 'none' where there is none")
    root: int | None = Field(None, description="root rank for broadcast/reduce; -1 or None otherwise")
    in_place: bool = Field(description="True for the in-place column group, False for out-of-place")
    time_s: float = Field(ge=0, description="average time of one operation (seconds)")
    algbw_GBps: float = Field(ge=0, description="size_bytes / time_s, in GB/s (1e9 bytes/s)")
    busbw_GBps: float = Field(ge=0, description="algbw times the nccl-tests bus-bandwidth factor, GB/s")
    wrong: int | None = Field(None, ge=0, description="elements that failed the correctness check; None: unchecked")
    algorithm: str | None = Field(None, description="model rows: algorithm (ring, tree, ...)")
    protocol: str | None = Field(None, description="model rows: protocol (LL, LL128, Simple)")
    bound: str | None = Field(None, description="model rows: the resource that bounds this point")

    @field_validator("op")
    @classmethod
    def _known_op(cls, value: str) -> str:
        return check_op(value)

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str) -> str:
        return canonical_dtype(value)


class DeviceInfo(BaseModel):
    """One rank's line under nccl-tests' ``# Using devices``."""

    model_config = ConfigDict(extra="forbid")

    rank: int
    group: int | None = None
    pid: int | None = None
    host: str
    device: int = Field(description="local device index (-1 for a CPU rank)")
    bus_id: str | None = Field(None, description="PCI bus id as printed in brackets, 'cpu' for a CPU rank")
    name: str = ""


class BenchResult(BaseModel):
    """One collective's table: rows plus what was measured where and how."""

    model_config = ConfigDict(extra="forbid")

    tool: Literal["fabricsim", "nccl-tests"] = Field(description="who measured: fabricsim's harness or nccl-tests")
    op: str
    backend: str | None = Field(None, description="gloo or nccl (nccl-tests logs: nccl)")
    world_size: int | None = Field(None, ge=1, description="number of ranks")
    hosts: list[str] = Field(default_factory=list, description="distinct host names in rank order")
    devices: list[DeviceInfo] = Field(default_factory=list)
    dtype: str | None = Field(None, description="element type when all rows share one")
    warmup_iters: int | None = None
    iters: int | None = None
    check: bool | None = Field(None, description="whether results were checked (nccl-tests -c)")
    rows: list[BenchRow] = Field(default_factory=list)
    avg_busbw_GBps: float | None = Field(None, description="nccl-tests '# Avg bus bandwidth' (mean over all rows)")
    out_of_bounds: int | None = Field(None, description="nccl-tests '# Out of bounds values': rows with wrong > 0")
    source: str | None = Field(None, description="log file the table came from, or the command that measured it")
    notes: list[str] = Field(default_factory=list, description="how figures were obtained (assumptions)")

    @field_validator("op")
    @classmethod
    def _known_op(cls, value: str) -> str:
        return check_op(value)

    @property
    def wrong_total(self) -> int:
        """Wrong elements over all checked rows."""
        return sum(row.wrong or 0 for row in self.rows)


def average_busbw(rows: list[BenchRow]) -> float:
    """nccl-tests' ``# Avg bus bandwidth``: the plain mean of busbw over every printed column group."""
    if not rows:
        raise SpecError("no rows to average")
    return sum(row.busbw_GBps for row in rows) / len(rows)


class BenchListener(Protocol):
    """Receives a collective benchmark's results while it runs, on rank 0 (or in the process that spawned the
    ranks): per operation ``begin``, then ``row`` for each row as soon as every rank has measured it, then
    ``end`` with the operation's whole result (the same one the run returns)."""

    def begin(self, result: BenchResult, sizes: list[int], placements: list[bool]) -> None:
        """An operation starts: its result without rows; the sizes and buffer placements its rows will have."""

    def row(self, row: BenchRow) -> None:
        """One row, measured on every rank (time averaged over ranks, wrong elements summed)."""

    def end(self, result: BenchResult) -> None:
        """The operation's whole result."""
