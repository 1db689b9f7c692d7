"""The analytic screen of `size --inference`: enumerate per-replica serving plans (system x fabric x tp x pp x ep x
weight and KV formats), prune by divisibility and memory, and price every batch of a plan in one numpy pass with
the serving simulator's own iteration cost (``InferenceStepCost.step_s_many``), so screen and simulation agree.

Steady-state model of one continuously batched replica holding ``b`` running requests (prompt P, output O):
- a request lives about O iterations, so each iteration admits b / O new requests: b / O x P prefill tokens
  (b / O x P (P + 1) / 2 causal pairs) ride along with the b decodes over b x (P + O / 2) cached tokens;
  TPOT(b) = that iteration's time;
- TTFT(b) = one iteration of wait plus ceil(P / (token budget - b)) iterations carrying the prompt's chunks;
- e2e(b) = TTFT + (O - 1) x TPOT and the replica's capacity is b / e2e requests/s.
The screen keeps the batch with the largest capacity whose TPOT and TTFT meet the SLOs and sizes the replicas to
``rate / (capacity x target utilisation)`` (queueing headroom, data/defaults.yaml)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fabricsim.caching import ByIdentity
from fabricsim.catalog import GPU, Catalog, System
from fabricsim.collectives import resolve_fabric_link
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.inference import InferencePlan, InferenceStepCost, check_inference_plan, engine_profile, step_cost
from fabricsim.model import ModelSpec
from fabricsim.serving import SchedulerConfig, engine_scheduler_config
from fabricsim.sizing.defaults import sizing_defaults
from fabricsim.sizing.economics import J_PER_KWH, Economics, economics
from fabricsim.sizing.inference.kvtier import TierPlan, tier_plan
from fabricsim.sizing.inference.spec import InferenceSizingSpec
from fabricsim.sizing.space import ClusterChoice, priced_systems, search_system
from fabricsim.sizing.spec import DEFAULT_FABRICS

HOUR_S = 3600.0
FABRIC_PROBE_NODES = 2  # cluster size at which the cheapest fabric is picked (the smallest with a scale-out tier)


@dataclass(frozen=True)
class ReplicaPlan:
    """One per-replica serving plan on one system and scale-out fabric."""

    system: str
    fabric: str
    link: str
    tp: int
    pp: int
    ep: int
    weights: str
    kv: str

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    def to_json(self) -> dict[str, object]:
        """The plan's parallelism and formats."""
        return {"tp": self.tp, "pp": self.pp, "ep": self.ep, "weights": self.weights, "kv": self.kv}


@dataclass
class Screen:
    """Every timed plan (one row each, feasible or not, with why), and the counts and reasons of pruned ones."""

    rows: list[dict[str, object]]
    plans_evaluated: int
    plans_pruned: int
    pruned_reasons: dict[str, int]


def fabrics_for(spec: InferenceSizingSpec, system: System, catalog: Catalog) -> list[tuple[str, str]]:
    """(fabric, link) pairs to try on a system: the given ones, or the cheapest default one that builds."""
    if spec.fabrics is not None:
        return [(f, resolve_fabric_link(catalog, system, f).id) for f in spec.fabrics]
    best: tuple[float, str, str] | None = None
    for fabric in DEFAULT_FABRICS:
        try:
            link = resolve_fabric_link(catalog, system, fabric).id
        except SpecError:
            continue
        nodes = FABRIC_PROBE_NODES
        econ = economics(ClusterChoice(system.id, fabric, link, 1.0, nodes, nodes * system.gpus_per_node),
                         spec.rail_optimized, catalog)
        if econ.error is None and econ.capex_usd is not None and (best is None or econ.capex_usd < best[0]):
            best = (econ.capex_usd, fabric, link)
    if best is None:
        raise SpecError(f"no default fabric ({', '.join(DEFAULT_FABRICS)}) builds on {system.id}", field="--fabrics")
    return [(best[1], best[2])]


def _domain(system: System) -> int:
    return system.nvlink_domain_gpus if system.nvlink_domain_gpus > 1 else system.gpus_per_node


def tp_values(spec: InferenceSizingSpec, system: System) -> list[int]:
    """Divisors of the NVLink domain and powers of two up to it (a replica leaves the domain only through pp)."""
    domain = _domain(system)
    if spec.tp is not None:
        return sorted(set(spec.tp))
    return sorted({d for d in range(1, domain + 1) if domain % d == 0} | {2**k for k in range(8) if 2**k <= domain})


def pp_values(spec: InferenceSizingSpec) -> list[int]:
    """Powers of two up to ``inference_max_pp`` (or the given list)."""
    if spec.pp is not None:
        return sorted(set(spec.pp))
    deepest = int(sizing_defaults()["inference_max_pp"].value)
    return [2**k for k in range(8) if 2**k <= deepest]


def ep_values(spec: InferenceSizingSpec, model: ModelSpec, tp: int) -> list[int]:
    """Expert-parallel sizes: 1 for dense models; else divisors of tp (a stage's GPUs) that divide the experts."""
    if model.moe is None:
        return [1]
    values = spec.ep or tuple(d for d in range(1, tp + 1) if tp % d == 0)
    return [e for e in values if model.moe.experts % e == 0]


def nodes_for(replicas: int, replica_gpus: int, gpus_per_node: int) -> int:
    """Nodes holding ``replicas`` replicas: several per node when they fit (whole replicas), else whole nodes each."""
    if replica_gpus <= gpus_per_node:
        return math.ceil(replicas / (gpus_per_node // replica_gpus))
    return replicas * math.ceil(replica_gpus / gpus_per_node)


def hourly_cost(econ: Economics, billed_gpus: int, cluster_gpus: int, spec: InferenceSizingSpec
                ) -> tuple[float, float]:
    """(USD per hour, facility watts) of a cluster, for the billed share of its GPUs: amortised capex plus energy x
    PUE x price, or the rental price per GPU-hour (power included); NaN where the catalog lacks a figure."""
    share = billed_gpus / cluster_gpus
    facility_w = (math.nan if econ.power_w is None else econ.power_w) * spec.pue * share
    if spec.gpu_hour_usd is not None:
        return spec.gpu_hour_usd * billed_gpus, facility_w
    capex = math.nan if econ.capex_usd is None else econ.capex_usd
    return capex * share * HOUR_S / spec.amortize_s + facility_w * HOUR_S / J_PER_KWH * spec.kwh_usd, facility_w


def batch_curves(cost: InferenceStepCost, prompt: int, output: int, batches: np.ndarray, budget_tokens: int,
                 cached: int = 0, load_s: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(TPOT, TTFT, e2e) seconds of a replica holding each of ``batches`` running requests (module docstring); a
    request that finds ``cached`` prompt tokens loaded from a KV tier prefills the rest, attending to them, after
    waiting ``load_s`` for the load."""
    b = batches.astype(np.float64)
    admitted = b / output
    new = prompt - cached
    pairs_prompt = new * (cached + (new + 1) / 2.0)
    kv = b * (prompt + output / 2.0)
    tpot = cost.step_s_many(admitted * new, admitted * pairs_prompt, b, kv)
    chunk = np.minimum(new, np.maximum(budget_tokens - b, 1.0))
    chunks = np.ceil(new / chunk)
    t_chunk = cost.step_s_many(chunk, pairs_prompt / chunks, b, kv)
    ttft = load_s + tpot + chunks * t_chunk
    return tpot, ttft, ttft + (output - 1) * tpot


@lru_cache(maxsize=8192)
def _step_cost(model: ByIdentity[ModelSpec], system: ByIdentity[System], link: str, catalog: ByIdentity[Catalog],
               plan: InferencePlan) -> InferenceStepCost:
    return step_cost(model.value, Cluster(system.value, fabric=link, catalog=catalog.value), plan)


def inference_plan(plan: ReplicaPlan, spec: InferenceSizingSpec, batch: int = 1) -> InferencePlan:
    """The inference model's plan of one replica: its parallelism and formats, the spec's lengths and engine."""
    return InferencePlan(tp=plan.tp, pp=plan.pp, ep=plan.ep, batch=batch, prompt_tokens=spec.prompt_tokens,
                         output_tokens=spec.output_tokens, weights=plan.weights, kv=plan.kv, engine=spec.engine)


def replica_step_cost(model: ModelSpec, plan: ReplicaPlan, spec: InferenceSizingSpec, catalog: Catalog
                      ) -> InferenceStepCost:
    """The iteration cost of a replica plan (cached per model, system, fabric and plan)."""
    return _step_cost(ByIdentity(model), ByIdentity(catalog.system(plan.system)), plan.link, ByIdentity(catalog),
                      inference_plan(plan, spec))


def _prune(reasons: dict[str, int], why: str, count: int = 1) -> None:
    reasons[why] = reasons.get(why, 0) + count


def screen(spec: InferenceSizingSpec, model: ModelSpec, catalog: Catalog,
           progress: Callable[[str, int, int], None] | None = None) -> Screen:
    """Time every per-replica plan that passes divisibility and memory and size its replicas (module docstring);
    `progress` hears ("screening", systems done, systems) as it goes."""
    systems = spec.systems if spec.systems is not None else priced_systems(catalog)
    context = spec.prompt_tokens + spec.output_tokens
    max_context = _preset_context(spec)
    if max_context is not None and context > max_context:
        raise SpecError(f"prompt + output = {context} tokens exceeds the model's context window of {max_context}",
                        field="--prompt")
    longest = spec.longest_request_tokens  # the longest simulated request must fit one replica's KV cache
    rows: list[dict[str, object]] = []
    reasons: dict[str, int] = {}
    evaluated = pruned = 0
    for done, sid in enumerate(systems):
        if progress is not None:
            progress("screening", done, len(systems))
        system = search_system(catalog, sid)
        gpu = catalog.gpu(system.gpu)
        cfg = engine_scheduler(spec, gpu)
        for fabric, link in fabrics_for(spec, system, catalog):
            for plan in _plans(spec, model, system, gpu, fabric, link, reasons):
                if plan is None:
                    pruned += 1
                    continue
                cost = replica_step_cost(model, plan, spec, catalog)
                if cost.kv_capacity_tokens < longest:
                    _prune(reasons, "memory: weights + KV of one request at full context do not fit")
                    pruned += 1
                    continue
                evaluated += 1
                tier = tier_plan(spec, model, inference_plan(plan, spec),
                                 Cluster(system, fabric=plan.link, catalog=catalog))
                rows.append(_screen_row(spec, plan, system, cost, cfg, catalog, tier))
    return Screen(rows, evaluated, pruned, reasons)


def engine_scheduler(spec: InferenceSizingSpec, gpu: GPU) -> SchedulerConfig:
    """The serving scheduler as the spec's engine runs it on ``gpu``: its batch, prefill tokens per iteration,
    policy, KV admission, chunking and prefix cache (``serving.engine_scheduler_config``). The screen's batch
    curves read its batch and budget; the confirmation simulates it whole."""
    return engine_scheduler_config(engine_profile(spec.engine), gpu,
                                   longest_request_tokens=spec.longest_request_tokens)


def _preset_context(spec: InferenceSizingSpec) -> int | None:
    if not isinstance(spec.model, str):
        return None
    from fabricsim.model import preset

    try:
        return preset(spec.model).max_context
    except SpecError:
        return None


def _plans(spec: InferenceSizingSpec, model: ModelSpec, system: System, gpu: GPU, fabric: str, link: str,
           reasons: dict[str, int]) -> list[ReplicaPlan | None]:
    """Candidate plans of a system in a fixed order; None for each pruned by a divisibility or format rule."""
    out: list[ReplicaPlan | None] = []
    gpn = system.gpus_per_node
    for tp in tp_values(spec, system):
        for pp in pp_values(spec):
            for ep in ep_values(spec, model, tp):
                for weights in spec.weights:
                    for kv in spec.kv:
                        plan = ReplicaPlan(system.id, fabric, link, tp, pp, ep, weights, kv)
                        why = _rule(model, plan, system, gpu)
                        if why is None and plan.gpus > gpn and plan.gpus % gpn:
                            why = f"placement: a replica over one node must fill whole {gpn}-GPU nodes"
                        if why is None and spec.max_gpus is not None and plan.gpus > spec.max_gpus:
                            why = "max-gpus: one replica needs more GPUs"
                        if why is not None:
                            _prune(reasons, why)
                        out.append(None if why is not None else plan)
    return out


def _rule(model: ModelSpec, plan: ReplicaPlan, system: System, gpu: GPU) -> str | None:
    """Why a plan cannot run (divisibility, formats, tp beyond the NVLink domain), or None."""
    if plan.tp > _domain(system):
        return "tp beyond the NVLink domain (span nodes with pp instead)"
    try:
        check_inference_plan(model, InferencePlan(tp=plan.tp, pp=plan.pp, ep=plan.ep, weights=plan.weights,
                                                  kv=plan.kv), gpu)
    except SpecError as exc:
        field = exc.field or "plan"
        return f"{field.lstrip('-')}: {str(exc).split(': ', 1)[-1]}"
    return None


def _screen_row(spec: InferenceSizingSpec, plan: ReplicaPlan, system: System, cost: InferenceStepCost,
                cfg: SchedulerConfig, catalog: Catalog, tier: TierPlan | None = None) -> dict[str, object]:
    """One plan's screen figures: the best SLO-meeting batch, the replicas and what they cost per hour (with a
    networked KV tier: its share loaded where the engine loads it, its servers priced)."""
    prompt, output = spec.prompt_tokens, spec.output_tokens
    mean_kv = prompt + output / 2.0
    bmax = int(min(cfg.max_num_seqs, cost.kv_capacity_tokens // mean_kv, cfg.max_num_batched_tokens - 1))
    batches = np.arange(1, max(bmax, 1) + 1)
    loads = tier is not None and tier.chosen == "load"
    tpot, ttft, e2e = batch_curves(cost, prompt, output, batches, cfg.max_num_batched_tokens,
                                   tier.tokens if tier is not None and loads else 0,
                                   tier.load_s if tier is not None and loads else 0.0)
    meets_tpot = tpot <= spec.slo_tpot_s
    meets_ttft = ttft <= spec.slo_ttft_s
    ok = meets_tpot & meets_ttft
    row: dict[str, object] = {
        "system": plan.system, "fabric": plan.fabric, "tp": plan.tp, "pp": plan.pp, "ep": plan.ep,
        "weights": plan.weights, "kv": plan.kv, "gpus_per_replica": plan.gpus,
        "kv_capacity_tokens": cost.kv_capacity_tokens, "tpot_min_s": float(tpot[0]), "ttft_min_s": float(ttft[0]),
        "status": "ok", "max_batch": 0, "screen_tpot_s": math.nan, "screen_ttft_s": math.nan,
        "capacity_rps": math.nan, "replicas": 0, "gpus": 0, "nodes": 0, "cost_usd_per_hour": math.nan,
        "usd_per_million_output_tokens": math.nan, "capex_usd": math.nan, "facility_power_w": math.nan,
        **({} if tier is None else tier.row()),
    }
    if not ok.any():
        row["status"] = "tpot" if not meets_tpot.any() else "ttft" if not meets_ttft.any() else "tpot+ttft"
        return row
    capacity = np.where(ok, batches / e2e, -1.0)
    i = int(np.argmax(capacity))
    cap = float(capacity[i])
    replicas = math.ceil(spec.rate_per_s / (cap * spec.target_utilization) - 1e-9)
    row.update(max_batch=int(batches[i]), screen_tpot_s=float(tpot[i]), screen_ttft_s=float(ttft[i]),
               capacity_rps=cap, replicas=replicas)
    if replicas > spec.max_replicas:
        row["status"] = "max-replicas"
        return row
    if spec.max_gpus is not None and replicas * plan.gpus > spec.max_gpus:
        row["status"] = "max-gpus"
        return row
    row.update(price(spec, plan, system, replicas, catalog, tier_costs(row)))
    return row


def tier_costs(row: dict[str, object]) -> tuple[float, float] | None:
    """(capex USD, watts) of the networked KV tier a screen row carries (None without one)."""
    if "kv_tier_servers" not in row:
        return None
    return float(row["kv_tier_capex_usd"]), float(row["kv_tier_power_w"])  # type: ignore[arg-type]


def price(spec: InferenceSizingSpec, plan: ReplicaPlan, system: System, replicas: int, catalog: Catalog,
          tier: tuple[float, float] | None = None) -> dict[str, object]:
    """GPUs, nodes, USD per hour, USD per million output tokens (at the offered rate), capex and facility power;
    ``tier`` the (capex, watts) of a networked KV tier's servers, added (amortised as the cluster, at its PUE)."""
    gpn = system.gpus_per_node
    gpus = replicas * plan.gpus
    nodes = nodes_for(replicas, plan.gpus, gpn)
    econ = economics(ClusterChoice(plan.system, plan.fabric, plan.link, 1.0, nodes, nodes * gpn),
                     spec.rail_optimized, catalog)
    billed = nodes * gpn if spec.whole_nodes else gpus
    per_hour, facility_w = hourly_cost(econ, billed, nodes * gpn, spec)
    tokens_per_hour = spec.rate_per_s * spec.output_tokens * HOUR_S
    capex = math.nan if econ.capex_usd is None else econ.capex_usd * billed / (nodes * gpn)
    if tier is not None:
        tier_w = tier[1] * spec.pue
        per_hour += tier[0] * HOUR_S / spec.amortize_s + tier_w * HOUR_S / J_PER_KWH * spec.kwh_usd
        capex += tier[0]
        facility_w += tier_w
    return {"replicas": replicas, "gpus": gpus, "nodes": nodes, "cost_usd_per_hour": per_hour,
            "usd_per_million_output_tokens": per_hour / tokens_per_hour * 1e6, "capex_usd": capex,
            "facility_power_w": facility_w}
