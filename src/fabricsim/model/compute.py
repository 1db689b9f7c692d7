"""Compute time on one GPU: matmul FLOPs at an achievable fraction of the BF16 peak, and HBM-bound time.

The achievable fraction is a free parameter and lives in the catalog (``GPU.matmul_efficiency``, with its source);
a GPU without one falls back to the packaged default in ``data/compute.yaml``. Nothing here is fitted to
validation cases.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from fabricsim import units
from fabricsim.catalog import GPU, Efficiency, read_packaged_yaml
from fabricsim.errors import SpecError, spec_error

if TYPE_CHECKING:
    from numpy.typing import NDArray

DEFAULTS_FILE = "compute.yaml"


@lru_cache(maxsize=1)
def _defaults_document() -> Any:
    return read_packaged_yaml("fabricsim.model.data", DEFAULTS_FILE)


@lru_cache(maxsize=8)
def _packaged_default(key: str) -> Efficiency:
    """One fallback efficiency from the packaged ``data/compute.yaml``."""
    try:
        return Efficiency.model_validate(_defaults_document()[key])
    except ValidationError as exc:
        raise spec_error(exc, Efficiency, DEFAULTS_FILE) from None


def default_matmul_efficiency() -> Efficiency:
    """The fallback matmul efficiency for GPUs without their own (``data/compute.yaml``)."""
    return _packaged_default("default_matmul_efficiency")


def default_hbm_efficiency() -> Efficiency:
    """The fallback achievable HBM fraction for GPUs without their own (``data/compute.yaml``)."""
    return _packaged_default("default_hbm_efficiency")


def default_fp8_matmul_efficiency() -> Efficiency:
    """FP8 GEMM efficiency relative to the BF16 one, for FP8 GPUs without an FP8 figure (``data/compute.yaml``)."""
    return _packaged_default("default_fp8_matmul_efficiency")


def default_attention_efficiency() -> Efficiency:
    """The fallback fused-attention efficiency for GPUs without their own (``data/compute.yaml``)."""
    return _packaged_default("default_attention_efficiency")


@lru_cache(maxsize=1)
def gemm_tile() -> tuple[int, int]:
    """(rows, cols) of a GEMM output tile, one per SM per wave (``data/compute.yaml``, ``gemm_tile``)."""
    tile = _defaults_document()["gemm_tile"]
    return int(tile["rows"]), int(tile["cols"])


@lru_cache(maxsize=1)
def kernel_gap_s() -> float:
    """Seconds lost per kernel launched back to back (``data/compute.yaml``, ``kernel_gap.seconds``)."""
    return units.parse_duration(str(_defaults_document()["kernel_gap"]["seconds"]))


def fp8_matmul_efficiency(gpu: GPU) -> Efficiency:
    """The GPU's achievable fraction of its FP8 peak on training GEMMs (or the default)."""
    if gpu.fp8_flops_per_s is None:
        raise SpecError(f"{gpu.id} has no FP8 tensor cores; use --precision bf16", field="--precision")
    if gpu.fp8_matmul_efficiency is not None:
        return gpu.fp8_matmul_efficiency
    ratio = default_fp8_matmul_efficiency()
    bf16 = matmul_efficiency(gpu)
    return Efficiency(value=bf16.value * ratio.value, source=f"{bf16.source}; x {ratio.source}",
                      verified=False, notes="derived: this GPU's BF16 matmul efficiency x the H100 FP8/BF16 ratio")


def fp4_matmul_efficiency(gpu: GPU) -> Efficiency:
    """The GPU's achievable fraction of its FP4 peak on best-shape FP4 GEMMs; its FP8 fraction where it has no
    FP4 measurement of its own."""
    if gpu.fp4_flops_per_s is None:
        raise SpecError(f"{gpu.id} has no FP4 tensor cores; use --weights fp8 or bf16", field="--weights")
    return gpu.fp4_matmul_efficiency if gpu.fp4_matmul_efficiency is not None else fp8_matmul_efficiency(gpu)


def attention_efficiency(gpu: GPU) -> Efficiency:
    """The GPU's achievable fraction of its BF16 peak in fused attention, forward and backward (or the default)."""
    return gpu.attention_efficiency if gpu.attention_efficiency is not None else default_attention_efficiency()


@lru_cache(maxsize=1)
def gemm_k_overhead() -> float:
    """K-equivalent of a GEMM tile's fixed cost at the BF16 rate (``data/compute.yaml``, ``gemm_k_overhead``)."""
    return float(_defaults_document()["gemm_k_overhead"]["bf16_k"])


def depth_factor(k: Any, speedup: float = 1.0) -> Any:
    """Fraction of the best-shape GEMM rate reached with reduction depth ``k`` (a number or an array): each output
    tile pays a fixed prologue/epilogue beside its K loop, k / (k + k0); a format whose loop runs ``speedup`` times
    BF16's pays k0 x speedup. The training and inference models both price a GEMM's depth with it."""
    return k / (k + gemm_k_overhead() * speedup)


def k_efficiency(k: NDArray[np.float64], gpu: GPU, precision: str) -> NDArray[np.float64]:
    """``depth_factor`` at the precision's peak speed-up over BF16 (FP8: its peak ratio)."""
    speedup = gpu.fp8_flops_per_s / gpu.bf16_flops_per_s if precision == "fp8" and gpu.fp8_flops_per_s else 1.0
    out: NDArray[np.float64] = depth_factor(k, speedup)
    return out


def grouped_gemm_efficiency(rows: NDArray[np.float64], gpu: GPU, precision: str) -> NDArray[np.float64]:
    """Fraction of the GEMM rate a grouped (per-expert) GEMM keeps when each group has ``rows`` tokens: every
    expert's weights stream from HBM once per GEMM beside its 2 x rows FLOPs per weight, so the time is compute
    plus weight traffic, rows / (rows + r0) with r0 = GEMM rate x bytes per weight / (2 x achievable HBM rate)
    (the roofline ridge in tokens: ~290 on H100 BF16). No fitted figure: r0 comes from the catalog. Sourced check
    (deepseek-ai/DeepGEMM README @327ec92, H800 FP8 grouped/masked GEMMs; vllm PR #23280, H100 BF16 M sweep):
    measured efficiency follows rows / (rows + M_half) with M_half 180-200 fitted where the ridge is ~290.
    ``inf`` rows (one dense GEMM whose rows are the whole batch) pay nothing; more rows never lower it."""
    weight_bytes = 1.0 if precision == "fp8" else 2.0
    ridge = gemm_flops_per_s(gpu, precision) * weight_bytes / (2.0 * achievable_hbm_bytes_per_s(gpu))
    r = np.asarray(rows, dtype=np.float64)
    finite = np.isfinite(r)
    out: NDArray[np.float64] = np.ones_like(r)
    out[finite] = r[finite] / (r[finite] + ridge)
    return out


def gemm_flops_per_s(gpu: GPU, precision: str) -> float:
    """FLOP/s of the weight GEMMs at ``precision`` ('bf16' or 'fp8')."""
    if precision == "fp8":
        efficiency = fp8_matmul_efficiency(gpu).value  # a SpecError for GPUs without FP8 tensor cores
        return float(gpu.fp8_flops_per_s or 0.0) * efficiency
    return achievable_flops_per_s(gpu)


def attention_flops_per_s(gpu: GPU, flops_per_exp: float | None = None) -> float:
    """FLOP/s of fused attention kernels (BF16 in every precision recipe): their matmuls at the attention
    efficiency, plus, where the GPU's special-function rate is known, one exponential per score and pass
    (``flops_per_exp``: matmul FLOPs the kernel does per exponential, 2 x (qk + v head widths) forward). The
    softmax waits on the exponentials (FlashAttention-3, arXiv:2407.08608: H100 has 989 TFLOP/s of matmul but
    3.9 TFLOP/s of special functions), so narrow heads run below wide ones: FA3's forward reaches 476 TFLOP/s at
    head dim 64 against 638 at 128 (H100, 4K, no mask; ratio 0.75), what matmuls near peak in series with the
    exponentials give (0.76);
    Blackwell Ultra doubles the exponential rate (NVIDIA, 'Making Softmax More Efficient with Blackwell Ultra')."""
    matmul = gpu.bf16_flops_per_s * attention_efficiency(gpu).value
    if gpu.exp_per_s is None or flops_per_exp is None:
        return matmul
    return 1.0 / (1.0 / matmul + 1.0 / (flops_per_exp * gpu.exp_per_s.value))


def sm80_kernel_fraction(gpu: GPU) -> float:
    """Fraction of the GPU's best BF16 GEMM rate that Ampere-generation (SM80) kernels reach on it: an engine that
    ships only such kernels for an operation (TensorRT-LLM's MoE GEMMs before 0.10) runs there; 1 where unmeasured."""
    return gpu.sm80_kernel_fraction.value if gpu.sm80_kernel_fraction is not None else 1.0


def hbm_efficiency(gpu: GPU) -> Efficiency:
    """The GPU's achievable fraction of its HBM bandwidth on streaming kernels, with its source (or the default)."""
    return gpu.hbm_efficiency if gpu.hbm_efficiency is not None else default_hbm_efficiency()


def achievable_hbm_bytes_per_s(gpu: GPU) -> float:
    """Bytes per second a streaming kernel reaches on the GPU: its HBM bandwidth at ``hbm_efficiency``."""
    return gpu.hbm_bytes_per_s * hbm_efficiency(gpu).value


def matmul_efficiency(gpu: GPU) -> Efficiency:
    """The GPU's achievable fraction of its BF16 peak on large GEMMs, with its source (or the default)."""
    return gpu.matmul_efficiency if gpu.matmul_efficiency is not None else default_matmul_efficiency()


def achievable_flops_per_s(gpu: GPU, efficiency: float | None = None) -> float:
    """BF16 FLOP/s one GPU sustains on matmuls: peak x efficiency (the catalog's unless one is given)."""
    eff = matmul_efficiency(gpu).value if efficiency is None else efficiency
    if not 0 < eff <= 1:
        raise SpecError(f"must be in (0, 1], got {eff}", field="efficiency")
    return gpu.bf16_flops_per_s * eff


def compute_time(flops: float, gpu: GPU, efficiency: float | None = None) -> float:
    """Seconds for ``flops`` of BF16 matmul work on one GPU: flops / (peak * efficiency)."""
    if flops < 0:
        raise SpecError(f"must be non-negative, got {flops}", field="flops")
    return flops / achievable_flops_per_s(gpu, efficiency)


def hbm_time(num_bytes: float, gpu: GPU, efficiency: float = 1.0) -> float:
    """Seconds to stream ``num_bytes`` through HBM (memory-bound work): bytes / (hbm_bytes_per_s * efficiency).

    ``efficiency`` defaults to 1 (the catalog's peak): an optimistic bound until the catalog carries a measured
    achievable bandwidth.
    """
    if num_bytes < 0:
        raise SpecError(f"must be non-negative, got {num_bytes}", field="bytes")
    if not 0 < efficiency <= 1:
        raise SpecError(f"must be in (0, 1], got {efficiency}", field="efficiency")
    return num_bytes / (gpu.hbm_bytes_per_s * efficiency)


def flops_utilization(flops: float, seconds: float, gpus: int, gpu: GPU) -> float:
    """Achieved fraction of the BF16 peak: flops / (seconds * gpus * peak). With model FLOPs this is MFU."""
    if seconds <= 0 or gpus < 1:
        raise SpecError("seconds must be positive and gpus at least 1", field="seconds")
    return flops / (seconds * gpus * gpu.bf16_flops_per_s)
