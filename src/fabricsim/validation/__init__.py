"""Validation against published measurements (nccl-tests bandwidths and latencies, training throughput)."""

from fabricsim.validation.bands import (
    BandResult,
    band_fields,
    band_note,
    band_text,
    bands,
    inference_bands,
    served_values,
    static_inference_values,
)
from fabricsim.validation.cases import Case, all_cases, load_cases, shared_validation_dir
from fabricsim.validation.collective_cases import CaseResult, run_collective_case, sweep_sizes, tolerance_for_size
from fabricsim.validation.error_table import (
    Coverage,
    HeldOut,
    coverage,
    held_out,
    published_residuals,
    residuals_of,
    summarise_held_out,
)
from fabricsim.validation.errors import LEVEL, Band, NoBand, Residual, minimum_cases, source_key
from fabricsim.validation.regimes import (
    DECODE,
    Regime,
    collective_regime,
    inference_family,
    inference_regime,
    training_regime,
)
from fabricsim.validation.runner import GROUPS, INFERENCE_REASON, NotExpressible, run_cases, run_validation
from fabricsim.validation.settings import ValidationSettings, load_settings
from fabricsim.validation.summary import GroupSummary, all_passed, engine_breakdown, group_summaries
from fabricsim.validation.training_cases import TRAINING_TOLERANCE, predict_case, run_training_case

__all__ = [
    "DECODE",
    "GROUPS",
    "INFERENCE_REASON",
    "LEVEL",
    "TRAINING_TOLERANCE",
    "Band",
    "BandResult",
    "Case",
    "CaseResult",
    "Coverage",
    "GroupSummary",
    "HeldOut",
    "NoBand",
    "NotExpressible",
    "Regime",
    "Residual",
    "ValidationSettings",
    "all_cases",
    "all_passed",
    "band_fields",
    "band_note",
    "band_text",
    "bands",
    "collective_regime",
    "coverage",
    "engine_breakdown",
    "group_summaries",
    "held_out",
    "inference_bands",
    "inference_family",
    "inference_regime",
    "load_cases",
    "load_settings",
    "minimum_cases",
    "predict_case",
    "published_residuals",
    "residuals_of",
    "run_cases",
    "run_collective_case",
    "run_training_case",
    "run_validation",
    "served_values",
    "shared_validation_dir",
    "source_key",
    "static_inference_values",
    "summarise_held_out",
    "sweep_sizes",
    "tolerance_for_size",
    "training_regime",
]
