"""The nccl-tests row format: one schema for measured rows (fabricsim's harness, imported nccl-tests logs) and the
model's own predictions; nccl-tests logs parsed into it and printed from it in nccl-tests' stdout layout, so a
round trip keeps every figure. Needs neither torch nor numpy."""

from fabricsim.nccltests.format import TableStream, format_many, format_nccl_tests
from fabricsim.nccltests.parse import parse_nccl_tests, parse_nccl_tests_file, parse_nccl_tests_log
from fabricsim.nccltests.rows import (
    DTYPES,
    BenchListener,
    BenchResult,
    BenchRow,
    DeviceInfo,
    average_busbw,
    canonical_dtype,
    dtype_size,
)

__all__ = [
    "DTYPES",
    "BenchListener",
    "BenchResult",
    "BenchRow",
    "DeviceInfo",
    "TableStream",
    "average_busbw",
    "canonical_dtype",
    "dtype_size",
    "format_many",
    "format_nccl_tests",
    "parse_nccl_tests",
    "parse_nccl_tests_file",
    "parse_nccl_tests_log",
]
