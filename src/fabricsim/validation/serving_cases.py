"""Serving-benchmark cases (``vllm bench serve``, ``sglang bench_serving``): the published run replayed on the
serving simulator with its engine's scheduler, every prompt sent at once (or Poisson arrivals at its rate) and at
most ``concurrency`` requests in flight, then the benchmark's own metric over the simulated requests."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.inference import InferencePlan, step_cost
from fabricsim.model import ModelSpec
from fabricsim.serving import (
    DatasetLengths,
    RequestTrace,
    all_at_once,
    engine_scheduler_config,
    length_dataset,
    poisson_requests,
    simulate_serving,
)
from fabricsim.validation.cases import NotExpressibleCase

SERVING_METRICS = ("total_token_throughput", "output_throughput_total", "request_throughput", "tpot_mean",
                   "tpot_median", "ttft_mean", "ttft_median")
DRAIN_S = 86_400.0  # an offline run drains every request: a day of simulated time bounds it
POISSON_SEED = 0  # a finite request rate: the benchmark's arrival process with fabricsim's fixed seed


def is_serving_case(case: dict[str, Any]) -> bool:
    """A case that reports a serving benchmark (a request rate, ``inf`` for every prompt at once)."""
    return case["config"].get("request_rate") is not None


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise NotExpressibleCase(f"{name} not stated as a number ({value!r})")
    return value


def _rate(value: Any) -> float:
    text = str(value).strip().lower()
    if text in ("inf", "infinity"):
        return math.inf
    try:
        rate = float(text)
    except ValueError:
        raise NotExpressibleCase(f"request_rate {value!r} is not a number or inf") from None
    if not (math.isfinite(rate) and rate > 0):
        raise NotExpressibleCase(f"request_rate {value!r} is not a positive rate")
    return rate


def _trace(n: int, prompt: int, output: int, rate: float, dataset: DatasetLengths | None) -> RequestTrace:
    if math.isinf(rate):
        return all_at_once(n, prompt=prompt, output=output, dataset=dataset)
    return poisson_requests(rate, n / rate, seed=POISSON_SEED, prompt=prompt, output=output, dataset=dataset)


def case_dataset(config: dict[str, Any]) -> DatasetLengths | None:
    """The packaged per-request lengths of the dataset a case's client sampled (``dataset: sharegpt``: vLLM's
    ShareGPT sampler), scaled to the case's mean lengths; None (every request at the stated lengths) for synthetic
    datasets and for clients with another sampler (SGLang's bench_serving draws ShareGPT without vLLM's caps)."""
    name = str(config.get("dataset") or "").strip().lower()
    client = str(config.get("flags") or "").lower()
    if name != "sharegpt" or "bench_serving" in client or "sglang" in str(config.get("framework") or "").lower():
        return None
    return length_dataset("sharegpt")


def predict_serving_case(case: dict[str, Any], model: ModelSpec, cluster: Cluster, plan: InferencePlan
                         ) -> tuple[float, str]:
    """The case's serving metric as the simulator predicts it, and a detail line. ``plan`` is the case's plan
    (its engine, parallelism and formats; its batch is not used: the scheduler forms the batches)."""
    config = case["config"]
    metric = str(case["metric"]["name"])
    if metric not in SERVING_METRICS:
        raise NotExpressibleCase(f"serving metric {metric!r} is not one the simulator reports")
    if config.get("flags") and "num-scheduler-steps" in str(config["flags"]):
        raise NotExpressibleCase("multi-step scheduling (--num-scheduler-steps) is not modelled")
    n = _count(config.get("num_prompts"), "num_prompts")
    rate = _rate(config["request_rate"])
    concurrency = config.get("concurrency")
    engine = plan.engine_profile
    gpu = cluster.catalog.gpu(cluster.system.gpu)
    max_seqs = engine.max_batch(gpu)
    if concurrency is not None:
        max_seqs = min(max_seqs, _count(concurrency, "concurrency"))
    dataset = case_dataset(config)
    trace = _trace(n, plan.prompt_tokens, plan.output_tokens, rate, dataset)
    longest = int((trace.prompt_tokens + trace.output_tokens).max())
    cost = step_cost(model, cluster, plan)
    if cost.kv_capacity_tokens < longest:
        raise SpecError(f"the KV cache holds {cost.kv_capacity_tokens} tokens, fewer than one request of "
                        f"{longest}: the engine would not start on the stated GPUs")
    scheduler = engine_scheduler_config(engine, gpu, max_seqs=max_seqs, longest_request_tokens=longest)
    r = simulate_serving(cost, trace, scheduler=scheduler, drain_s=DRAIN_S)
    if r.requests_unfinished:
        raise SpecError(f"{r.requests_unfinished} of {n} requests did not finish in the simulation")
    span = r.end_s - float(trace.arrival_s[0])
    ttft = r.ttft_s
    if concurrency is not None and r.admitted_s is not None:  # a closed loop: the client sends as a slot frees
        ttft = r.ttft_s - (r.admitted_s - trace.arrival_s)
    outputs = float(trace.output_tokens.sum())
    tokens = float(trace.prompt_tokens.sum()) + outputs
    value = {"total_token_throughput": tokens / span, "output_throughput_total": outputs / span,
             "request_throughput": n / span, "tpot_mean": float(np.nanmean(r.tpot_s)) * 1e3,
             "tpot_median": float(np.nanmedian(r.tpot_s)) * 1e3, "ttft_mean": float(np.mean(ttft)) * 1e3,
             "ttft_median": float(np.median(ttft)) * 1e3}[metric]
    where = "all at once" if math.isinf(rate) else f"Poisson {rate:g}/s (seed {POISSON_SEED})"
    lengths = (f"{plan.prompt_tokens}/{plan.output_tokens} tokens" if dataset is None else
               f"{dataset.id} lengths at mean {plan.prompt_tokens}/{plan.output_tokens} tokens")
    detail = (f"served: {n} requests of {lengths} {where}, at most "
              f"{max_seqs} running, {engine.label} {scheduler.policy} scheduler, tp={plan.tp} "
              f"{plan.weights}/{plan.kv}; "
              f"mean batch {r.mean_batch_size:.1f}, {r.preemptions} preemptions, TTFT mean "
              f"{np.mean(ttft) * 1e3:.0f} ms, TPOT mean {np.nanmean(r.tpot_s) * 1e3:.2f} ms, "
              f"{span:.1f} s")
    return value, detail
