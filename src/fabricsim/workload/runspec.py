"""Build a training plan from run options: the one mapping the CLI flags and validation cases share."""

from __future__ import annotations

from typing import Any

from fabricsim.errors import SpecError
from fabricsim.workload.plan import ParallelPlan

# Flags a validation case's `extra` list may carry, and the plan field or run option each sets.
EXTRA_FLAGS: dict[str, tuple[str, type]] = {
    "--recompute": ("recompute", str),
    "--mbs": ("mbs", int),
    "--zero": ("zero", int),
    "--cp": ("cp", int),
    "--ep": ("ep", int),
    "--vpp": ("virtual_stages", int),
    "--order": ("order", str),
}
SWITCH_FLAGS: dict[str, tuple[str, bool]] = {
    "--flash-attn": ("flash_attention", True),
    "--overlap-grad-reduce": ("overlap_grad_reduce", True),
    "--overlap-param-gather": ("overlap_param_gather", True),
    "--no-sequence-parallel": ("sequence_parallel", False),
}
RUN_OPTIONS = ("flash_attention",)


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
                raise SpecError(f"{extra[i + 1]!r} is not a valid {kind.__name__}", field=flag) from None
            i += 2
        else:
            allowed = ", ".join([*EXTRA_FLAGS, *SWITCH_FLAGS])
            raise SpecError(f"unknown or incomplete flag {flag!r}; allowed: {allowed}", field="extra")
    return out


def plan_and_options(fields: dict[str, Any]) -> tuple[ParallelPlan, dict[str, Any]]:
    """Split run fields into a validated ParallelPlan and the run options that are not plan fields."""
    plan_fields = {k: v for k, v in fields.items() if k not in RUN_OPTIONS and v is not None}
    options = {k: fields[k] for k in RUN_OPTIONS if k in fields}
    return ParallelPlan.build(**plan_fields), options
