"""Calibration from a profiler trace: its collectives become the same ``Measurement`` records an nccl-tests log
gives (nccl-tests size convention, mean seconds per call, group size), checked as logs are (a CPU or gloo run,
devices that are not the system's GPU, bus bandwidth above the links), then fitted by ``calibrate``. GEMMs whose
FLOPs are known are reported as a fraction of the GPU's dense peak."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import ceil
from typing import Any

from fabricsim.calibration.fit import CalibrationResult, Measurement, calibrate, check_results
from fabricsim.calibration.plausibility import check_bandwidths
from fabricsim.catalog import GPU, Catalog, System
from fabricsim.errors import SpecError
from fabricsim.nccltests import BenchResult, DeviceInfo
from fabricsim.traces import DeviceSummary, GemmStat, TraceSummary, patterns


@dataclass(frozen=True)
class GemmEfficiency:
    """Achieved GEMM FLOP/s against the catalog GPU's dense peak for their element type (None: no tensor-core
    peak for it, e.g. FP32)."""

    achieved_flops_per_s: float
    peak_flops_per_s: float | None
    fraction: float | None
    dtype: str | None
    gpu: str
    note: str | None = None
    """why ``fraction`` is None: no tensor-core peak for the type, or a rate above the peak (not reported)"""

    @property
    def plausible(self) -> bool:
        """False where the rate is above the GPU's peak: the kernel times do not cover the recorded FLOPs."""
        return self.peak_flops_per_s is None or self.achieved_flops_per_s <= self.peak_flops_per_s

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.plausible:
            data["achieved_flops_per_s"] = None
        return data


def gemm_efficiency(stat: GemmStat, gpu: GPU) -> GemmEfficiency:
    """The GEMMs' achieved rate as a fraction of ``gpu``'s BF16 (FP16) or FP8 dense peak; a rate above the peak is
    no efficiency (its fraction is None and its note says why)."""
    pats = patterns()
    dtype = (stat.dtype or "").lower()
    peak = gpu.bf16_flops_per_s if dtype in pats.bf16_peak_dtypes else \
        gpu.fp8_flops_per_s if dtype in pats.fp8_peak_dtypes else None
    rate = stat.achieved_flops_per_s
    if peak is None:
        return GemmEfficiency(rate, None, None, stat.dtype, gpu.id,
                              f"no tensor-core peak of {gpu.id} for element type {stat.dtype or 'unknown'}")
    if rate > peak:
        return GemmEfficiency(rate, peak, None, stat.dtype, gpu.id,
                              f"no GEMM rate: {rate / 1e12:.3g} TFLOP/s would be {rate / peak:.3g}x the {gpu.id} "
                              f"dense peak {peak / 1e12:.0f} TFLOP/s, so the kernel times do not cover the recorded "
                              "shapes (GEMM kernels outside the profiled steps, or not linked to their operators)")
    return GemmEfficiency(rate, peak, rate / peak, stat.dtype, gpu.id)


def bench_view(summary: TraceSummary, device: DeviceSummary) -> BenchResult:
    """The trace as the header of an nccl-tests log would describe it (backend, ranks, host, device), for
    ``check_results``."""
    cpu = device.kind == "cpu"
    backend = summary.backend or ("gloo" if cpu else "nccl")
    info = DeviceInfo(rank=summary.rank or 0, host=summary.host or "trace", device=-1 if cpu else device.device,
                      bus_id="cpu" if cpu else None, name="" if cpu else device.name)
    op = device.collectives[0].op if device.collectives and device.collectives[0].op != "unknown" else "all_reduce"
    return BenchResult(tool="fabricsim", op=op, backend=backend, world_size=summary.world_size,
                       hosts=[info.host], devices=[info], source=summary.source, notes=["from a profiler trace"])


def check_trace(summary: TraceSummary, device: DeviceSummary, system: System, catalog: Catalog) -> list[str]:
    """Refuse (SpecError) a trace that cannot have run on ``system``, as nccl-tests logs are refused: a CPU or gloo
    profile, another GPU; returns the warnings of what cannot be checked."""
    return check_results([bench_view(summary, device)], system, catalog, source=summary.source)


def trace_measurements(summary: TraceSummary, device: DeviceSummary, system: System) -> tuple[list[Measurement],
                                                                                           list[str]]:
    """One measurement per collective group of known size and group; nodes assume ranks packed densely on the
    system's nodes (the trace does not say where the other ranks ran). Returns them with warnings."""
    out, skipped = [], 0
    for c in device.collectives:
        if c.op == "unknown" or c.size_bytes <= 0 or c.nranks < 2:
            skipped += 1
            continue
        nnodes = ceil(c.nranks / system.gpus_per_node)
        out.append(Measurement(c.op, c.nranks, nnodes, c.size_bytes, c.mean_time_s, log=summary.source))
    warnings = []
    if skipped:
        warnings.append(f"{skipped} collective group(s) without a known size or group of 2+ ranks were left out "
                        "(kernels without record_param_comms arguments, or a world of one)")
    if out and any(m.nnodes > 1 for m in out):
        warnings.append(f"groups larger than {system.gpus_per_node} ranks are taken as packed on "
                        f"ceil(ranks / {system.gpus_per_node}) nodes")
    if out and device.overlap_s > 0:
        warnings.append("collectives measured inside training steps share the GPU with compute: calls that overlap "
                        "kernels run slower than alone, so the fit is a lower bound on the links' efficiency")
    return out, warnings


def calibrate_trace(summary: TraceSummary, system: str, catalog: Catalog, *, device: int | None = None,
                    fabric: str | None = None) -> tuple[CalibrationResult, list[str]]:
    """Check the trace against the system as a log is checked, then fit the collectives' measurements."""
    sysm = catalog.system(system)
    dev = summary.device(device)
    warnings = check_trace(summary, dev, sysm, catalog)
    measurements, more = trace_measurements(summary, dev, sysm)
    if not measurements:
        raise SpecError("no collective with a known size and a group of 2+ ranks in the trace; profile an NCCL run "
                        "with PyTorch >= 2.1 (record_param_comms carries sizes)", source=summary.source)
    check_bandwidths(measurements, sysm, catalog, source=summary.source)
    result = calibrate(measurements, sysm, fabric=fabric, catalog=catalog)
    return result, warnings + more
