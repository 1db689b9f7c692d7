"""Disaggregated layouts for `size --inference --disagg`: every timed per-replica plan priced as a member of a
prefill pool (prompts only) and of a decode pool (decodes only) on its system, the cheapest pair with the P:D ratio
the offered rate needs, then confirmed by the serving simulation with both pools (the KV hand-off between them on
the real fabric).

- A prefill replica runs whole prompts, as many as its token budget holds a pass (a longer prompt in chunks): its
  capacity is prompts per second at full passes; its TTFT is one prompt's passes plus the KV hand-off.
- A decode replica holding ``b`` requests runs decode-only iterations: TPOT(b) is one such iteration over
  ``b x (P + O / 2)`` cached tokens; its capacity is b / (O x TPOT(b)) at the largest b meeting the TPOT SLO and
  its KV cache.
- Pools are sized to ``rate / (capacity x target utilisation)`` each; a simulated miss adds to the pool it names
  (TTFT: prefill, TPOT or overload: decode)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabricsim.catalog import Catalog
from fabricsim.comm import Cluster
from fabricsim.inference import InferenceStepCost, launch_json, with_kv_handoff
from fabricsim.model import ModelSpec
from fabricsim.serving import RequestTrace, SchedulerConfig, ServingLayout, ServingResult, simulate_serving
from fabricsim.sizing.bands import result_bands
from fabricsim.sizing.defaults import sizing_defaults
from fabricsim.sizing.inference.screen import ReplicaPlan, inference_plan, price, replica_step_cost
from fabricsim.sizing.inference.spec import InferenceSizingSpec


@dataclass(frozen=True)
class PoolMember:
    """A plan's figures as a pool member: capacity (requests/s per replica) and its latency at that capacity."""

    plan: ReplicaPlan
    capacity_rps: float
    latency_s: float  # prefill: TTFT of one prompt with the hand-off in a node; decode: TPOT at the chosen batch
    batch: int  # decode: requests held; prefill: prompts a pass
    across_s: float = 0.0  # prefill: the extra TTFT when the hand-off crosses the network to another system


def prefill_member(plan: ReplicaPlan, cost: InferenceStepCost, spec: InferenceSizingSpec, budget: int
                   ) -> PoolMember:
    """Prompts per second of a prefill replica at full passes, and one prompt's TTFT with its KV hand-off (in a
    node; ``across_s`` more when it crosses the network)."""
    p = spec.prompt_tokens
    pairs = p * (p + 1) / 2.0
    per_pass = max(1, budget // p)
    chunks = math.ceil(p / budget)
    full = float(cost.step_s_many(np.array([per_pass * p / chunks]), np.array([per_pass * pairs / chunks]),
                                  np.zeros(1), np.zeros(1))[0])
    one = float(cost.step_s_many(np.array([p / chunks]), np.array([pairs / chunks]), np.zeros(1), np.zeros(1))[0])
    near, far = cost.kv_transfer_s(p, True), cost.kv_transfer_s(p, False)
    return PoolMember(plan, per_pass / (chunks * full), chunks * one + near, per_pass, max(0.0, far - near))


def decode_member(plan: ReplicaPlan, cost: InferenceStepCost, spec: InferenceSizingSpec, max_seqs: int
                  ) -> PoolMember | None:
    """The decode batch with the most requests per second whose TPOT meets the SLO (None: not even one)."""
    p, o = spec.prompt_tokens, spec.output_tokens
    bmax = int(min(max_seqs, cost.kv_capacity_tokens // (p + o)))
    if bmax < 1:
        return None
    b = np.arange(1, bmax + 1, dtype=np.float64)
    tpot = cost.step_s_many(np.zeros_like(b), np.zeros_like(b), b, b * (p + o / 2.0))
    ok = tpot <= spec.slo_tpot_s
    if not ok.any():
        return None
    capacity = np.where(ok, b / (o * tpot), -1.0)
    i = int(np.argmax(capacity))
    return PoolMember(plan, float(capacity[i]), float(tpot[i]), int(b[i]))


def _pool_price(spec: InferenceSizingSpec, member: PoolMember, replicas: int, catalog: Catalog) -> dict[str, Any]:
    return price(spec, member.plan, catalog.system(member.plan.system), replicas, catalog)


def _replicas(spec: InferenceSizingSpec, member: PoolMember) -> int:
    return math.ceil(spec.rate_per_s / (member.capacity_rps * spec.target_utilization) - 1e-9)


def best_pools(spec: InferenceSizingSpec, model: ModelSpec, plans: list[ReplicaPlan], catalog: Catalog,
               schedulers: dict[str, SchedulerConfig]) -> list[tuple[PoolMember, PoolMember]]:
    """The cheapest prefill pool meeting the TTFT SLO and decode pool meeting the TPOT SLO (USD per hour of the
    replicas the rate needs; each system's engine scheduler in ``schedulers``) for every pair of systems, the
    decode pool on the prefill pool's system or another GPU type (the hand-off then crosses the network); one
    checkpoint and KV format for both (the hand-off moves KV blocks as they are). Cheapest pair first."""
    prefills: dict[tuple[str, str, str], list[PoolMember]] = {}
    decodes: dict[tuple[str, str, str], list[PoolMember]] = {}
    for plan in plans:
        cfg = schedulers[plan.system]
        cost = replica_step_cost(model, plan, spec, catalog)
        if cost.kv_capacity_tokens < spec.longest_request_tokens:
            continue
        key = (plan.system, plan.weights, plan.kv)
        pre = prefill_member(plan, cost, spec, cfg.max_num_batched_tokens)
        if pre.latency_s <= spec.slo_ttft_s:
            prefills.setdefault(key, []).append(pre)
        dec = decode_member(plan, cost, spec, cfg.max_num_seqs)
        if dec is not None:
            decodes.setdefault(key, []).append(dec)

    cost_per_hour: dict[PoolMember, float] = {}

    def hourly(m: PoolMember) -> float:
        """USD per hour of the replicas the rate needs of ``m`` (priced once per member)."""
        if m not in cost_per_hour:
            value = float(_pool_price(spec, m, _replicas(spec, m), catalog)["cost_usd_per_hour"])
            cost_per_hour[m] = value if math.isfinite(value) else math.inf
        return cost_per_hour[m]

    best_decode = {key: min(ms, key=lambda m: (hourly(m), m.plan.gpus)) for key, ms in decodes.items()}
    pairs: dict[tuple[str, str], tuple[float, PoolMember, PoolMember]] = {}
    for (system, weights, kv), members in prefills.items():
        for (decode_system, dweights, dkv), dec in best_decode.items():
            if (dweights, dkv) != (weights, kv):
                continue
            across = decode_system != system
            ok = [m for m in members if m.latency_s + (m.across_s if across else 0.0) <= spec.slo_ttft_s]
            if not ok:
                continue
            pre = min(ok, key=lambda m: (hourly(m), m.plan.gpus))
            total = hourly(pre) + hourly(dec)
            if (system, decode_system) not in pairs or total < pairs[(system, decode_system)][0]:
                pairs[(system, decode_system)] = (total, pre, dec)
    return [(pre, dec) for _, pre, dec in sorted(pairs.values(), key=lambda t: t[0])]


def confirm_pools(spec: InferenceSizingSpec, model: ModelSpec, pre: PoolMember, dec: PoolMember,
                  trace: RequestTrace, catalog: Catalog, cfg: SchedulerConfig) -> dict[str, Any]:
    """Simulate the pools at the offered rate; while a pool misses its SLO add a replica to it (at most
    ``inference_max_replica_bumps`` times). The layout as JSON, with its cost and simulated latencies."""
    system = catalog.system(pre.plan.system)
    cluster = Cluster(system, fabric=pre.plan.link, catalog=catalog)
    iplan = {m: inference_plan(m.plan, spec) for m in (pre, dec)}
    cost = with_kv_handoff(replica_step_cost(model, pre.plan, spec, catalog), model, cluster, iplan[pre],
                           iplan[dec])
    decode_cost = replica_step_cost(model, dec.plan, spec, catalog)
    p, d = _replicas(spec, pre), _replicas(spec, dec)
    bumps = int(sizing_defaults()["inference_max_replica_bumps"].value)
    result: ServingResult | None = None
    reason = ""
    runs = 0
    for _ in range(bumps + 1):
        same_node = (dec.plan.system == pre.plan.system
                     and p * pre.plan.gpus + d * dec.plan.gpus <= system.nvlink_domain_gpus)
        result = simulate_serving(cost, trace, scheduler=cfg, decode_cost=decode_cost,
                                  layout=ServingLayout(disagg=(p, d), kv_same_node=same_node),
                                  slo_ttft_s=spec.slo_ttft_s, slo_tpot_s=spec.slo_tpot_s)
        runs += 1
        ttft, tpot = result.ttft.at(spec.slo_percentile), result.tpot.at(spec.slo_percentile)
        ttft_ok, tpot_ok = ttft <= spec.slo_ttft_s, tpot <= spec.slo_tpot_s
        if ttft_ok and tpot_ok and not result.overloaded:
            reason = ""
            break
        reason = "overloaded" if result.overloaded else "; ".join(
            s for s, ok in ((f"ttft p{spec.slo_percentile} {ttft:.3g} s", ttft_ok),
                            (f"tpot p{spec.slo_percentile} {tpot:.3g} s", tpot_ok)) if not ok)
        if not ttft_ok or result.overloaded:
            p += 1
        if not tpot_ok or result.overloaded:
            d += 1
    assert result is not None
    prices = [_pool_price(spec, pre, p, catalog), _pool_price(spec, dec, d, catalog)]
    per_hour = sum(float(x["cost_usd_per_hour"]) for x in prices)
    per_million = sum(float(x["usd_per_million_output_tokens"]) for x in prices)
    launch = launch_json(iplan[pre], catalog.gpu(system.gpu), spec.checkpoint or model.name, disagg=(p, d),
                         decode=(iplan[dec], catalog.gpu(catalog.system(dec.plan.system).gpu)))
    latencies = result.percentiles_json(("ttft", "tpot"))
    bands = result_bands(spec.engine, model, dec.plan.system, dec.plan.weights, catalog, latencies,
                         per_million if math.isfinite(per_million) else None, True)
    return {
        "system": pre.plan.system, "decode_system": dec.plan.system, "fabric": pre.plan.fabric,
        "disagg": f"{p}:{d}",
        "prefill": {"plan": _plan_json(pre.plan), "replicas": p, "capacity_rps_per_replica": pre.capacity_rps,
                    "screen_ttft_s": pre.latency_s},
        "decode": {"plan": _plan_json(dec.plan), "replicas": d, "capacity_rps_per_replica": dec.capacity_rps,
                   "screen_tpot_s": dec.latency_s, "batch": dec.batch},
        "gpus": p * pre.plan.gpus + d * dec.plan.gpus, **latencies,
        "usd_per_million_output_tokens": per_million if math.isfinite(per_million) else None,
        "cost_usd_per_hour": per_hour if math.isfinite(per_hour) else None,
        "simulated": not reason, "simulation": {"passed": not reason, "reason": reason, "runs": runs,
                                                "preemptions": result.preemptions,
                                                "overloaded": result.overloaded},
        "launch": launch, **bands,
    }


def _plan_json(plan: ReplicaPlan) -> dict[str, Any]:
    return {**plan.to_json(), "gpus": plan.gpus}
