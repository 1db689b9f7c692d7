"""Training: the parallel plan and run options, placement of ranks on GPUs, memory, the step model with its
pipeline schedule and overlap, the search over the knobs left unset, and goodput (failures, checkpoints,
restarts).
"""

from fabricsim.training.auto import AutoChoice, search_knobs
from fabricsim.training.failures import InterruptionRates, JobParts, interruption_rates, job_parts, parts_of
from fabricsim.training.floor import (
    COMM_FIELDS,
    LAYER_FIELDS,
    STAGE_FIELDS,
    StageFloor,
    comm_keys,
    comm_row,
    layer_row,
    network_floors,
    shard_row,
)
from fabricsim.training.flops import StepFlops, mfu_peak, stage_microbatch_flops, step_flops
from fabricsim.training.frameworks import (
    DEFAULT_FRAMEWORK,
    FrameworkProfile,
    framework_launch_json,
    framework_profile,
    frameworks,
)
from fabricsim.training.frameworks import SEARCHED as FRAMEWORK_SEARCHED
from fabricsim.training.frameworks import SETTABLE as FRAMEWORK_SETTABLE
from fabricsim.training.goodput import (
    Goodput,
    GoodputSpec,
    checkpoint_bytes,
    goodput_at,
    optimal_interval_s,
    predict_goodput,
    spare_fields,
    spare_unit_gpus,
    spare_wait_s,
)
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
from fabricsim.training.step import microbatch_floor, plan_floor, plan_memory, predict_training, step_terms

__all__ = [
    "COMM_FIELDS",
    "DEFAULT_FRAMEWORK",
    "DEFAULT_MBS",
    "FRAMEWORK_SEARCHED",
    "FRAMEWORK_SETTABLE",
    "LAYERS",
    "LAYER_FIELDS",
    "STAGE_FIELDS",
    "AutoChoice",
    "Breakdown",
    "FrameworkProfile",
    "Goodput",
    "GoodputSpec",
    "InterruptionRates",
    "JobParts",
    "MemoryReport",
    "ParallelPlan",
    "Placement",
    "StageFloor",
    "StepFlops",
    "StepTerms",
    "TrainingPrediction",
    "assemble_steps",
    "build_plan",
    "check_plan",
    "checkpoint_bytes",
    "comm_keys",
    "comm_row",
    "domains_spanned",
    "framework_launch_json",
    "framework_profile",
    "frameworks",
    "goodput_at",
    "interruption_rates",
    "job_parts",
    "layer_row",
    "leaves_nvlink",
    "megatron_runs_interleaved",
    "memory_report",
    "mfu_peak",
    "microbatch_floor",
    "network_floors",
    "node_of",
    "optimal_interval_s",
    "parse_extra",
    "parse_layout",
    "parts_of",
    "pipeline_bubble_fractions",
    "place",
    "placement_warnings",
    "plan_floor",
    "plan_memory",
    "predict_goodput",
    "predict_training",
    "rank_groups",
    "search_knobs",
    "shard_row",
    "spare_fields",
    "spare_unit_gpus",
    "spare_wait_s",
    "stage_layers",
    "stage_memory",
    "stage_microbatch_flops",
    "step_flops",
    "step_terms",
]
