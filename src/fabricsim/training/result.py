"""What a training prediction returns: seconds per layer kind, exposed and overlapped (``Breakdown``), the
prediction itself, and the batch-independent terms of a step and their assembly over many plans."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabricsim.training.flops import MFU_DEFINITION
from fabricsim.training.memory import MemoryReport

LAYERS = ("compute", "hbm", "nvlink", "pcie", "infiniband", "ethernet", "pipeline_bubble")


@dataclass
class Breakdown:
    """Seconds per layer kind, exposed (on the critical path) and overlapped (hidden under other work)."""

    exposed: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LAYERS, 0.0))
    overlapped: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LAYERS, 0.0))

    def add(self, kind: str, seconds: float, hidden: float = 0.0) -> None:
        self.exposed[kind] += seconds
        self.overlapped[kind] += hidden

    def scaled(self, factor: float) -> Breakdown:
        return Breakdown({k: v * factor for k, v in self.exposed.items()},
                         {k: v * factor for k, v in self.overlapped.items()})

    def plus(self, other: Breakdown) -> Breakdown:
        return Breakdown({k: self.exposed[k] + other.exposed[k] for k in LAYERS},
                         {k: self.overlapped[k] + other.overlapped[k] for k in LAYERS})

    @property
    def exposed_total(self) -> float:
        return sum(self.exposed.values())


@dataclass(frozen=True)
class TrainingPrediction:
    step_time_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    """executed FLOP/s per GPU (TFLOP/s): model FLOPs with causal attention as the kernels run it, plus recompute
    (the FLOPs Megatron-LM's 'TFLOP/s per GPU' counts)"""
    model_tflops_per_gpu: float
    """model FLOP/s per GPU (TFLOP/s), MFU's numerator: forward + backward, attention unmasked, no recompute"""
    peak_tflops_per_gpu: float
    """the dense tensor peak MFU divides by, in ``peak_precision``"""
    peak_precision: str
    """the precision of the weight GEMMs, whose dense peak MFU and HFU are measured against"""
    memory: MemoryReport
    breakdown: Breakdown
    bottleneck: str
    warnings: tuple[str, ...]
    gpus: int
    nodes: int
    sharded: bool = False
    """parameters sharded over the data-parallel ranks (ZeRO-3 / FSDP): the band compares it with runs that were"""

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: ``model_tflops_per_gpu / peak_tflops_per_gpu`` (``MFU_DEFINITION``)."""
        return self.model_tflops_per_gpu / self.peak_tflops_per_gpu

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilisation: executed FLOP/s (``tflops_per_gpu``) over the same peak."""
        return self.tflops_per_gpu / self.peak_tflops_per_gpu

    @property
    def breakdown_s(self) -> dict[str, float]:
        return {k: self.breakdown.exposed[k] + self.breakdown.overlapped[k] for k in LAYERS}

    def to_json(self) -> dict[str, object]:
        return {
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "model_flops_per_s_per_gpu": self.model_tflops_per_gpu * 1e12,
            "hfu": self.hfu,
            "mfu_peak": {"precision": self.peak_precision, "flops_per_s": self.peak_tflops_per_gpu * 1e12,
                         "definition": MFU_DEFINITION},
            "memory_per_gpu_bytes": self.memory.total_bytes,
            "memory": {"weights_bytes": self.memory.weights_bytes, "gradients_bytes": self.memory.gradients_bytes,
                       "optimizer_bytes": self.memory.optimizer_bytes,
                       "activations_bytes": self.memory.activations_bytes,
                       "capacity_bytes": self.memory.capacity_bytes, "summary": self.memory.summary()},
            "fits": self.memory.fits,
            "breakdown_s": self.breakdown_s,
            "exposed_s": dict(self.breakdown.exposed),
            "overlapped_s": dict(self.breakdown.overlapped),
            "bottleneck": self.bottleneck,
            "warnings": list(self.warnings),
            "gpus": self.gpus,
            "nodes": self.nodes,
        }


@dataclass(frozen=True)
class StepTerms:
    """The parts of a step that do not depend on the global batch, per layer kind in ``LAYERS`` order: one
    micro-batch on the slowest stage, the data-parallel sync and the optimizer update. A sizing search prices
    them once per plan shape and assembles every batch size with ``assemble_steps``."""

    microbatch_exposed: tuple[float, ...]
    microbatch_overlapped: tuple[float, ...]
    sync_exposed: tuple[float, ...]
    sync_overlapped: tuple[float, ...]
    optimizer_s: float
    pp: int
    virtual_stages: int

    @property
    def microbatch_s(self) -> float:
        return sum(self.microbatch_exposed)


@dataclass(frozen=True)
class StepArrays:
    """Per-layer seconds of whole steps for many micro-batch counts: rows are plans, columns ``LAYERS``."""

    exposed: np.ndarray
    overlapped: np.ndarray
    step_time_s: np.ndarray
    bottleneck: np.ndarray  # index into LAYERS of the largest exposed layer (the first on ties)


def _vector(values: dict[str, float]) -> tuple[float, ...]:
    return tuple(values[k] for k in LAYERS)
