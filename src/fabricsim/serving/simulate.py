"""The serving entry point: validate the inputs, run the simulator over a request trace and turn its raw state into
a :class:`ServingResult` (latencies, SLO goodput and the overload verdict).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.serving.config import SchedulerConfig, ServingLayout, StepCost
from fabricsim.serving.discrete_event import _Sim
from fabricsim.serving.requests import RequestTrace
from fabricsim.serving.result import LatencyStats, ServingResult

if TYPE_CHECKING:
    from numpy.typing import NDArray

MIN_DRAIN_S = 60.0  # after the arrival window, drain for max(window, this) before reporting requests unfinished
DEFAULT_MAX_ITERATIONS = 20_000_000  # safety stop (minutes of wall time); requests left are reported unfinished
# Overload: the median TTFT of the last quarter of arrivals is this many times the first quarter's and has grown by
# at least this fraction of the arrival window (a stable queue keeps TTFT flat; an unstable one grows linearly).
OVERLOAD_TTFT_GROWTH = 3.0
OVERLOAD_MIN_GROWTH_FRACTION = 0.05
OVERLOAD_MIN_REQUESTS = 8  # fewer arrivals than this cannot show a trend


def _check_fits(trace: RequestTrace, cfg: SchedulerConfig, costs: list[StepCost]) -> None:
    """Refuse requests that could never run: more KV than a replica holds, or an unchunked prompt over budget."""
    if not len(trace.arrival_s):
        return
    largest = trace.prompt_tokens + trace.output_tokens - 1  # KV tokens held just before the last token
    for cost in costs:
        capacity = int(cost.kv_capacity_tokens) // cfg.block_size_tokens * cfg.block_size_tokens
        worst = int(np.argmax(largest))
        if largest[worst] > capacity:
            raise SpecError(f"request {worst} needs {int(largest[worst])} KV tokens, more than the {capacity} a "
                            "replica holds", field="kv_capacity_tokens")
    if not cfg.chunked_prefill:
        worst = int(np.argmax(largest))
        if largest[worst] > cfg.max_num_batched_tokens:
            raise SpecError(f"request {worst} may prefill {int(largest[worst])} tokens at once (prompt + output "
                            f"after a preemption), over max_num_batched_tokens {cfg.max_num_batched_tokens}; "
                            "enable chunked_prefill or raise the budget", field="max_num_batched_tokens")


def _overload(arrival: NDArray[np.float64], ttft: NDArray[np.float64], end_s: float, duration_s: float,
              unfinished: int, drain_s: float) -> str:
    """Why the run is overloaded ("" if it is not): requests left after the drain, or TTFT growing with arrival."""
    n = len(arrival)
    if unfinished:
        return f"{unfinished} of {n} requests unfinished {drain_s:g} s after the arrival window"
    if n < OVERLOAD_MIN_REQUESTS:
        return ""
    waited = np.where(np.isfinite(ttft), ttft, end_s - arrival)  # no first token yet: waited at least this
    quarter = n // 4
    early = float(np.median(waited[:quarter]))
    late = float(np.median(waited[-quarter:]))
    if late > OVERLOAD_TTFT_GROWTH * early and late - early > OVERLOAD_MIN_GROWTH_FRACTION * duration_s:
        return (f"TTFT grows through the run: median {late:.3g} s for the last quarter of arrivals vs "
                f"{early:.3g} s for the first")
    return ""


def simulate_serving(cost: StepCost, trace: RequestTrace, *, scheduler: SchedulerConfig | None = None,
                     layout: ServingLayout | None = None, decode_cost: StepCost | None = None,
                     slo_ttft_s: float | None = None, slo_tpot_s: float | None = None,
                     drain_s: float | None = None, max_iterations: int = DEFAULT_MAX_ITERATIONS,
                     progress: Callable[[int, int], None] | None = None) -> ServingResult:
    """Serve the trace on the layout's replicas; latencies, throughput, goodput against the SLOs, overload.

    ``decode_cost`` times the decode pool of a disaggregated layout (default: ``cost``). Arrivals stop with the
    trace; the run then drains for ``drain_s`` (default max(window, 60 s)) and reports what is left unfinished.
    ``progress`` is called now and then with (requests completed, requests in all).
    """
    cfg = scheduler or SchedulerConfig()
    lay = layout or ServingLayout()
    dec_cost = decode_cost or cost
    for name, slo in (("slo_ttft_s", slo_ttft_s), ("slo_tpot_s", slo_tpot_s)):
        if slo is not None and not (math.isfinite(slo) and slo > 0.0):
            raise SpecError(f"must be finite and > 0 s, got {slo}", field=name)
    drain = max(trace.duration_s, MIN_DRAIN_S) if drain_s is None else drain_s
    if not (math.isfinite(drain) and drain >= 0.0):
        raise SpecError(f"must be finite and >= 0 s, got {drain}", field="drain_s")
    if max_iterations < 1:
        raise SpecError(f"must be >= 1, got {max_iterations}", field="max_iterations")
    _check_fits(trace, cfg, [cost] if lay.disagg is None else [cost, dec_cost])
    sim = _Sim(trace, cost, dec_cost, cfg, lay, trace.duration_s + drain, max_iterations, progress)
    sim.run()
    if sim.completed == trace.requests and any(rep.used_blocks for rep in sim.replicas):
        raise AssertionError("serving simulation leaked KV blocks")

    arrival = trace.arrival_s
    output = trace.output_tokens
    first = np.asarray(sim.first_s, dtype=np.float64)
    finish = np.asarray(sim.finish_s, dtype=np.float64)
    ttft = first - arrival
    e2e = finish - arrival
    tpot = np.full(len(arrival), math.nan)
    multi = (output > 1) & np.isfinite(finish)
    tpot[multi] = (finish[multi] - first[multi]) / (output[multi] - 1)
    done = np.isfinite(finish)
    completed = int(done.sum())
    if completed != sim.completed:
        raise AssertionError(f"serving simulation counted {sim.completed} completions, {completed} finish times")
    arrived = len(arrival)
    unfinished = arrived - completed
    end_s = sim.end_s
    span_s = end_s if end_s > 0.0 else math.inf
    goodput: float | None = None
    attainment: float | None = None
    if slo_ttft_s is not None or slo_tpot_s is not None:
        good = done.copy()
        if slo_ttft_s is not None:
            good &= ttft <= slo_ttft_s
        if slo_tpot_s is not None:
            good &= ~(tpot > slo_tpot_s)  # NaN TPOT (one-token output) meets any TPOT SLO
        goodput = float(good.sum()) / span_s
        attainment = float(good.sum()) / arrived if arrived else math.nan
    reason = _overload(arrival, ttft, end_s, trace.duration_s, unfinished, drain)
    return ServingResult(
        arrival_s=arrival, prompt_tokens=trace.prompt_tokens, output_tokens=output, ttft_s=ttft, tpot_s=tpot,
        e2e_s=e2e, replica=np.asarray(sim.owner, dtype=np.int64), ttft=LatencyStats.of(ttft),
        tpot=LatencyStats.of(tpot), e2e=LatencyStats.of(e2e), requests_arrived=arrived,
        requests_completed=completed, requests_unfinished=unfinished, duration_s=trace.duration_s, end_s=end_s,
        output_tokens_per_s=float(output[done].sum()) / span_s, goodput_rps=goodput, slo_attainment=attainment,
        preemptions=sim.preemptions, iterations=sim.iterations,
        mean_batch_size=sim.batch_seqs / sim.iterations if sim.iterations else 0.0,
        overloaded=bool(reason), overload_reason=reason, admitted_s=np.asarray(sim.admitted_s, dtype=np.float64))
