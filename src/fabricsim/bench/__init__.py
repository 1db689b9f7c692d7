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
    from fabricsim.bench.calibration import (
        CalibrationResult,
        Measurement,
        calibrate,
        check_results,
        device_matches,
        predict_times,
    )
    from fabricsim.bench.measurements import load_results, to_measurements
    from fabricsim.bench.plausibility import check_bandwidths
    from fabricsim.bench.trace_calibrate import GemmEfficiency, calibrate_trace, check_trace, gemm_efficiency
    from fabricsim.bench.trace_events import MAX_EVENTS, TraceEvents
    from fabricsim.bench.trace_read import read_trace
    from fabricsim.bench.trace_summary import import_trace, summarise
    from fabricsim.bench.trace_types import ClassTime, CollectiveStat, DeviceSummary, GemmStat, TraceSummary

# calibration imports scipy.optimize: loaded on first use, not by every benchmark rank
__getattr__ = lazy_exports(__name__, {
    **dict.fromkeys(("CalibrationResult", "Measurement", "calibrate", "check_results", "device_matches",
                     "predict_times"), "fabricsim.bench.calibration"),
    **dict.fromkeys(("load_results", "to_measurements"), "fabricsim.bench.measurements"),
    # profiler traces (numpy, ijson): loaded on first use too
    "check_bandwidths": "fabricsim.bench.plausibility",
    **dict.fromkeys(("GemmEfficiency", "calibrate_trace", "check_trace", "gemm_efficiency"),
                    "fabricsim.bench.trace_calibrate"),
    **dict.fromkeys(("MAX_EVENTS", "TraceEvents"), "fabricsim.bench.trace_events"),
    "read_trace": "fabricsim.bench.trace_read",
    **dict.fromkeys(("import_trace", "summarise"), "fabricsim.bench.trace_summary"),
    **dict.fromkeys(("ClassTime", "CollectiveStat", "DeviceSummary", "GemmStat", "TraceSummary"),
                    "fabricsim.bench.trace_types"),
})

__all__ = [
    "DTYPES",
    "FAULT_ENV",
    "MAX_EVENTS",
    "BenchError",
    "BenchListener",
    "BenchResult",
    "BenchRow",
    "CalibrationResult",
    "ClassTime",
    "CollectiveConfig",
    "CollectiveStat",
    "DeviceInfo",
    "DeviceSummary",
    "GemmEfficiency",
    "GemmStat",
    "Measurement",
    "MemoryConfig",
    "MemoryResult",
    "MemoryRow",
    "TableStream",
    "TraceEvents",
    "TraceSummary",
    "average_busbw",
    "calibrate",
    "calibrate_trace",
    "canonical_dtype",
    "check_bandwidths",
    "check_results",
    "check_trace",
    "device_matches",
    "format_many",
    "format_nccl_tests",
    "gemm_efficiency",
    "import_trace",
    "load_results",
    "parse_nccl_tests",
    "parse_nccl_tests_file",
    "parse_nccl_tests_log",
    "parse_ops",
    "predict_times",
    "read_trace",
    "run_collective_bench",
    "run_memory_bench",
    "summarise",
    "to_measurements",
    "torchrun_env",
]
