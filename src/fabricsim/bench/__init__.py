"""Real measurements over torch.distributed: collective benchmarks (gloo on CPU, NCCL on GPUs) whose rows are
nccl-tests' (``fabricsim.nccltests``), and a GPU memory-bandwidth benchmark.

Importing this package does not import torch (the ``bench`` extra is optional); running a benchmark does.
"""

from fabricsim.bench.config import CollectiveConfig, parse_ops
from fabricsim.bench.errors import BenchError
from fabricsim.bench.faults import FAULT_ENV
from fabricsim.bench.launch import run_collective_bench, torchrun_env
from fabricsim.bench.memory import MemoryConfig, MemoryResult, MemoryRow, run_memory_bench

__all__ = [
    "FAULT_ENV",
    "BenchError",
    "CollectiveConfig",
    "MemoryConfig",
    "MemoryResult",
    "MemoryRow",
    "parse_ops",
    "run_collective_bench",
    "run_memory_bench",
    "torchrun_env",
]
