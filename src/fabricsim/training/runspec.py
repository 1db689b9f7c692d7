"""Build a training plan from run options: the one mapping the CLI flags and validation cases share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fabricsim.errors import SpecError
from fabricsim.training.plan import ParallelPlan


def parse_layout(text: str | None) -> tuple[int, ...] | None:
    """`'7,8,8,7'` -> (7, 8, 8, 7): layers per pipeline stage; None or '' -> None (automatic layout)."""
    if text is None or not text.strip():
        return None
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise SpecError(f"{text!r} is not a comma-separated list of layer counts (e.g. 7,8,8,7)",
                        field="--pp-layout") from None
    if min(counts) < 1:
        raise SpecError(f"every stage needs at least one layer, got {text!r}", field="--pp-layout")
    return counts


# Flags a validation case's `extra` list may carry, and the plan field each sets.
EXTRA_FLAGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--recompute": ("recompute", str),
    "--mbs": ("mbs", int),
    "--zero": ("zero", int),
    "--cp": ("cp", int),
    "--ep": ("ep", int),
    "--etp": ("etp", int),
    "--moe-balance": ("moe_balance", str),
    "--capacity-factor": ("capacity_factor", float),
    "--moe-dispatcher": ("moe_dispatcher", str),
    "--vpp": ("virtual_stages", int),
    "--order": ("order", str),
    "--precision": ("precision", str),
    "--kernels": ("kernels", str),
    "--attention-kernel": ("attention_kernel", str),
    "--zero3-gathers-per-layer": ("zero3_gathers_per_layer", int),
    "--zero3-reduce-bucket-params": ("zero3_reduce_bucket_params", float),
    "--grad-dtype": ("grad_dtype", str),
    "--pp-layout": ("pp_layout", parse_layout),
}
# Boolean switches: each has an on and an off form.
SWITCHES: dict[str, str] = {
    "flash-attn": "flash_attention",
    "sequence-parallel": "sequence_parallel",
    "overlap-grad-reduce": "overlap_grad_reduce",
    "overlap-param-gather": "overlap_param_gather",
    "tp-comm-overlap": "tp_comm_overlap",
    "ep-comm-overlap": "ep_comm_overlap",
    "shared-expert-overlap": "shared_expert_overlap",
    "dropout": "dropout",
    "fsdp-copy-out": "fsdp_copy_out",
}
SWITCH_FLAGS: dict[str, tuple[str, bool]] = {
    **{f"--{flag}": (name, True) for flag, name in SWITCHES.items()},
    **{f"--no-{flag}": (name, False) for flag, name in SWITCHES.items()},
}


def parse_extra(extra: list[str]) -> dict[str, Any]:
    """`['--recompute', 'full', '--flash-attn']` -> {'recompute': 'full', 'flash_attention': True}."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(extra):
        flag = extra[i]
        if flag in SWITCH_FLAGS:
            name, value = SWITCH_FLAGS[flag]
            out[name] = value
            i += 1
        elif flag in EXTRA_FLAGS and i + 1 < len(extra):
            name, kind = EXTRA_FLAGS[flag]
            try:
                out[name] = kind(extra[i + 1])
            except ValueError:
                raise SpecError(f"{extra[i + 1]!r} is not a valid value", field=flag) from None
            i += 2
        else:
            allowed = ", ".join([*EXTRA_FLAGS, *SWITCH_FLAGS])
            raise SpecError(f"unknown or incomplete flag {flag!r}; allowed: {allowed}", field="extra")
    return out


def build_plan(fields: dict[str, Any]) -> ParallelPlan:
    """A validated ParallelPlan from run fields (None means: the plan's default)."""
    return ParallelPlan.build(**{k: v for k, v in fields.items() if v is not None})
