"""Validation against published measurements (nccl-tests bandwidths and latencies, training throughput)."""

from fabricsim.validation.cases import Case, all_cases, load_cases, shared_validation_dir
from fabricsim.validation.collective_cases import CaseResult, run_collective_case, sweep_sizes, tolerance_for_size
from fabricsim.validation.runner import GROUPS, INFERENCE_REASON, NotExpressible, run_cases, run_validation
from fabricsim.validation.settings import ValidationSettings, load_settings
from fabricsim.validation.summary import GroupSummary, all_passed, engine_breakdown, group_summaries
from fabricsim.validation.training_cases import TRAINING_TOLERANCE, predict_case, run_training_case

__all__ = [
    "GROUPS",
    "INFERENCE_REASON",
    "TRAINING_TOLERANCE",
    "Case",
    "CaseResult",
    "GroupSummary",
    "NotExpressible",
    "ValidationSettings",
    "all_cases",
    "all_passed",
    "engine_breakdown",
    "group_summaries",
    "load_cases",
    "load_settings",
    "predict_case",
    "run_cases",
    "run_collective_case",
    "run_training_case",
    "run_validation",
    "shared_validation_dir",
    "sweep_sizes",
    "tolerance_for_size",
]
