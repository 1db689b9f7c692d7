"""Workload: model specs and presets, parallel plans, placement of ranks on GPUs, FLOPs, memory, compute time.

Public API (the CLI and higher layers use only these names):
- specs: ``ModelSpec``, ``MoESpec``, ``ParameterCount``, ``load_model``, ``load_model_file``, ``list_presets``,
  ``preset``, ``Preset``
- plans: ``ParallelPlan``, ``check_plan``, ``stage_layers``, ``DEFAULT_MBS``
- placement: ``place``, ``Placement``, ``rank_groups``, ``domains_spanned``, ``leaves_nvlink``,
  ``placement_warnings``, ``node_of``
- FLOPs: ``forward_flops``, ``step_flops``, ``stage_microbatch_flops``, ``megatron_step_flops``, ``ForwardFlops``,
  ``StepFlops``
- memory: ``memory_report``, ``stage_memory``, ``MemoryReport``
- compute: ``compute_time``, ``hbm_time``, ``matmul_efficiency``, ``achievable_flops_per_s``, ``flops_utilization``
"""

from fabricsim.workload.compute import (
    achievable_flops_per_s,
    compute_time,
    default_matmul_efficiency,
    flops_utilization,
    hbm_time,
    matmul_efficiency,
)
from fabricsim.workload.flops import (
    ForwardFlops,
    StepFlops,
    forward_flops,
    megatron_step_flops,
    stage_microbatch_flops,
    step_flops,
)
from fabricsim.workload.memory import MemoryReport, memory_report, stage_memory
from fabricsim.workload.placement import (
    Placement,
    domains_spanned,
    leaves_nvlink,
    node_of,
    place,
    placement_warnings,
    rank_groups,
)
from fabricsim.workload.plan import DEFAULT_MBS, ParallelPlan, check_plan, stage_layers
from fabricsim.workload.presets import Preset, list_presets, load_model, load_model_file, preset
from fabricsim.workload.spec import ModelSpec, MoESpec, ParameterCount

__all__ = [
    "DEFAULT_MBS",
    "ForwardFlops",
    "MemoryReport",
    "MoESpec",
    "ModelSpec",
    "ParallelPlan",
    "ParameterCount",
    "Placement",
    "Preset",
    "StepFlops",
    "achievable_flops_per_s",
    "check_plan",
    "compute_time",
    "default_matmul_efficiency",
    "domains_spanned",
    "flops_utilization",
    "forward_flops",
    "hbm_time",
    "leaves_nvlink",
    "list_presets",
    "load_model",
    "load_model_file",
    "matmul_efficiency",
    "megatron_step_flops",
    "memory_report",
    "node_of",
    "place",
    "placement_warnings",
    "preset",
    "rank_groups",
    "stage_layers",
    "stage_memory",
    "stage_microbatch_flops",
    "step_flops",
]
