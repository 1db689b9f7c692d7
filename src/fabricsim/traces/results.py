"""What a trace summary reports, per device (GPU, or CPU process) and per training step: busy time by kernel
class, compute and communication and their overlap, collectives by operation and size, GEMM FLOP rate."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fabricsim.collectives import busbw_factor
from fabricsim.errors import SpecError
from fabricsim.traces.events import Dropped


@dataclass(frozen=True)
class ClassTime:
    """One kernel class on one device, per step: how many kernels, their summed time, and the time the class alone
    keeps the device busy (the union of its intervals, less what a higher class covers: attention, gemm,
    elementwise, communication, memory in that order; so communication's is the exposed communication)."""

    kind: str
    count: float
    kernel_time_s: float
    busy_s: float


@dataclass(frozen=True)
class CollectiveStat:
    """Calls of one collective at one size: ``size_bytes`` in nccl-tests' convention (0: unknown), ``nranks`` the
    group size (0: unknown); ``count`` and ``time_s`` per step, ``mean_time_s`` per call."""

    op: str
    size_bytes: int
    nranks: int
    dtype: str | None
    count: float
    time_s: float
    mean_time_s: float

    @property
    def busbw_bytes_per_s(self) -> float | None:
        """nccl-tests bus bandwidth of one call, where size and group are known."""
        if self.size_bytes <= 0 or self.nranks < 2 or self.mean_time_s <= 0:
            return None
        return self.size_bytes / self.mean_time_s * busbw_factor(self.op, self.nranks)


@dataclass(frozen=True)
class GemmStat:
    """GEMMs whose FLOPs the trace's shapes give (record_shapes), per step: their FLOPs and the time of their
    kernels (a CPU profile: of the operators), and the element type with the most FLOPs."""

    ops: float
    flops: float
    time_s: float
    dtype: str | None

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.time_s if self.time_s > 0 else 0.0


@dataclass(frozen=True)
class DeviceSummary:
    """One device's timeline over the profiled steps; every time is seconds per step."""

    device: int
    kind: str
    """gpu, or cpu (a CPU profile: operators of one process)"""
    name: str
    steps: int
    step_source: str
    """how the step was found: 'ProfilerStep (GPU)', 'ProfilerStep (CPU)', or 'span' (first to last event, 1 step)"""
    step_time_s: float
    compute_s: float
    """union of compute intervals (gemm, attention, elementwise)"""
    communication_s: float
    """union of communication intervals"""
    overlap_s: float
    """|communication ∩ compute|"""
    exposed_comm_s: float
    """|communication \\ compute|: communication nothing hides"""
    idle_s: float
    """step time with neither compute, communication nor copies"""
    classes: tuple[ClassTime, ...]
    collectives: tuple[CollectiveStat, ...]
    gemm: GemmStat | None = None
    gemm_note: str | None = None
    """why ``gemm`` is None where the trace records GEMM shapes (a profile without GPU kernels)"""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["collectives"] = [{**asdict(c), "busbw_bytes_per_s": c.busbw_bytes_per_s} for c in self.collectives]
        if self.gemm is not None:
            data["gemm"] = {**asdict(self.gemm), "achieved_flops_per_s": self.gemm.achieved_flops_per_s}
        return data


@dataclass(frozen=True)
class TraceSummary:
    """A trace's devices, with what the trace says about the run (backend, rank, world size, GPU names)."""

    source: str
    format: str
    backend: str | None
    rank: int | None
    world_size: int | None
    host: str | None
    device_names: dict[int, str]
    devices: tuple[DeviceSummary, ...]
    warnings: list[str] = field(default_factory=list)
    dropped: Dropped = field(default_factory=Dropped)
    """the events the reader could not use, by reason"""

    def device(self, index: int | None = None) -> DeviceSummary:
        """The device of that index (GPU index, or a CPU profile's process id), or of a trace holding one device,
        that of its distributed rank; None: the first."""
        if not self.devices:
            raise SpecError("the trace has no kernels or operators to summarise", source=self.source)
        if index is None:
            return self.devices[0]
        chosen = pick_device(index, [d.device for d in self.devices], gpu=self.devices[0].kind == "gpu",
                             rank=self.rank, world_size=self.world_size)
        return next(d for d in self.devices if d.device == chosen)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "format": self.format, "backend": self.backend, "rank": self.rank,
                "world_size": self.world_size, "host": self.host,
                "device_names": {str(k): v for k, v in self.device_names.items()},
                "devices": [d.to_json() for d in self.devices], "warnings": list(self.warnings),
                "dropped_events": self.dropped.to_json()}


def pick_device(index: int, found: list[int], *, gpu: bool, rank: int | None, world_size: int | None) -> int:
    """The device ``--rank index`` names: a GPU index (a CPU profile: process id) the trace holds, or, in a trace
    of one device, its distributed rank (distributedInfo.rank); else a SpecError saying what the trace holds."""
    if index in found:
        return index
    if rank is not None and index == rank and len(found) == 1:
        return found[0]
    unit = "GPU" if gpu else "process"
    held = f"{unit}{'s' if len(found) != 1 else ''} {', '.join(map(str, found))}" if found else f"no {unit}"
    if rank is not None:
        world = f" of {world_size}" if world_size else ""
        raise SpecError(f"no rank or {unit} {index} in the trace: it holds rank {rank}{world} only "
                        f"(distributedInfo.rank), on {held}; each rank's profile is a file of its own",
                        field="--rank")
    raise SpecError(f"no {unit} {index} in the trace: it holds {held} only (and no distributedInfo rank)"
                    + ("" if gpu else "; a CPU profile's --rank is a process id"), field="--rank")
