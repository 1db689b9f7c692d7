"""Serving outputs: per-request latencies, their percentiles and the run's throughput, goodput and overload
verdict; the result types live apart from the simulator that fills them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

PERCENTILES = (50.0, 90.0, 99.0)


@dataclass(frozen=True)
class LatencyStats:
    """p50/p90/p99 and mean of one latency (s) over the requests that have it (NaN when none)."""

    p50_s: float
    p90_s: float
    p99_s: float
    mean_s: float

    def at(self, percentile: int) -> float:
        """The 50th, 90th or 99th percentile (s)."""
        return {50: self.p50_s, 90: self.p90_s, 99: self.p99_s}[percentile]

    @staticmethod
    def of(values: NDArray[np.float64]) -> LatencyStats:
        """Percentiles (numpy's linear interpolation) of the finite entries."""
        finite = values[np.isfinite(values)]
        if not len(finite):
            return LatencyStats(math.nan, math.nan, math.nan, math.nan)
        p50, p90, p99 = (float(x) for x in np.percentile(finite, PERCENTILES))
        return LatencyStats(p50, p90, p99, float(finite.mean()))


@dataclass(frozen=True, eq=False)
class ServingResult:
    """Per-request latencies (NaN where not reached), their percentiles, throughput, goodput and overload."""

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    ttft_s: NDArray[np.float64]  # first token - arrival
    tpot_s: NDArray[np.float64]  # (finish - first token) / (output - 1); NaN for one-token outputs
    e2e_s: NDArray[np.float64]  # finish - arrival
    replica: NDArray[np.int64]  # replica that prefilled the request (the prefill pool's index under disagg)
    ttft: LatencyStats
    tpot: LatencyStats
    e2e: LatencyStats
    requests_arrived: int
    requests_completed: int
    requests_unfinished: int  # arrived but not finished when the drain limit stopped the run
    duration_s: float  # arrival window
    end_s: float  # simulated time of the last event processed
    output_tokens_per_s: float  # output tokens of completed requests / end_s
    goodput_rps: float | None  # completed requests meeting every SLO given, per second of end_s (None: no SLO)
    slo_attainment: float | None  # fraction of arrived requests meeting every SLO given
    preemptions: int
    iterations: int
    mean_batch_size: float  # sequences per iteration (decodes + prefill chunks), over all replicas' iterations
    overloaded: bool
    overload_reason: str  # why overloaded ("" when not)
    admitted_s: NDArray[np.float64] | None = None  # when each request was first scheduled (NaN: never)

    def percentiles_json(self, kinds: tuple[str, ...] = ("ttft", "tpot", "e2e")) -> dict[str, float | None]:
        """``ttft_s_p50`` ... ``e2e_s_p99`` for JSON: a latency no request reached is None (JSON has no NaN)."""
        out: dict[str, float | None] = {}
        for kind in kinds:
            stats: LatencyStats = getattr(self, kind)
            for p in PERCENTILES:
                value = stats.at(int(p))
                out[f"{kind}_s_p{int(p)}"] = value if math.isfinite(value) else None
        return out
