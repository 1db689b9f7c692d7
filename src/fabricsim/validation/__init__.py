"""Validation against published measurements (nccl-tests bandwidths, training throughput)."""

from fabricsim.validation.cases import load_cases, shared_validation_dir
from fabricsim.validation.collective_cases import CaseResult, run_collective_case, tolerance_for_size
from fabricsim.validation.training_cases import TRAINING_TOLERANCE, predict_case, run_training_case

__all__ = [
    "TRAINING_TOLERANCE",
    "CaseResult",
    "load_cases",
    "predict_case",
    "run_collective_case",
    "run_training_case",
    "shared_validation_dir",
    "tolerance_for_size",
]
