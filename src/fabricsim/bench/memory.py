"""Memory bandwidth of one CUDA GPU: HBM device-to-device copy, and host<->device over PCIe (pinned, pageable).

Timing is ``cudaMemcpyAsync``-style: ``warmup`` copies, then ``iters`` copies between two CUDA events on one
stream; time of one copy = event span / ``iters``. ``GBps`` is bytes copied / time (GB = 1e9 B). A
device-to-device copy reads and writes every byte, so the HBM traffic it drives is twice that
(``hbm_traffic_GBps``, the figure CUDA's bandwidthTest prints). ``pcie_GBps`` is the per-direction PCIe figure
the model uses: the lower of the best pinned host-to-device and device-to-host rates.

Without CUDA (no GPU, or a CPU-only torch build) the result has no rows and a ``reason``; that is not an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fabricsim.bench._torch import require_torch
from fabricsim.bench.config import check_sweep
from fabricsim.errors import SpecError

CopyKind = Literal["d2d", "h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable"]
KINDS: tuple[CopyKind, ...] = ("d2d", "h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable")


@dataclass(frozen=True)
class MemoryConfig:
    """Sizes swept like nccl-tests (``min_bytes`` times ``step_factor`` up to ``max_bytes``) on GPU ``device``."""

    device: int = 0
    min_bytes: int = 2**20
    max_bytes: int = 256 * 2**20
    step_factor: int = 4
    warmup: int = 3
    iters: int = 10

    def __post_init__(self) -> None:
        if self.device < 0:
            raise SpecError(f"must be a GPU index (0 or more), got {self.device}", field="device")
        check_sweep(self.min_bytes, self.max_bytes, self.step_factor, self.warmup, self.iters)

    def sizes(self) -> list[int]:
        out, size = [], self.min_bytes
        while size <= self.max_bytes:
            out.append(size)
            size *= self.step_factor
        return out


class MemoryRow(BaseModel):
    """One copy kind at one size."""

    model_config = ConfigDict(extra="forbid")

    kind: CopyKind = Field(description="d2d (HBM), h2d/d2h over PCIe from pinned or pageable host memory")
    size_bytes: int = Field(ge=1)
    time_s: float = Field(gt=0, description="time of one copy")
    GBps: float = Field(ge=0, description="bytes copied / time, GB/s (1e9 B/s)")
    hbm_traffic_GBps: float | None = Field(None, description="d2d only: read + write traffic, 2 * GBps")


class MemoryResult(BaseModel):
    """Rows plus the figures the model takes from them; no rows (and a reason) on a machine without CUDA."""

    model_config = ConfigDict(extra="forbid")

    device: str | None = Field(None, description="GPU name")
    device_index: int | None = None
    rows: list[MemoryRow] = Field(default_factory=list)
    reason: str | None = Field(None, description="why there are no rows")
    hbm_copy_GBps: float | None = Field(None, description="best d2d copy rate")
    hbm_traffic_GBps: float | None = Field(None, description="best d2d HBM traffic (2x copy rate)")
    pcie_h2d_GBps: float | None = Field(None, description="best pinned host-to-device rate")
    pcie_d2h_GBps: float | None = Field(None, description="best pinned device-to-host rate")
    pcie_GBps: float | None = Field(None, description="per-direction PCIe figure: min of the two above")


Timer = Callable[[CopyKind, int], float]


def sweep(config: MemoryConfig, timer: Timer) -> list[MemoryRow]:
    """Every copy kind at every size, timed by ``timer(kind, size_bytes) -> seconds per copy``."""
    rows = []
    for kind in KINDS:
        for size in config.sizes():
            time_s = timer(kind, size)
            gbps = size / time_s / 1e9
            rows.append(MemoryRow(kind=kind, size_bytes=size, time_s=time_s, GBps=gbps,
                                  hbm_traffic_GBps=2 * gbps if kind == "d2d" else None))
    return rows


def summarize(rows: list[MemoryRow], *, device: str | None, device_index: int | None) -> MemoryResult:
    """The figures the model uses: best rate of each kind over the sweep."""

    def best(kind: CopyKind) -> float | None:
        rates = [row.GBps for row in rows if row.kind == kind]
        return max(rates) if rates else None

    d2d, h2d, d2h = best("d2d"), best("h2d_pinned"), best("d2h_pinned")
    return MemoryResult(
        device=device,
        device_index=device_index,
        rows=rows,
        hbm_copy_GBps=d2d,
        hbm_traffic_GBps=None if d2d is None else 2 * d2d,
        pcie_h2d_GBps=h2d,
        pcie_d2h_GBps=d2h,
        pcie_GBps=None if h2d is None or d2h is None else min(h2d, d2h),
    )


def _cuda_timer(torch: Any, config: MemoryConfig) -> Timer:
    device = torch.device("cuda", config.device)
    largest = max(config.sizes())
    gpu_a = torch.empty(largest, dtype=torch.uint8, device=device)
    gpu_b = torch.empty(largest, dtype=torch.uint8, device=device)
    pinned = torch.empty(largest, dtype=torch.uint8, pin_memory=True)
    pageable = torch.empty(largest, dtype=torch.uint8)
    buffers = {
        "d2d": (gpu_b, gpu_a),
        "h2d_pinned": (gpu_a, pinned),
        "h2d_pageable": (gpu_a, pageable),
        "d2h_pinned": (pinned, gpu_a),
        "d2h_pageable": (pageable, gpu_a),
    }
    stream = torch.cuda.Stream(device=device)

    def timer(kind: CopyKind, size: int) -> float:
        dst, src = (b[:size] for b in buffers[kind])
        with torch.cuda.stream(stream):
            for _ in range(config.warmup):
                dst.copy_(src, non_blocking=True)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(stream)
            for _ in range(config.iters):
                dst.copy_(src, non_blocking=True)
            end.record(stream)
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3 / config.iters

    return timer


def run_memory_bench(config: MemoryConfig) -> MemoryResult:
    """Measure GPU ``config.device``; on a machine without CUDA, an empty result that says why."""
    torch = require_torch()
    if not torch.cuda.is_available():
        build = "a CPU-only torch build" if torch.version.cuda is None else "no CUDA GPU visible"
        return MemoryResult(reason=f"no CUDA device ({build}, torch {torch.__version__}); nothing to measure")
    count = torch.cuda.device_count()
    if config.device >= count:
        raise SpecError(f"GPU {config.device} does not exist; this machine has {count}", field="device")
    name = str(torch.cuda.get_device_name(config.device))
    rows = sweep(config, _cuda_timer(torch, config))
    return summarize(rows, device=name, device_index=config.device)
