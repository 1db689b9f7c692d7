"""The search specs `fabricsim size` reads from its options: a training SizingSpec (clusters x plans, goodput
variants) and an InferenceSizingSpec (systems x serving plans at a request rate); every error names the option."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabricsim import units
from fabricsim.api.goodput import goodput_spec
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from fabricsim.sizing import InferenceSizingSpec, SizingSpec

DEFAULT_TOKENS = "15T"
# options `size` reads for training only: given with --inference they are an error, not ignored
# size options held fixed in every plan, each named as the plan field it sets
MOE_FIXED = ("dropout", "ep_comm_overlap", "shared_expert_overlap", "moe_balance", "moe_dispatcher",
             "capacity_factor")
TRAINING_ONLY = ("tokens", "deadline", "budget", "facility", "cooling", "gpu_power_points", "gpus", "nodes", "cp",
                 "etp", "vpp", "mbs", "recompute",
                 "fabric_kinds", "framework", "congestion",
                 "zero", "precision", "executor", "storage_bw", "checkpoint_interval", "restart", *MOE_FIXED)
EXECUTORS = ("local", "ray", "serial")
MAX_SEQ = 2**24


def sizing_spec(**kw: Any) -> SizingSpec:
    """The SizingSpec of `size`'s options (parsed, validated; bad input is a SpecError)."""
    from pydantic import ValidationError

    from fabricsim.errors import cli_field, spec_error
    from fabricsim.sizing import Knobs, check_plan_value, parse_list, sizing_defaults
    from fabricsim.training import FRAMEWORK_SEARCHED

    defaults = sizing_defaults()
    fixed: dict[str, Any] = {"flash_attention": kw["flash_attn"]}
    if not kw["overlap"]:
        fixed.update(overlap_grad_reduce=False, overlap_param_gather=False)
    for field in MOE_FIXED:  # held as given in every plan (only when given: resumable digests)
        if kw.get(field) is not None:
            check_plan_value(field, kw[field], f"--{field.replace('_', '-')}")
            fixed[field] = kw[field]
    stack = stack_settings(kw.get("framework"))
    for field, value in stack.items():  # the stack's settings, held in every plan (the searched ones: candidates)
        if field not in FRAMEWORK_SEARCHED and field not in fixed:
            fixed[field] = value
    try:
        knobs = Knobs(tp=parse_list(kw["tp"], "--tp", int), pp=parse_list(kw["pp"], "--pp", int),
                      cp=parse_list(kw["cp"], "--cp", int), ep=parse_list(kw["ep"], "--ep", int),
                      etp=parse_list(kw["etp"], "--etp", int),
                      vpp=parse_list(kw["vpp"], "--vpp", int), mbs=parse_list(kw["mbs"], "--mbs", int),
                      recompute=parse_list(kw["recompute"], "--recompute") if kw["recompute"] is not None
                      else _stack_knob(stack, "recompute"),
                      zero=parse_list(kw["zero"], "--zero", int) if kw["zero"] is not None
                      else _stack_knob(stack, "zero"), precision=parse_list(kw["precision"], "--precision"))
        return _build_spec(kw, knobs, fixed, defaults)
    except ValidationError as exc:  # name the option, not the spec field (deadline_s -> --deadline)
        raise cli_field(spec_error(exc), SPEC_OPTIONS) from None


def stack_settings(name: str | None) -> dict[str, Any]:
    """The settings of the training stack ``--framework`` names (none: fabricsim's defaults, Megatron-Core's)."""
    if name is None:
        return {}
    from fabricsim.training import framework_profile

    return framework_profile(name).values()


def _stack_knob(stack: dict[str, Any], knob: str) -> tuple[Any, ...] | None:
    """A searched knob the stack runs at one setting (ZeRO 3 under FSDP, MaxText's full recompute), else None (the
    search's own candidates)."""
    return (stack[knob],) if knob in stack else None


# SizingSpec fields whose option is named otherwise
SPEC_OPTIONS = {"deadline_s": "--deadline", "budget_usd": "--budget", "power_cap_w": "--facility",
                "gpus": "--gpus", "nodes": "--nodes", "amortize_s": "--amortize", "gpu_hour_usd": "--gpu-hour",
                "kwh_usd": "--kwh", "pue": "--pue", "top": "--top", "seq": "--seq", "tokens": "--tokens"}


def _build_spec(kw: dict[str, Any], knobs: Any, fixed: dict[str, Any], defaults: Any) -> SizingSpec:
    """The SizingSpec itself (pydantic checks the ranges)."""
    from fabricsim import inputs
    from fabricsim.inputs import finite
    from fabricsim.sizing import (
        DEFAULT_FABRICS,
        DEFAULT_GPUS,
        SizingSpec,
        overlay_catalog,
        parse_int_range,
        parse_list,
        parse_money,
        parse_power_points,
        parse_years,
    )

    if kw["gpus"] is not None and kw["nodes"] is not None:
        raise SpecError("give --gpus or --nodes, not both", field="--nodes")
    gpus_text = DEFAULT_GPUS if kw["gpus"] is None and kw["nodes"] is None else kw["gpus"]
    gpus = None if gpus_text is None else parse_int_range(gpus_text, "--gpus")
    if kw.get("gpu_power_points") is not None and kw.get("gpu_power") is not None:
        raise SpecError("--gpu-power limits every GPU to one power; --gpu-power-points searches several: give one",
                        field="--gpu-power-points")
    hall = None
    if kw.get("cooling") is not None:  # the class's PUE applies unless --pue is given
        hall = overlay_catalog(tuple(str(p) for p in kw.get("calibration") or ())).cooling_class(kw["cooling"])
    cooling = None if hall is None else hall.id
    return SizingSpec(
        model=kw["model"], seq=kw["seq"],
        tokens=finite(units.parse_count(kw["tokens"] or DEFAULT_TOKENS, field="--tokens"), "--tokens", low=0,
                      low_open=True),
        gbs=parse_int_range(kw["gbs"], "--gbs"),
        gpus=gpus, gpus_range=(min(gpus), max(gpus)) if gpus is not None and ".." in gpus_text else None,
        nodes=None if kw["nodes"] is None else parse_int_range(kw["nodes"], "--nodes"),
        systems=parse_list(kw["systems"], "--systems"),
        fabrics=parse_list(kw["fabrics"], "--fabrics") or DEFAULT_FABRICS,
        fabric_kinds=_fabric_kinds(kw["fabric_kinds"]),
        oversubscription=tuple(inputs.oversubscription(v) for v in
                              parse_list(kw["oversubscription"], "--oversubscription", float) or (1.0,)),
        rail_optimized=kw["rail_optimized"], knobs=knobs, fixed=fixed,
        deadline_s=None if kw["deadline"] is None else units.parse_duration(kw["deadline"], field="--deadline"),
        budget_usd=None if kw["budget"] is None else parse_money(kw["budget"], "--budget"),
        power_cap_w=_facility(kw), cooling=cooling,
        gpu_power_points=parse_power_points(kw.get("gpu_power_points"), "--gpu-power-points"),
        objective=kw["objective"],
        amortize_s=parse_years(kw["amortize"] or f"{defaults['amortize_years'].value:g}y", "--amortize"),
        gpu_hour_usd=None if kw["gpu_hour"] is None else parse_money(kw["gpu_hour"], "--gpu-hour"),
        pue=kw["pue"] if kw["pue"] is not None else hall.pue.value if hall is not None else defaults["pue"].value,
        kwh_usd=kw["kwh"] if kw["kwh"] is not None else defaults["kwh_usd"].value,
        top=kw["top"], calibration=tuple(str(p) for p in kw.get("calibration") or ()), gpu_power=kw.get("gpu_power"),
        **_goodput_search(kw),
    )


def _facility(kw: dict[str, Any]) -> float | None:
    """--facility (the facility power limit, IT x PUE) in W; ``power_cap``, its old name, means the same."""
    from fabricsim.sizing import parse_power_cap

    text = kw.get("facility", kw.get("power_cap"))
    if text is None:
        return None
    watts = parse_power_cap(text, "--facility")
    if not watts > 0:
        raise SpecError(f"must be > 0 W, got {text!r} (the facility power limit; --power-cap is its old name)",
                        field="--facility")
    return watts


def _fabric_kinds(text: str | None) -> tuple[str, ...]:
    """--fabric-kinds as a checked tuple (default: all three, `sizing.defaults.DEFAULT_FABRIC_KINDS`)."""
    from fabricsim.sizing import DEFAULT_FABRIC_KINDS, parse_list

    kinds = parse_list(text, "--fabric-kinds") or DEFAULT_FABRIC_KINDS
    bad = [k for k in kinds if k not in ("fat-tree", "rail-only", "2-plane")]
    if bad:
        raise SpecError(f"{', '.join(bad)}: size searches fat-tree, rail-only and 2-plane fabrics",
                        field="--fabric-kinds")
    return tuple(dict.fromkeys(kinds))


def _goodput_search(kw: dict[str, Any]) -> dict[str, Any]:
    """SizingSpec's goodput fields: the first storage tier, write rate and spare count, and every combination of the
    lists --storage, --storage-bw and --spares give, searched per cluster (`sizing.reliability`)."""
    import itertools

    from fabricsim.sizing import parse_list

    if not kw["goodput"]:
        return {"goodput": None}
    tiers = parse_list(kw["storage"], "--storage") or ("superpod-better",)
    spares = parse_list(kw["spares"], "--spares") if kw["spares"] is not None else (None,)
    rates = parse_list(kw["storage_bw"], "--storage-bw") if kw["storage_bw"] is not None else (None,)
    variants = tuple(goodput_spec(tier, rate, kw["checkpoint_mode"], kw["checkpoint_interval"],
                                  kw["mtbf_scale"], kw["restart"], network=kw["storage_network"],
                                  server=kw["storage_server"], servers=kw["storage_servers"], spares=spare)
                     for tier, rate, spare in itertools.product(tiers, rates or (None,), spares or (None,)))
    return {"goodput": variants[0], "goodput_variants": variants if len(variants) > 1 else ()}



def _rate(text: str) -> float:
    """Requests per second from ``20``, ``20/s`` or ``1.2k``."""
    value = text.strip().lower().removesuffix("/s").removesuffix("rps").strip()
    if value.startswith("-"):
        raise SpecError(f"must be > 0 requests/s, got {text!r}", field="--rate")
    return units.parse_count(value, field="--rate")


def inference_spec(kw: dict[str, Any]) -> InferenceSizingSpec:
    """The InferenceSizingSpec of the command's options (parsed, validated; bad input is a SpecError)."""
    from fabricsim.sizing import InferenceSizingSpec, parse_list, parse_money, parse_years, sizing_defaults

    for flag, key in (("--rate", "rate"), ("--slo-ttft", "slo_ttft"), ("--slo-tpot", "slo_tpot")):
        if kw[key] is None:
            raise SpecError("is required with --inference", field=flag)
    defaults = sizing_defaults()
    fields: dict[str, Any] = {
        "model": kw["model"], "rate_per_s": _rate(kw["rate"]),
        "slo_ttft_s": units.parse_duration(kw["slo_ttft"], field="--slo-ttft"),
        "slo_tpot_s": units.parse_duration(kw["slo_tpot"], field="--slo-tpot"),
        "prompt_tokens": kw["prompt"], "output_tokens": kw["output"],
        "systems": parse_list(kw["systems"], "--systems"), "fabrics": parse_list(kw["fabrics"], "--fabrics"),
        "tp": parse_list(kw["tp"], "--tp", int), "pp": parse_list(kw["pp"], "--pp", int),
        "ep": parse_list(kw["ep"], "--ep", int), "max_gpus": kw["max_gpus"], "seed": kw["seed"],
        "whole_nodes": kw["whole_nodes"], "rail_optimized": kw["rail_optimized"], "top": kw["top"],
        "amortize_s": parse_years(kw["amortize"] or f"{defaults['amortize_years'].value:g}y", "--amortize"),
        "gpu_hour_usd": None if kw["gpu_hour"] is None else parse_money(kw["gpu_hour"], "--gpu-hour"),
        "pue": kw["pue"] if kw["pue"] is not None else defaults["pue"].value,
        "kwh_usd": kw["kwh"] if kw["kwh"] is not None else defaults["kwh_usd"].value,
        "engine": kw.get("engine") or "trtllm", "disagg": bool(kw.get("disagg")), "checkpoint": kw.get("checkpoint"),
        "lengths": kw.get("lengths") or "fixed", "kv_tier": (kw.get("kv_tier") or "none").strip().lower(),
        "prefix_network": kw.get("prefix_network") or 0.0, "kv_server": kw.get("kv_server"),
        "kv_servers": kw.get("kv_servers"),
    }
    if fields["checkpoint"] is not None and not fields["checkpoint"].strip():
        raise SpecError("empty; name the checkpoint path or hub id of the launch commands, or leave the option out "
                        "(the model's name)", field="--checkpoint")
    for key in ("weights", "kv"):  # unset: the spec's defaults
        if kw[key] is not None:
            fields[key] = tuple(v.lower() for v in parse_list(kw[key], f"--{key}") or ())
    if kw["duration"] is not None:
        fields["duration_s"] = units.parse_duration(kw["duration"], field="--duration")
    for key, name in (("slo_percentile", "slo_percentile"), ("utilization", "target_utilization"),
                      ("confirm", "confirm_top")):
        if kw[key] is not None:
            fields[name] = kw[key]
    spec = InferenceSizingSpec.build(**fields)
    from fabricsim.sizing import check_tier_spec

    check_tier_spec(spec)
    return spec
