"""Fit the collective model's free parameters to measured collective times (least squares, scipy).

Three parameters, each fitted only when the measurements exercise it:
- ``intra_efficiency``: the efficiency of the GPU's intra-node link technology (NVLink generation or PCIe);
- ``net_efficiency``: the efficiency of the network link technology between nodes;
- ``latency_scale``: one factor on every base and per-hop latency of the tuning table.
Residuals are log(predicted / measured time) per measurement, so small and large messages weigh alike. The
result is an overlay YAML (catalog entries replaced by id) that every model command takes via --calibration.

Guards (issue 10, item 6): `check_results` refuses a log that cannot belong to the system (a CPU/gloo run, devices
the nccl-tests header names that are not the system's GPU, more ranks on a host than the node has GPUs); the fit
writes nothing unless it beats the catalog on its own measurements: better overall and worse on no log (issue 21;
otherwise it keeps the catalog's parameters and says why);
it warns on a parameter at its bound and on a log whose error stays above `RESIDUAL_WARN`; and it reports each log's
error before and after.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel
from scipy.optimize import least_squares

from fabricsim.catalog import Catalog, LinkTech, System, Tuning, default_catalog
from fabricsim.collectives import CollectiveModel, busbw_factor, check_op, group_shape, resolve_fabric_link
from fabricsim.errors import SpecError
from fabricsim.nccltests import BenchResult

PARAMETERS = ("intra_efficiency", "net_efficiency", "latency_scale")
RESIDUAL_WARN = 0.15
"""largest |busbw error| (fraction) of a log after fitting above which calibrate warns: the fitted parameters do
not explain that log (a mechanism the model lacks, or a log from another setup), so the overlay should not be
trusted for it"""
BOUND_TOLERANCE = 0.01
"""a fitted parameter within this relative distance of a bound counts as pinned at it (the data want it beyond)"""
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
    log: str = ""
    """file the measurement came from (groups the per-log report)"""

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


class LogError(BaseModel):
    """One log's busbw error (fractions) with the catalog's parameters (before) and the fitted ones (after)."""

    log: str
    points: int
    before_mean_abs_error: float
    before_max_abs_error: float
    after_mean_abs_error: float
    after_max_abs_error: float


class CalibrationResult(BaseModel):
    system: str
    fitted: list[str]
    before: dict[str, float]
    after: dict[str, float]
    rows: list[CalibrationRow]
    overlay: dict[str, Any]
    logs: list[LogError] = []
    rms_log_error_before: float = 0.0
    """root mean square of log(predicted / measured time) with the catalog's parameters"""
    rms_log_error_fit: float = 0.0
    """the same with the fitted parameters (before any fallback)"""
    kept_catalog: bool = False
    """True when the fit was no better than the catalog on these measurements: ``after`` is the catalog's"""
    warnings: list[str] = []

    def write(self, path: str | Path) -> Path:
        out = Path(path)
        header = "# fabricsim calibration overlay: pass it to any model command with --calibration\n"
        out.write_text(header + yaml.safe_dump(self.overlay, sort_keys=False))
        return out


def _family(gpu_id: str) -> str:
    """GPU family of a catalog GPU id: ``h100-sxm`` -> ``h100``."""
    return gpu_id.split("-")[0].lower()


def device_matches(name: str, gpu_id: str) -> bool:
    """Whether a device name from an nccl-tests header (``NVIDIA H100 80GB HBM3``) can be the catalog GPU: same family
    token, and the PCIe / NVL form factor when either names one."""
    tokens = set(re.split(r"[^a-z0-9]+", name.lower()))
    variant = gpu_id.lower().split("-")[1:]
    if _family(gpu_id) not in tokens:
        return False
    return ("pcie" in tokens) == ("pcie" in variant) and ("nvl" in tokens) == ("nvl" in variant)


def check_results(results: Sequence[BenchResult], system: System, catalog: Catalog, *, source: str) -> list[str]:
    """Refuse (SpecError) results that cannot have run on ``system``: a CPU or gloo run, devices that are not the
    system's GPU, more ranks on a host than a node has GPUs. Returns warnings for what cannot be checked."""
    gpu = catalog.gpu(system.gpu)
    what = f"cannot belong to {system.id} ({system.gpus_per_node} x {gpu.name})"
    warnings: list[str] = []
    for result in results:
        cpu = [d for d in result.devices if d.device < 0 or (d.bus_id or "").lower() == "cpu"]
        if (result.backend or "nccl").lower() != "nccl" or cpu:
            raise SpecError(f"a CPU run (backend {result.backend or 'unknown'}) {what}; calibrate on an NCCL run of "
                            "that system", source=source)
        names = sorted({d.name.strip() for d in result.devices if d.name.strip()})
        wrong = [n for n in names if not device_matches(n, gpu.id)]
        if wrong:
            raise SpecError(f"devices {', '.join(repr(n) for n in wrong)} {what}", source=source)
        if not names:
            warnings.append(f"{source}: the log names no devices; cannot check it ran on {system.id}")
        per_host: dict[str, int] = {}
        for d in result.devices:
            per_host[d.host] = per_host.get(d.host, 0) + 1
        if per_host and max(per_host.values()) > system.gpus_per_node:
            host, n = max(per_host.items(), key=lambda kv: kv[1])
            raise SpecError(f"{n} ranks on host {host} {what}", source=source)
    return warnings


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
    t_fit = predict_times(fitted_catalog, sysm, fabric, measurements)
    rows_before = _rows(measurements, t_before, t_before)
    rows_fit = _rows(measurements, t_before, t_fit)
    rms_before, rms_fit = _rms_log_error(t_before, measured), _rms_log_error(t_fit, measured)
    warnings: list[str] = []
    logs = _log_errors(measurements, rows_fit)
    why = _no_better(rows_fit, rms_fit, rms_before, logs)
    kept = why is not None
    if kept:
        warnings.append(f"the fit does not beat the catalog on its own measurements ({why}): kept the catalog's "
                        "parameters, no overlay")
        after, rows = dict(before), rows_before
        logs = _log_errors(measurements, rows)
    else:
        warnings += _bound_warnings(names, after)
        rows = rows_fit
    warnings += _log_warnings(logs, kept)
    return CalibrationResult(system=sysm.id, fitted=names, before=before, after=after, rows=rows,
                             overlay={} if kept else {**_overlay(fitted_catalog, sysm, fabric, note),
                                                      "measurements": _measurement_records(measurements, sysm)},
                             logs=logs,
                             rms_log_error_before=rms_before, rms_log_error_fit=rms_fit, kept_catalog=kept,
                             warnings=warnings)


def _rows(measurements: Sequence[Measurement], t_before: np.ndarray, t_after: np.ndarray) -> list[CalibrationRow]:
    """Measured and predicted busbw per measurement, with the relative errors."""
    rows = []
    for m, tb, ta in zip(measurements, t_before, t_after, strict=True):
        factor = busbw_factor(m.op, m.nranks)
        meas_bw = m.busbw_GBps
        bw_b, bw_a = m.size_bytes / tb / 1e9 * factor, m.size_bytes / ta / 1e9 * factor
        rows.append(CalibrationRow(op=m.op, nranks=m.nranks, size_bytes=m.size_bytes, measured_busbw_GBps=meas_bw,
                                   before_busbw_GBps=bw_b, after_busbw_GBps=bw_a,
                                   before_error=(bw_b - meas_bw) / meas_bw, after_error=(bw_a - meas_bw) / meas_bw))
    return rows


def _rms_log_error(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Root mean square of log(predicted / measured): the fit's objective without its prior."""
    return float(np.sqrt(np.mean(np.log(predicted / measured) ** 2)))


def _mean_abs(rows: Sequence[CalibrationRow], which: str) -> float:
    """Mean |busbw error| of rows, 'before' or 'after'."""
    return float(np.mean([abs(r.before_error if which == "before" else r.after_error) for r in rows]))


def _no_better(rows_fit: Sequence[CalibrationRow], rms_fit: float, rms_before: float,
               logs_fit: Sequence[LogError]) -> str | None:
    """Why the fitted parameters do not beat the catalog's on the measurements (None when they do): worse overall by
    either measure, no better at all, or worse on any one log (an overlay must not trade one log for another)."""
    tol = 1e-9
    mean_fit, mean_before = _mean_abs(rows_fit, "after"), _mean_abs(rows_fit, "before")
    if rms_fit > rms_before * (1 + tol) or mean_fit > mean_before + tol:
        return (f"mean |busbw error| {mean_fit:.1%} vs the catalog's {mean_before:.1%}, rms log error {rms_fit:.3g} "
                f"vs {rms_before:.3g}")
    worse = [e for e in logs_fit if e.after_mean_abs_error > e.before_mean_abs_error + tol]
    if worse:
        return "; ".join(f"{e.log} gets worse: mean |busbw error| {e.before_mean_abs_error:.1%} -> "
                         f"{e.after_mean_abs_error:.1%}" for e in worse)
    if mean_fit >= mean_before - tol and rms_fit >= rms_before * (1 - tol):
        return f"no better: mean |busbw error| {mean_fit:.1%}, the catalog's {mean_before:.1%}"
    return None


def _bound_warnings(names: Sequence[str], after: dict[str, float]) -> list[str]:
    """A warning for each fitted parameter pinned at a bound: the data ask for a value the model cannot take."""
    out = []
    for n in names:
        low, high = _BOUNDS[n]
        for bound, side in ((low, "lower"), (high, "upper")):
            if abs(np.log(after[n] / bound)) <= BOUND_TOLERANCE:
                out.append(f"{n} = {after[n]:.4g} sits at its {side} bound {bound:g}: the model cannot explain these "
                           "measurements with it; check the log belongs to the system")
    return out


def _log_errors(measurements: Sequence[Measurement], rows: Sequence[CalibrationRow]) -> list[LogError]:
    """Mean and largest |busbw error| of each log, before and after."""
    by_log: dict[str, list[CalibrationRow]] = {}
    for m, r in zip(measurements, rows, strict=True):
        by_log.setdefault(m.log or "measurements", []).append(r)
    return [LogError(log=log, points=len(rs), before_mean_abs_error=_mean_abs(rs, "before"),
                     before_max_abs_error=max(abs(r.before_error) for r in rs),
                     after_mean_abs_error=_mean_abs(rs, "after"),
                     after_max_abs_error=max(abs(r.after_error) for r in rs)) for log, rs in by_log.items()]


def _log_warnings(logs: Sequence[LogError], kept: bool) -> list[str]:
    """Warnings for logs the parameters leave far off (RESIDUAL_WARN); a fit that made a log worse is not kept."""
    out = []
    for e in logs:
        if e.after_max_abs_error > RESIDUAL_WARN:
            with_what = "with the catalog's parameters" if kept else "after the fit"
            out.append(f"{e.log}: busbw error up to {e.after_max_abs_error:.0%} {with_what} (above "
                       f"{RESIDUAL_WARN:.0%}): the model does not explain this log")
    return out


def _measurement_records(measurements: Sequence[Measurement], system: System) -> list[dict[str, Any]]:
    """The measurements the overlay was fitted on, kept in it: the error model's bands for this cluster are then
    the errors that remain after calibration (``fabricsim.validation``)."""
    return [{"system": system.id, "op": m.op, "nranks": m.nranks, "nnodes": m.nnodes, "size_bytes": m.size_bytes,
             "time_s": m.time_s, "log": m.log} for m in measurements]


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
