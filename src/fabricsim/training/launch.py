"""A training stack's own launch line for a plan: the command (and the config file it reads) that runs the parallel
sizes, batch, sequence, recompute, ZeRO stage and precision fabricsim priced, in that stack's syntax. The flag names
live in ``data/frameworks.yaml`` (each profile's ``launch`` block, read from the stack's source), not here."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fabricsim.catalog import LaunchFlag, LaunchSettings, config_text, render_flags
from fabricsim.errors import SpecError
from fabricsim.model import ModelSpec
from fabricsim.training.plan import ParallelPlan


class ModelFlags(BaseModel):
    """How the stack names a model: the arguments for each fabricsim model id it ships a config for, and what to
    do for any other (``other``: arguments with ``{model}`` formatted, and a note)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    known: dict[str, list[str]] = Field(default_factory=dict)
    other: list[str] = Field(default_factory=list)
    other_note: str = ""


class TrainingLaunch(BaseModel):
    """A stack's launch template: ``command`` (fields in braces formatted), how it names the model, its ``flags``,
    the config file settings go to (``config_file``; the command names it where it reads one), and notes printed
    with every line."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: list[str] = Field(min_length=1)
    model: ModelFlags = Field(default_factory=ModelFlags)
    flags: list[LaunchFlag] = Field(default_factory=list)
    config_file: str | None = None
    requires: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    read_at: str = Field(min_length=1)  # the stack's release or commit the flag names were read at
    source: str = Field(min_length=1)


def launch_values(plan: ParallelPlan, model: ModelSpec, model_id: str, gpus_per_node: int) -> dict[str, Any]:
    """The plan's values a template may name: parallel sizes, batch (sequences and tokens), sequence, recompute,
    ZeRO, precision, overlaps, the model's shape, and the placement on nodes (MaxText's in-node and across-node
    mesh axes: tensor, context and expert parallelism inside a node, pipeline stages across nodes)."""
    gpus = plan.world_size
    nodes = max(1, -(-gpus // gpus_per_node))
    per_node = min(gpus, gpus_per_node)
    micro = plan.gbs // (plan.mbs * plan.dp)
    inner = plan.tp * plan.cp * plan.ep
    ici_dp = per_node // inner if per_node % inner == 0 else 0
    fsdp = plan.dp // plan.ep
    dcn_dp = fsdp // ici_dp if ici_dp and fsdp % ici_dp == 0 else 0
    moe = model.moe
    layers_per_chunk = model.layers // (plan.pp * plan.virtual_stages)
    return {
        "model": model_id, "gpus": gpus, "nodes": nodes, "gpus_per_node": per_node,
        "tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "ep": plan.ep, "etp": plan.expert_tp,
        "vpp": plan.virtual_stages, "layers_per_virtual_stage": layers_per_chunk,
        "mbs": plan.mbs, "gbs": plan.gbs, "grad_accum": micro, "seq": plan.seq,
        "tokens_per_microbatch": plan.mbs * plan.seq, "tokens_per_step": plan.gbs * plan.seq,
        "per_device_batch": plan.gbs / (micro * gpus), "ici_dp": ici_dp, "dcn_dp": dcn_dp,
        "recompute": plan.recompute, "zero": plan.zero, "precision": plan.precision, "grad_dtype": plan.grad_dtype,
        "kernels": plan.kernels, "sequence_parallel": plan.sequence_parallel and plan.tp > 1,
        "tp_comm_overlap": plan.tp_comm_overlap, "ep_comm_overlap": plan.ep_comm_overlap,
        "shared_expert_overlap": plan.shared_expert_overlap, "moe_dispatcher": plan.moe_dispatcher,
        "overlap_grad_reduce": plan.overlap_grad_reduce, "overlap_param_gather": plan.overlap_param_gather,
        "zero3_reduce_bucket_params": int(plan.zero3_reduce_bucket_params or 0),
        "expert_tp_own": plan.ep > 1 and plan.expert_tp != plan.tp, "tp_without_sp": plan.tp > 1 and not
        plan.sequence_parallel, "param_gather_overlap": plan.overlap_param_gather and plan.zero >= 1,
        "dropout": plan.dropout,
        "moe_alltoall": moe is not None and plan.moe_dispatcher == "alltoall",
        "moe_deepep": moe is not None and plan.moe_dispatcher == "deepep",
        "layers": model.layers, "hidden": model.hidden, "heads": model.heads, "kv_heads": model.kv_heads,
        "gqa": model.kv_heads < model.heads, "ffn_hidden": model.ffn_hidden, "vocab": model.vocab,
        "experts": 0 if moe is None else moe.experts, "top_k": 0 if moe is None else moe.top_k,
        "expert_ffn_hidden": 0 if moe is None else model.expert_ffn_hidden,
    }


PLACED = {"tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "vpp": "vpp", "expert_tp_own": "etp"}
"""Plan values a launch line must state when set (above 1, or on), by the option that sets them: a line that left
one out would run another plan."""


def training_launch(launch: TrainingLaunch, stack: str, plan: ParallelPlan, model: ModelSpec, model_id: str,
                    gpus_per_node: int) -> LaunchSettings:
    """The stack's command (and config file) for ``plan`` of ``model`` (named ``model_id``) on nodes of
    ``gpus_per_node`` GPUs; a plan the stack's flags cannot state is a one-line SpecError."""
    values = launch_values(plan, model, model_id, gpus_per_node)
    rendered = render_flags(list(launch.flags), values)
    missing = rendered.unstated(values, PLACED)
    if missing is not None:
        option = PLACED[missing]
        raise SpecError(f"{stack}'s launch settings cannot state {option}={values[option]} (no flag for it in "
                        "fabricsim's profile of the stack)", field=f"--{option}")
    for name in launch.requires:
        if not values[name]:
            raise SpecError(f"{stack}'s launch settings cannot place this plan on nodes of {values['gpus_per_node']}"
                            f" GPUs ({name} does not come out whole)", field="--framework")
    known = launch.model.known.get(model_id)
    model_args = known if known is not None else [part.format(**values) for part in launch.model.other]
    notes = list(rendered.notes)
    if known is None and launch.model.other_note:
        notes.append(launch.model.other_note.format(**values))
    notes += [note.format(**values) for note in launch.notes]
    files: dict[str, str] = {}
    if rendered.options:
        if launch.config_file is None:
            raise SpecError(f"{stack}: a setting needs a config file its profile does not name", field="--framework")
        files[launch.config_file] = config_text(launch.config_file, rendered.options)
    argv = [part.format(config_file=launch.config_file or "", **values) for part in launch.command]
    return LaunchSettings(stack, tuple(argv + model_args + rendered.args), files, tuple(notes))
