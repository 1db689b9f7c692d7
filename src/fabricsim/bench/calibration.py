"""Fit the collective model's free parameters to measured collective times (least squares, scipy).

Three parameters, each fitted only when the measurements exercise it:
- ``intra_efficiency``: the efficiency of the GPU's intra-node link technology (NVLink generation or PCIe);
- ``net_efficiency``: the efficiency of the network link technology between nodes;
- ``latency_scale``: one factor on every base and per-hop latency of the tuning table.
Residuals are log(predicted / measured time) per measurement, so small and large messages weigh alike. The
result is an overlay YAML (catalog entries replaced by id) that every model command takes via --calibration.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel
from scipy.optimize import least_squares

from fabricsim.catalog import Catalog, LinkTech, System, Tuning, default_catalog
from fabricsim.collectives import CollectiveModel, busbw_factor, check_op, group_shape
from fabricsim.collectives.group import resolve_fabric_link
from fabricsim.errors import SpecError

PARAMETERS = ("intra_efficiency", "net_efficiency", "latency_scale")
PRIOR_WEIGHT = 1e-3  # relative to a log-time residual: breaks ties, never outweighs a measurement
_BOUNDS = {"intra_efficiency": (0.02, 1.0), "net_efficiency": (0.02, 1.0), "latency_scale": (0.02, 50.0)}


@dataclass(frozen=True)
class Measurement:
    """One measured collective: nccl-tests size convention, seconds per call."""

    op: str
    nranks: int
    nnodes: int
    size_bytes: int
    time_s: float

    @property
    def busbw_GBps(self) -> float:
        return self.size_bytes / self.time_s / 1e9 * busbw_factor(self.op, self.nranks)


class CalibrationRow(BaseModel):
    op: str
    nranks: int
    size_bytes: int
    measured_busbw_GBps: float
    before_busbw_GBps: float
    after_busbw_GBps: float
    before_error: float
    after_error: float


class CalibrationResult(BaseModel):
    system: str
    fitted: list[str]
    before: dict[str, float]
    after: dict[str, float]
    rows: list[CalibrationRow]
    overlay: dict[str, Any]

    def write(self, path: str | Path) -> Path:
        out = Path(path)
        header = "# fabricsim calibration overlay: pass it to any model command with --calibration\n"
        out.write_text(header + yaml.safe_dump(self.overlay, sort_keys=False))
        return out


def _links(catalog: Catalog, system: System, fabric: str | None) -> tuple[LinkTech, LinkTech]:
    gpu = catalog.gpu(system.gpu)
    intra = catalog.link(gpu.nvlink if system.intra == "nvswitch" and gpu.nvlink else system.pcie)
    return intra, resolve_fabric_link(catalog, system, fabric)


def current_parameters(catalog: Catalog, system: System, fabric: str | None = None) -> dict[str, float]:
    intra, net = _links(catalog, system, fabric)
    return {"intra_efficiency": intra.efficiency, "net_efficiency": net.efficiency, "latency_scale": 1.0}


def _scaled_tuning(tuning: Tuning, scale: float, note: str) -> Tuning:
    return tuning.model_copy(update={
        "base_latency_s": {a: {p: v * scale for p, v in t.items()} for a, t in tuning.base_latency_s.items()},
        "hop_latency_s": {c: {a: {p: v * scale for p, v in t.items()} for a, t in per.items()}
                          for c, per in tuning.hop_latency_s.items()},
        "net_overhead_s": tuning.net_overhead_s * scale,
        "notes": note,
    })


def apply_parameters(catalog: Catalog, system: System, fabric: str | None, params: dict[str, float],
                     note: str = "") -> Catalog:
    """A catalog with the parameters applied (efficiencies as given, latencies scaled from the catalog's)."""
    intra, net = _links(catalog, system, fabric)
    links = dict(catalog.links)
    links[intra.id] = intra.model_copy(update={"efficiency": params["intra_efficiency"]})
    links[net.id] = links[net.id].model_copy(update={"efficiency": params["net_efficiency"]})
    tunings = dict(catalog.tunings)
    tunings["default"] = _scaled_tuning(catalog.tuning("default"), params["latency_scale"], note)
    return catalog.model_copy(update={"links": links, "tunings": tunings})


def predict_times(catalog: Catalog, system: System, fabric: str | None,
                  measurements: Sequence[Measurement]) -> np.ndarray:
    out = np.empty(len(measurements))
    models: dict[tuple[int, int], CollectiveModel] = {}
    for i, m in enumerate(measurements):
        key = (m.nranks, m.nnodes)
        if key not in models:
            ppn = -(-m.nranks // m.nnodes)
            shape = group_shape(system, m.nranks, ranks_per_node=ppn, fabric=fabric, catalog=catalog)
            models[key] = CollectiveModel(shape, catalog=catalog)
        out[i] = models[key].time_s(m.op, m.size_bytes)
    return out


def _fittable(measurements: Sequence[Measurement], system: System) -> list[str]:
    names = ["latency_scale"]
    if any(m.nranks > m.nnodes for m in measurements):
        names.append("intra_efficiency")
    if any(m.nnodes > 1 for m in measurements):
        names.append("net_efficiency")
    return [p for p in PARAMETERS if p in names]


def calibrate(measurements: Sequence[Measurement], system: str | System, *, fabric: str | None = None,
              catalog: Catalog | None = None, fit: Sequence[str] | None = None) -> CalibrationResult:
    """Least-squares fit of the parameters the measurements exercise; returns the overlay and the errors."""
    if not measurements:
        raise SpecError("no measurements to calibrate on", field="LOG")
    for m in measurements:
        check_op(m.op)
        if m.time_s <= 0 or m.size_bytes <= 0 or m.nranks < 2:
            raise SpecError(f"measurement {m} needs positive size and time and at least 2 ranks", field="LOG")
    cat = catalog or default_catalog()
    sysm = cat.system(system) if isinstance(system, str) else system
    names = list(fit) if fit is not None else _fittable(measurements, sysm)
    unknown = [n for n in names if n not in PARAMETERS]
    if unknown:
        raise SpecError(f"unknown parameter {unknown[0]!r}; allowed: {', '.join(PARAMETERS)}", field="fit")
    before = current_parameters(cat, sysm, fabric)
    measured = np.array([m.time_s for m in measurements])

    def params_of(x: np.ndarray) -> dict[str, float]:
        p = dict(before)
        p.update({n: float(np.exp(v)) for n, v in zip(names, x, strict=True)})
        return p

    prior = np.log([before[n] for n in names])

    def residuals(x: np.ndarray) -> np.ndarray:
        """Log time errors, plus a weak pull towards the catalog's values so that parameters the data cannot
        tell apart (e.g. NVLink and network efficiency from one 2-node sweep) stay where the catalog had them."""
        trial = apply_parameters(cat, sysm, fabric, params_of(x))
        misfit = np.log(predict_times(trial, sysm, fabric, measurements) / measured)
        out: np.ndarray = np.concatenate([misfit, PRIOR_WEIGHT * (x - prior)])
        return out

    lower = np.log([_BOUNDS[n][0] for n in names])
    upper = np.log([_BOUNDS[n][1] for n in names])
    best = None
    starts = [np.log([min(max(before[n], _BOUNDS[n][0]), _BOUNDS[n][1]) for n in names])]
    starts += [np.log([0.5 if n != "latency_scale" else 2.0 for n in names]),
               np.log([0.9 if n != "latency_scale" else 0.5 for n in names])]
    for x0 in starts:
        x0 = np.clip(x0, lower + 1e-9, upper - 1e-9)
        sol = least_squares(residuals, x0, bounds=(lower, upper), x_scale=1.0, diff_step=1e-4,
                            xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=400)
        if best is None or sol.cost < best.cost:
            best = sol
    assert best is not None
    after = params_of(best.x)
    note = f"calibrated by fabricsim calibrate on {dt.date.today().isoformat()} from {len(measurements)} points"
    fitted_catalog = apply_parameters(cat, sysm, fabric, after, note)
    t_before = predict_times(cat, sysm, fabric, measurements)
    t_after = predict_times(fitted_catalog, sysm, fabric, measurements)
    rows = []
    for m, tb, ta in zip(measurements, t_before, t_after, strict=True):
        factor = busbw_factor(m.op, m.nranks)
        meas_bw = m.busbw_GBps
        bw_b, bw_a = m.size_bytes / tb / 1e9 * factor, m.size_bytes / ta / 1e9 * factor
        rows.append(CalibrationRow(op=m.op, nranks=m.nranks, size_bytes=m.size_bytes, measured_busbw_GBps=meas_bw,
                                   before_busbw_GBps=bw_b, after_busbw_GBps=bw_a,
                                   before_error=(bw_b - meas_bw) / meas_bw, after_error=(bw_a - meas_bw) / meas_bw))
    return CalibrationResult(system=sysm.id, fitted=names, before=before, after=after, rows=rows,
                             overlay=_overlay(fitted_catalog, sysm, fabric, note))


def _overlay(catalog: Catalog, system: System, fabric: str | None, note: str) -> dict[str, Any]:
    intra, net = _links(catalog, system, fabric)
    entries = {link.id: link for link in (intra, net)}
    links = []
    for link in entries.values():
        data = link.model_dump(mode="json")
        data["source"] = f"{link.source}; efficiency {note}"
        links.append(data)
    tuning = catalog.tuning("default").model_dump(mode="json")
    tuning["source"] = f"{tuning['source']}; latencies {note}"
    return {"links": links, "tunings": [tuning]}
