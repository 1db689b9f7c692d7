"""An engine's own launch settings for a plan: the command line (and config file) that starts the engine with the
parallelism, formats, batch and prefill budget fabricsim priced, so a chosen plan can be deployed as is. The flag
names live in ``data/engines.yaml`` (each release's ``launch`` block), not here."""

from __future__ import annotations

from typing import Any

from fabricsim.catalog import GPU, LaunchSettings, config_text, render_flags
from fabricsim.errors import SpecError
from fabricsim.inference.engines import Launch
from fabricsim.inference.plan import InferencePlan

ROLES = ("prefill", "decode")
PARALLEL_FIELDS = ("tp", "pp", "dp", "ep")


def launch_settings(plan: InferencePlan, gpu: GPU, model: str, *, max_seqs: int | None = None,
                    max_batched_tokens: int | None = None, chunked_prefill: bool | None = None,
                    role: str | None = None) -> LaunchSettings:
    """How to start ``plan``'s engine release for ``model`` (a checkpoint path or hub id) on ``gpu``: its
    parallelism, weight and KV formats, memory fraction, batch and prefill budget (the engine's defaults where not
    given), and the ``role`` of a disaggregated pool (prefill or decode). A release without launch settings, or a
    plan its flags cannot state, is a one-line error."""
    engine = plan.engine_profile
    launch: Launch | None = engine.settings.launch
    if launch is None:
        raise SpecError(f"{engine.name} {engine.version} has no launch settings in fabricsim (releases with them: "
                        f"{_with_launch(engine.engine)})", field="--engine")
    if role is not None and role not in ROLES:
        raise SpecError(f"unknown role {role!r}; allowed: {', '.join(ROLES)}", field="role")
    values: dict[str, Any] = {
        "model": model, "tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "ep": plan.ep, "tp_x_dp": plan.tp * plan.dp,
        "max_seqs": max_seqs or plan.max_seqs(gpu), "max_batched_tokens": max_batched_tokens or
        plan.max_batched_tokens(gpu),
        "chunked_prefill": engine.scheduler.chunked_prefill if chunked_prefill is None else chunked_prefill,
        "memory_fraction": engine.settings.kv_memory.fraction, "weights": plan.weights, "kv": plan.kv,
    }
    argv = [part.format(**values) for part in launch.command]
    rendered = render_flags(list(launch.flags), values)
    argv += rendered.args
    options, notes, stated = rendered.options, rendered.notes, rendered.stated
    if "tp_x_dp" in stated:  # the engine's tensor-parallel flag spans the attention data-parallel ranks too
        stated.add("tp")
    missing = rendered.unstated(values, PARALLEL_FIELDS)
    if missing is not None:
        raise SpecError(f"{engine.name} {engine.version}'s launch settings cannot state {missing}={values[missing]}; "
                        "run it as separate servers, or pick a release that has the flag", field=f"--{missing}")
    offload = engine.settings.kv_offload
    if plan.prefix_host and offload is not None:  # the plan counts on the host tier: switch it on
        argv += list(offload.args)
        if offload.note:
            notes.append(offload.note)
    if role is not None:
        if role not in launch.roles:
            raise SpecError(f"{engine.name} {engine.version} has no disaggregated launch settings in fabricsim, so "
                            "no command per pool is printed (the simulation above still ran); releases with them: "
                            f"{_with_launch(None, disaggregated=True)}", field="--disagg")
        argv += [part.format(**values) for part in launch.roles[role]]
    files: dict[str, str] = {}
    if options:
        if launch.config_file is None or launch.config_flag is None:
            raise SpecError(f"{engine.name} {engine.version}: a setting needs a config file its profile does not "
                            "name", field="--engine")
        files[launch.config_file] = config_text(launch.config_file, options)
        argv += [launch.config_flag, launch.config_file]
    return LaunchSettings(engine.label, tuple(argv), files, tuple(notes))


def _with_launch(engine_id: str | None, disaggregated: bool = False) -> str:
    """The release ranges (of ``engine_id``, or of every engine) with launch settings (``disaggregated``: with a
    command per prefill and decode pool)."""
    from fabricsim.inference.engines import engines

    ranges: list[str] = []
    for e in engines().values():
        if engine_id not in (None, e.id):
            continue
        before = False  # a run of consecutive ranges with them is named by its first
        for v in e.versions:
            has = v.launch is not None and (not disaggregated or set(ROLES) <= set(v.launch.roles))
            if has and not before:
                ranges.append(f"{e.id}@{v.since}+")
            before = has
    return ", ".join(ranges) or "none"


def launch_json(plan: InferencePlan, gpu: GPU, model: str, *, max_seqs: int | None = None,
                max_batched_tokens: int | None = None, chunked_prefill: bool | None = None,
                disagg: tuple[int, int] | None = None, decode: tuple[InferencePlan, GPU] | None = None
                ) -> dict[str, Any]:
    """The launch settings of ``plan`` as JSON: {role: settings}, ``serve`` alone or ``prefill`` and ``decode``
    with their instance counts under ``disagg`` (the decode pool on its own plan and GPU when ``decode`` gives
    them); {"error": why} when the release or the plan has none."""
    pools: list[tuple[str, str | None, int, InferencePlan, GPU]] = (
        [("serve", None, 1, plan, gpu)] if disagg is None else
        [("prefill", "prefill", disagg[0], plan, gpu), ("decode", "decode", disagg[1], *(decode or (plan, gpu)))])
    out: dict[str, Any] = {}
    try:
        for name, role, count, pool_plan, pool_gpu in pools:
            settings = launch_settings(pool_plan, pool_gpu, model, max_seqs=max_seqs,
                                       max_batched_tokens=max_batched_tokens, chunked_prefill=chunked_prefill,
                                       role=role)
            out[name] = {**settings.to_json(), "instances": count}
    except SpecError as exc:
        return {"error": str(exc)}
    return out
