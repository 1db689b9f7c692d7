"""Real measurements: collective benchmarks over torch.distributed (gloo on CPU, NCCL on GPUs) with
nccl-tests-compatible output, a GPU memory-bandwidth benchmark, and a reader for real nccl-tests logs.

Importing this package does not import torch (the ``bench`` extra is optional); running a benchmark does.
"""

from typing import TYPE_CHECKING

from fabricsim.bench.config import CollectiveConfig, parse_ops
from fabricsim.bench.errors import BenchError
from fabricsim.bench.faults import FAULT_ENV
from fabricsim.bench.launch import run_collective_bench, torchrun_env
from fabricsim.bench.memory import MemoryConfig, MemoryResult, MemoryRow, run_memory_bench
from fabricsim.bench.nccltests import parse_nccl_tests, parse_nccl_tests_file, parse_nccl_tests_log
from fabricsim.bench.nccltests_format import TableStream, format_many, format_nccl_tests
from fabricsim.bench.rows import (
    DTYPES,
    BenchListener,
    BenchResult,
    BenchRow,
    DeviceInfo,
    average_busbw,
    canonical_dtype,
)
from fabricsim.lazy import lazy_exports

if TYPE_CHECKING:
    from fabricsim.bench.calibration import CalibrationResult, Measurement, calibrate, check_results, predict_times
    from fabricsim.bench.measurements import load_results, to_measurements

# calibration imports scipy.optimize: loaded on first use, not by every benchmark rank
__getattr__ = lazy_exports(__name__, {
    **dict.fromkeys(("CalibrationResult", "Measurement", "calibrate", "check_results", "predict_times"),
                    "fabricsim.bench.calibration"),
    **dict.fromkeys(("load_results", "to_measurements"), "fabricsim.bench.measurements"),
})

__all__ = [
    "DTYPES",
    "FAULT_ENV",
    "BenchError",
    "BenchListener",
    "BenchResult",
    "BenchRow",
    "CalibrationResult",
    "CollectiveConfig",
    "DeviceInfo",
    "Measurement",
    "MemoryConfig",
    "MemoryResult",
    "MemoryRow",
    "TableStream",
    "average_busbw",
    "calibrate",
    "canonical_dtype",
    "check_results",
    "format_many",
    "format_nccl_tests",
    "load_results",
    "parse_nccl_tests",
    "parse_nccl_tests_file",
    "parse_nccl_tests_log",
    "parse_ops",
    "predict_times",
    "run_collective_bench",
    "run_memory_bench",
    "to_measurements",
    "torchrun_env",
]
