"""Training: the parallel plan and run options, placement of ranks on GPUs, memory, the step model with its
pipeline schedule and overlap, and the search over the knobs left unset.
"""

from fabricsim.training.auto import AutoChoice, search_knobs
from fabricsim.training.flops import MFU_DEFINITION, StepFlops, mfu_peak, stage_microbatch_flops, step_flops
from fabricsim.training.memory import MemoryReport, memory_report, stage_memory
from fabricsim.training.placement import (
    Placement,
    domains_spanned,
    leaves_nvlink,
    node_of,
    place,
    placement_warnings,
    rank_groups,
)
from fabricsim.training.plan import DEFAULT_MBS, ParallelPlan, check_plan, megatron_runs_interleaved, stage_layers
from fabricsim.training.result import LAYERS, Breakdown, StepTerms, TrainingPrediction
from fabricsim.training.runspec import build_plan, parse_extra, parse_layout
from fabricsim.training.schedule import assemble_steps, pipeline_bubble_fractions
from fabricsim.training.step import microbatch_floor, plan_memory, predict_training, step_terms

__all__ = [
    "DEFAULT_MBS",
    "LAYERS",
    "MFU_DEFINITION",
    "AutoChoice",
    "Breakdown",
    "MemoryReport",
    "ParallelPlan",
    "Placement",
    "StepFlops",
    "StepTerms",
    "TrainingPrediction",
    "assemble_steps",
    "build_plan",
    "check_plan",
    "domains_spanned",
    "leaves_nvlink",
    "megatron_runs_interleaved",
    "memory_report",
    "mfu_peak",
    "microbatch_floor",
    "node_of",
    "parse_extra",
    "parse_layout",
    "pipeline_bubble_fractions",
    "place",
    "placement_warnings",
    "plan_memory",
    "predict_training",
    "rank_groups",
    "search_knobs",
    "stage_layers",
    "stage_memory",
    "stage_microbatch_flops",
    "step_flops",
    "step_terms",
]
