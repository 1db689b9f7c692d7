"""Validation against published measurements (nccl-tests bandwidths and latencies, training throughput)."""

from typing import TYPE_CHECKING

from fabricsim.lazy import lazy_exports
from fabricsim.validation.bands import (
    BandResult,
    band_fields,
    band_note,
    band_text,
    bands,
    inference_bands,
    served_values,
    static_inference_values,
    unvalidated_band,
)
from fabricsim.validation.error_model import (
    Band,
    ComparisonBand,
    NoBand,
    Residual,
    comparison_band,
    minimum_cases,
    shown_figure,
    source_key,
)
from fabricsim.validation.error_table import (
    Coverage,
    HeldOut,
    coverage,
    held_out,
    published_residuals,
    residuals_of,
    summarise_held_out,
)
from fabricsim.validation.regimes import (
    DECODE,
    Regime,
    collective_regime,
    inference_regime,
    training_regime,
)

if TYPE_CHECKING:
    from fabricsim.validation.cases import Case, all_cases, load_cases, shared_validation_dir
    from fabricsim.validation.collective_cases import (
        CaseResult,
        run_collective_case,
        sweep_sizes,
        tolerance_for_size,
    )
    from fabricsim.validation.ledger import blind_errors, broken_links, load_ledger, median_abs
    from fabricsim.validation.runner import GROUPS, INFERENCE_REASON, NotExpressible, run_cases, run_validation
    from fabricsim.validation.settings import ValidationSettings, load_settings
    from fabricsim.validation.summary import GroupSummary, all_passed, engine_breakdown, group_summaries
    from fabricsim.validation.training_cases import TRAINING_TOLERANCE, predict_case, run_training_case

# The cases and their runners (every model: training, inference, serving) load on first use; a command that only
# prints a band needs the error model, not the runners.
__getattr__ = lazy_exports(__name__, {
    **dict.fromkeys(("Case", "all_cases", "load_cases", "shared_validation_dir"), "fabricsim.validation.cases"),
    **dict.fromkeys(("CaseResult", "run_collective_case", "sweep_sizes", "tolerance_for_size"),
                    "fabricsim.validation.collective_cases"),
    **dict.fromkeys(("GROUPS", "INFERENCE_REASON", "NotExpressible", "run_cases", "run_validation"),
                    "fabricsim.validation.runner"),
    **dict.fromkeys(("ValidationSettings", "load_settings"), "fabricsim.validation.settings"),
    **dict.fromkeys(("blind_errors", "broken_links", "load_ledger", "median_abs"), "fabricsim.validation.ledger"),
    **dict.fromkeys(("GroupSummary", "all_passed", "engine_breakdown", "group_summaries"),
                    "fabricsim.validation.summary"),
    **dict.fromkeys(("TRAINING_TOLERANCE", "predict_case", "run_training_case"),
                    "fabricsim.validation.training_cases"),
})

__all__ = [
    "DECODE",
    "GROUPS",
    "INFERENCE_REASON",
    "TRAINING_TOLERANCE",
    "Band",
    "BandResult",
    "Case",
    "CaseResult",
    "ComparisonBand",
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
    "blind_errors",
    "broken_links",
    "collective_regime",
    "comparison_band",
    "coverage",
    "engine_breakdown",
    "group_summaries",
    "held_out",
    "inference_bands",
    "inference_regime",
    "load_cases",
    "load_ledger",
    "load_settings",
    "median_abs",
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
    "shown_figure",
    "source_key",
    "static_inference_values",
    "summarise_held_out",
    "sweep_sizes",
    "tolerance_for_size",
    "training_regime",
    "unvalidated_band",
]
