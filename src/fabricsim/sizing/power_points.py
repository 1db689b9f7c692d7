"""GPU board power as a search dimension (`size --gpu-power-points`): each candidate system is searched at each
operating point (a fraction of its GPU's rating, or watts), so more GPUs at lower power are weighed against fewer at
full power under a facility limit. A point a GPU cannot run at (no power curve, above its rating, below its curve)
is skipped for that system with a note; the catalog of a point limits the GPU (and every system of it: their power
falls with it, `catalog.with_gpu_power`) once per search and point."""

from __future__ import annotations

from functools import lru_cache

from fabricsim.caching import ByIdentity
from fabricsim.catalog import Catalog, clock_fraction, with_gpu_power
from fabricsim.errors import SpecError
from fabricsim.sizing.spec import SizingSpec

PowerPoint = float | None
"""A GPU board power in W; None: the catalog's (the rating, or --gpu-power)."""


def point_watts(point: float, rated_w: float) -> float:
    """An operating point in W: up to 1 a fraction of ``rated_w``, above 1 watts."""
    return point * rated_w if point <= 1.0 else point


def system_points(spec: SizingSpec, catalog: Catalog, system_id: str) -> tuple[tuple[PowerPoint, ...], list[str]]:
    """The GPU board powers ``system_id`` is searched at (None: its rating), and a note per point it cannot run at
    (skipped, not an error)."""
    if not spec.gpu_power_points:
        return (None,), []
    gpu = catalog.gpu(catalog.system(system_id).gpu)
    out: list[PowerPoint] = []
    notes: list[str] = []
    for point in spec.gpu_power_points:
        watts = point_watts(point, gpu.tdp_w)
        if abs(watts - gpu.tdp_w) <= 1e-9 * gpu.tdp_w:
            out.append(None)
            continue
        try:
            clock_fraction(gpu, watts)
        except SpecError as exc:
            notes.append(f"{system_id} skips the {watts:g} W point: {exc.message}")
            continue
        out.append(float(watts))
    return tuple(dict.fromkeys(out)) or (None,), notes


def skipped_points(spec: SizingSpec, catalog: Catalog, system_ids: tuple[str, ...]) -> list[str]:
    """The notes of every operating point a candidate system skips."""
    return [note for sid in system_ids for note in system_points(spec, catalog, sid)[1]]


def point_catalog(catalog: Catalog, system_id: str, watts: PowerPoint) -> Catalog:
    """``catalog`` with the GPU of ``system_id`` at ``watts`` (the catalog itself for None), cached per catalog and
    point so every cluster of a point shares one (and the caches keyed on it)."""
    if watts is None:
        return catalog
    return _limited(ByIdentity(catalog), catalog.system(system_id).gpu, watts)


@lru_cache(maxsize=64)
def _limited(catalog: ByIdentity[Catalog], gpu_id: str, watts: float) -> Catalog:
    return with_gpu_power(catalog.value, gpu_id, watts, "--gpu-power-points")
