"""A GPU at a board power limit below its rating: GEMM-heavy work runs into the limit, so the sustained compute
clock falls along the GPU's catalog power curve; its tensor, attention and special-function rates scale with the
clock, while HBM, NVLink and the network keep theirs (the limit is enforced through the SM clock)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from fabricsim.catalog.catalog import Catalog
from fabricsim.catalog.models import GPU, SourcedRate, System
from fabricsim.errors import SpecError


def clock_fraction(gpu: GPU, watts: float, field: str | None = None) -> float:
    """The GPU's sustained compute clock at ``watts`` as a fraction of its clock at the rated ``tdp_w``
    (interpolated along ``power_curve``); a limit above the rating or below the curve is refused."""
    if not np.isfinite(watts) or watts <= 0:
        raise SpecError(f"a board power limit is a positive number of watts, not {watts:g}", field=field)
    if watts > gpu.tdp_w * (1 + 1e-9):
        raise SpecError(f"{gpu.id} is rated {gpu.tdp_w:g} W; a power limit of {watts:g} W is above it",
                        field=field)
    curve = gpu.power_curve
    if curve is None:
        if abs(watts - gpu.tdp_w) <= 1e-9 * gpu.tdp_w:
            return 1.0
        raise SpecError(f"the catalog has no clock-vs-power figures for {gpu.id}: it runs at its rated "
                        f"{gpu.tdp_w:g} W only (a calibration overlay can give the GPU a power_curve)", field=field)
    relative = watts / gpu.tdp_w
    lowest = curve.points[0][0]
    if relative < lowest * (1 - 1e-9):
        raise SpecError(f"{watts:g} W is below the lowest power limit {gpu.id}'s power curve covers "
                        f"({lowest * gpu.tdp_w:.0f} W)", field=field)
    powers, clocks = zip(*curve.points, strict=True)
    return float(np.interp(relative, powers, clocks))


def at_power(gpu: GPU, watts: float, field: str | None = None) -> GPU:
    """The GPU limited to ``watts``: peaks and special-function rate at the clock fraction, ``tdp_w`` the limit;
    the GPU itself at its rated power."""
    fraction = clock_fraction(gpu, watts, field)
    if fraction == 1.0 and watts == gpu.tdp_w:
        return gpu
    return at_clock(gpu, fraction, f"at {watts:g} W", {"tdp_w": float(watts)})


def at_clock(gpu: GPU, fraction: float, why: str, extra: dict[str, object] | None = None) -> GPU:
    """The GPU with its compute clock at ``fraction`` (a power limit, a straggler, thermal throttling): tensor,
    attention and special-function rates scale with it; HBM, NVLink and the network keep theirs."""
    update: dict[str, object] = {
        **(extra or {}),
        "name": f"{gpu.name} {why}",
        "bf16_flops_per_s": gpu.bf16_flops_per_s * fraction,
    }
    for name in ("fp8_flops_per_s", "fp4_flops_per_s"):
        value = getattr(gpu, name)
        if value is not None:
            update[name] = value * fraction
    if gpu.exp_per_s is not None:
        update["exp_per_s"] = SourcedRate(value=gpu.exp_per_s.value * fraction, source=gpu.exp_per_s.source,
                                          verified=gpu.exp_per_s.verified,
                                          notes=f"scaled by the clock {why} ({fraction:.3f})")
    return gpu.model_copy(update=update)


def with_gpu_clock(catalog: Catalog, gpu_id: str, fraction: float, why: str) -> Catalog:
    """The catalog with GPU ``gpu_id`` at ``fraction`` of its compute clock (the catalog itself at 1)."""
    if fraction >= 1.0:
        return catalog
    gpu = catalog.gpu(gpu_id)
    return catalog.model_copy(update={"gpus": {**catalog.gpus, gpu.id: at_clock(gpu, fraction, why)}})


def with_gpu_power(catalog: Catalog, gpu_id: str, watts: float | None, field: str | None = None) -> Catalog:
    """The catalog with GPU ``gpu_id`` limited to ``watts`` (the catalog itself for None): resolved once at the
    edge, so every layer below sees an ordinary GPU entry. Every system of that GPU draws less by the limit:
    ``power_w - gpus_per_node x (rated tdp_w - watts)`` (`limited_system`), so the bill of materials, energy,
    facility power and power caps all see it."""
    if watts is None:
        return catalog
    gpu = catalog.gpu(gpu_id)
    limited = at_power(gpu, watts, field)
    if limited is gpu:
        return catalog
    systems = {sid: limited_system(s, gpu.tdp_w, watts) if s.gpu == gpu.id else s
               for sid, s in catalog.systems.items()}
    return catalog.model_copy(update={"gpus": {**catalog.gpus, gpu.id: limited}, "systems": systems})


def limited_system(system: System, rated_w: float, watts: float) -> System:
    """``system`` with each of its GPUs limited from ``rated_w`` to ``watts``: it draws ``gpus_per_node x
    (rated_w - watts)`` less (a system without a power figure keeps None); ``rated_power_w`` keeps the rating."""
    if system.power_w is None or watts >= rated_w:
        return system
    saved = system.gpus_per_node * (rated_w - watts)
    return system.model_copy(update={"power_w": max(system.power_w - saved, 0.0),
                                     "rated_power_w": system.rated_power_w or system.power_w})


def limit_systems(catalog: Catalog, system_ids: Iterable[str], watts: float | None,
                  field: str | None = None) -> Catalog:
    """The catalog with the GPU of every named system limited to ``watts`` (the catalog itself for None); a GPU
    that cannot run at that limit (above its rating, or no power curve) is an error naming its systems."""
    if watts is None:
        return catalog
    by_gpu: dict[str, list[str]] = {}
    for sid in system_ids:
        by_gpu.setdefault(catalog.system(sid).gpu, []).append(sid)
    out = catalog
    for gpu_id, systems in by_gpu.items():
        try:
            out = with_gpu_power(out, gpu_id, watts, field)
        except SpecError as exc:
            raise SpecError(f"{exc.message} (systems {', '.join(systems)}: choose --systems whose GPUs take it)",
                            field=field) from None
    return out
