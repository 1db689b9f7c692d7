"""Training stacks as profiles (`--framework`): the plan settings Megatron-Core, torchtitan, NeMo AutoModel,
DeepSpeed and MaxText run by default, each read from a named source (``data/frameworks.yaml``). A profile sets a
knob the user left at fabricsim's default; the megatron profile names none (fabricsim's defaults are
Megatron-Core's), so it changes nothing."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fabricsim.errors import SpecError, unknown_name_error
from fabricsim.model import ModelSpec
from fabricsim.training.launch import TrainingLaunch, training_launch
from fabricsim.training.plan import ParallelPlan

DEFAULT_FRAMEWORK = "megatron"
SETTABLE = ("kernels", "attention_kernel", "zero", "grad_dtype", "tp_comm_overlap", "recompute", "dropout",
            "zero3_gathers_per_layer", "zero3_reduce_bucket_params", "fsdp_copy_out")
"""The run options a profile may set (named as `train` names them)."""
SEARCHED = ("zero", "recompute")
"""Settable knobs that the knob search chooses when neither the user nor the stack sets them."""


class Setting(BaseModel):
    """One plan setting of a stack and where it was read (a setting not verified says so in its source)."""

    model_config = ConfigDict(extra="forbid")

    value: str | int | bool
    source: str = Field(min_length=1)


class FrameworkProfile(BaseModel):
    """A training stack: its name, the release its settings were read from, and the settings."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    version: str
    source: str = Field(min_length=1)
    settings: dict[str, Setting] = Field(default_factory=dict)
    launch: TrainingLaunch | None = None

    def values(self) -> dict[str, Any]:
        """Option name -> the value this stack runs."""
        return {k: s.value for k, s in self.settings.items()}


@cache
def frameworks() -> dict[str, FrameworkProfile]:
    """Every profile by id (packaged YAML), each setting one the runs can take."""
    from fabricsim.inputs import load_packaged_yaml

    text = resources.files("fabricsim.training").joinpath("data/frameworks.yaml").read_text(encoding="utf-8")
    out = {}
    for item in load_packaged_yaml(text, "frameworks.yaml")["frameworks"]:
        profile = FrameworkProfile.model_validate(item)
        unknown = set(profile.settings) - set(SETTABLE)
        if unknown:
            raise ValueError(f"framework {profile.id}: settings {sorted(unknown)} are not run options a profile sets")
        out[profile.id] = profile
    return out


def framework_profile(name: str, *, field: str = "--framework") -> FrameworkProfile:
    """The profile of ``NAME`` or ``NAME@VERSION`` (the version must be the one the profile was read from: its
    first word, e.g. ``torchtitan@b5bcd76``); an unknown name is a SpecError listing the known ones."""
    base, _, version = name.strip().lower().partition("@")
    known = frameworks()
    if base not in known:
        raise unknown_name_error("framework", base, known, field=field)
    profile = known[base]
    read = profile.version.split()[0].lower()
    if version and version != read:
        raise SpecError(f"{profile.id} is profiled as of {profile.version}; give {profile.id} or {profile.id}@{read}",
                        field=field)
    return profile


def framework_launch_json(profile: FrameworkProfile, plan: ParallelPlan, model: ModelSpec, model_id: str,
                          gpus_per_node: int) -> dict[str, Any]:
    """The stack's own launch line for ``plan`` as JSON, ``{"train": settings}``, or ``{"error": why}`` when the
    profile has none or its flags cannot state the plan (an add-on: it never fails the prediction)."""
    if profile.launch is None:
        return {"error": f"{profile.id} has no launch settings in fabricsim"}
    label = f"{profile.id}@{profile.launch.read_at}"
    try:
        settings = training_launch(profile.launch, label, plan, model, model_id, gpus_per_node)
    except SpecError as exc:
        return {"error": str(exc)}
    return {"train": {**settings.to_json(), "instances": 1}}
