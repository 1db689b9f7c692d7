"""Validation against published measurements (nccl-tests bandwidths, training throughput)."""

from fabricsim.validation.cases import load_cases, shared_validation_dir
from fabricsim.validation.collective_cases import CaseResult, run_collective_case, tolerance_for_size

__all__ = ["CaseResult", "load_cases", "run_collective_case", "shared_validation_dir", "tolerance_for_size"]
