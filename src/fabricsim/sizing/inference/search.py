"""`size --inference` end to end: the analytic screen of every per-replica plan (``inference.screen``), then the
cheapest candidates confirmed by the discrete-event serving simulation at the offered rate (seeded Poisson
arrivals), adding replicas to a candidate that misses an SLO at its percentile; ranked by cost per million output
tokens, with the best plan per system and, when nothing qualifies, the constraint that bound."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricsim import units
from fabricsim.catalog import Catalog, default_catalog
from fabricsim.comm import Cluster
from fabricsim.inference import DEFAULT_KV_SERVER, launch_json, predict_inference
from fabricsim.model import ModelSpec, load_model
from fabricsim.serving import (
    RequestTrace,
    ServingLayout,
    ServingResult,
    length_dataset,
    poisson_requests,
    simulate_serving,
)
from fabricsim.sizing.bands import inference_ties, result_bands
from fabricsim.sizing.defaults import sizing_defaults
from fabricsim.sizing.inference.kvtier import TierPlan, with_tier
from fabricsim.sizing.inference.screen import (
    ReplicaPlan,
    engine_scheduler,
    inference_plan,
    price,
    replica_step_cost,
    screen,
    tier_costs,
)
from fabricsim.sizing.inference.spec import InferenceSizingSpec
from fabricsim.sizing.store import check_out_file, write_parquet

if TYPE_CHECKING:
    import pandas as pd

REPLICA_STEP_FRACTION = 0.1  # a failed candidate grows by max(1, 10%) replicas per bump (inference_max_replica_bumps)
WEIGHT_ORDER = ("bf16", "fp8", "fp4", "int4")  # ties prefer the more accurate format
SORT_COLUMNS = ["usd_per_million_output_tokens", "gpus", "tp", "pp", "ep", "weights_rank", "kv", "system", "fabric"]


@dataclass
class Confirmation:
    """A candidate's simulation: the replicas it needed, whether it met the SLOs, and the run it passed (or the
    last one it failed)."""

    replicas: int
    passed: bool
    result: ServingResult
    reason: str
    runs: int


@dataclass
class InferenceSizingResult:
    """The outcome of a serving search; ``note`` says which constraint bound when no candidate qualifies."""

    spec: InferenceSizingSpec
    frame: pd.DataFrame  # every timed per-replica plan, with its screen status
    results: list[dict[str, Any]]  # simulated and passing first (best first), then screen-only candidates
    best_by_system: list[dict[str, Any]]
    rejected: list[dict[str, Any]]  # simulated and failing even after the replica bumps
    plans_evaluated: int
    plans_pruned: int
    pruned_reasons: dict[str, int]
    simulations: int
    wall_s: float
    screen_wall_s: float
    note: str | None = None
    disaggregated: list[dict[str, Any]] = field(default_factory=list)  # --disagg: per system, cheapest first
    ties: dict[str, Any] | None = None  # confirmed results within the model's error of the cheapest, and the pick

    @property
    def best(self) -> dict[str, Any] | None:
        """The cheapest result the simulation confirmed (None when none passed)."""
        return self.results[0] if self.results and self.results[0]["simulated"] else None

    def to_json(self) -> dict[str, Any]:
        spec = self.spec
        defaults = sizing_defaults()
        keys = ("inference_target_utilization", "inference_confirm_top", "inference_max_confirm",
                "inference_max_replica_bumps", "inference_duration_s", "inference_slo_percentile",
                "inference_max_replicas", "inference_max_pp", "amortize_years", "pue", "kwh_usd")
        return {
            "inputs": spec.model_dump(mode="json"),
            "objective": "usd_per_million_output_tokens",
            "results": self.results[: spec.top],
            "ties": self.ties,
            "best_by_system": self.best_by_system,
            "rejected": self.rejected,
            "plans_evaluated": self.plans_evaluated,
            "plans_pruned": self.plans_pruned,
            "pruned_reasons": dict(self.pruned_reasons),
            "plans_meeting_slo_screen": int((self.frame["status"] == "ok").sum()) if len(self.frame) else 0,
            "simulations": self.simulations,
            "wall_s": self.wall_s,
            "screen_wall_s": self.screen_wall_s,
            "note": self.note,
            "disaggregated": self.disaggregated,
            "assumptions": {
                "cost": ("rental: billed GPUs x gpu_hour_usd" if spec.gpu_hour_usd is not None else
                         "capex from the bill of materials / amortize + energy x PUE x kwh_usd, per hour"),
                "billing": "whole nodes" if spec.whole_nodes else "GPUs used (share of the nodes)",
                "output_tokens": "offered rate x output tokens (the demand served), per hour",
                "screen": "steady-state continuous batching from the simulator's iteration cost; replicas = "
                          "ceil(rate / (capacity x target_utilization))",
                "simulation": f"Poisson arrivals, seed {spec.seed}, {spec.duration_s:g} s, shortest-queue routing, "
                              f"the {spec.engine} scheduler's defaults; SLOs at p{spec.slo_percentile}",
                "defaults": {k: {"value": defaults[k].value, "source": defaults[k].source} for k in keys},
                **({} if spec.kv_tier == "none" else {"kv_tier": (
                    f"{spec.prefix_network:g} of each prompt in a networked KV tier, loaded at the GPU's NIC share "
                    "where faster than computing it; servers: enough for the offered load bytes at the target "
                    "utilisation and for one prefix, at least --kv-servers; their capex and power priced in")}),
            },
        }


def _model(spec: InferenceSizingSpec) -> ModelSpec:
    if isinstance(spec.model, str):
        return load_model(spec.model)
    return ModelSpec.from_data(dict(spec.model), source="model")


def confirm(spec: InferenceSizingSpec, model: ModelSpec, plan: ReplicaPlan, replicas: int, trace: RequestTrace,
            catalog: Catalog) -> Confirmation:
    """Simulate the candidate at the offered rate; while it misses an SLO at its percentile (or overloads), add
    replicas (at most ``inference_max_replica_bumps`` times, within --max-gpus and max_replicas)."""
    cost = replica_step_cost(model, plan, spec, catalog)
    scheduler = engine_scheduler(spec, catalog.gpu(catalog.system(plan.system).gpu))
    bumps = int(sizing_defaults()["inference_max_replica_bumps"].value)
    r, runs = replicas, 0
    result: ServingResult | None = None
    reason = ""
    for _ in range(bumps + 1):
        result = simulate_serving(cost, trace, layout=ServingLayout(replicas=r, routing="shortest_queue"),
                                  scheduler=scheduler, slo_ttft_s=spec.slo_ttft_s, slo_tpot_s=spec.slo_tpot_s)
        runs += 1
        reason = _miss(spec, result)
        if not reason:
            return Confirmation(r, True, result, "", runs)
        step = max(1, math.ceil(REPLICA_STEP_FRACTION * r))
        if r + step > spec.max_replicas or (spec.max_gpus is not None and (r + step) * plan.gpus > spec.max_gpus):
            break
        r += step
    assert result is not None
    return Confirmation(r, False, result, reason, runs)


def _miss(spec: InferenceSizingSpec, res: ServingResult) -> str:
    """Why a simulated run misses the SLOs ("" when it meets them)."""
    p = spec.slo_percentile
    if res.overloaded:
        return f"overloaded: {res.overload_reason}"
    ttft, tpot = res.ttft.at(p), res.tpot.at(p)
    parts = []
    if not ttft <= spec.slo_ttft_s:
        parts.append(f"ttft p{p} {units.format_duration(ttft)} > {units.format_duration(spec.slo_ttft_s)}")
    if not tpot <= spec.slo_tpot_s:
        parts.append(f"tpot p{p} {units.format_duration(tpot)} > {units.format_duration(spec.slo_tpot_s)}")
    return "; ".join(parts)


def size_inference(spec: InferenceSizingSpec, *, out: Path | None = None, catalog: Catalog | None = None,
                   progress: Callable[[str, int, int], None] | None = None) -> InferenceSizingResult:
    """Screen every per-replica plan, confirm the cheapest by simulation, rank by USD per million output tokens;
    `progress` hears (what, done, total): systems screened, then plans confirmed by simulation."""
    import pandas as pd

    start = time.perf_counter()
    if out is not None:
        check_out_file(out)
    catalog = catalog or default_catalog()
    model = _model(spec)
    scr = screen(spec, model, catalog, progress)
    screen_wall = time.perf_counter() - start
    frame = pd.DataFrame(scr.rows)
    if out is not None and len(frame):
        write_parquet(frame, out, "size --inference")
    ok = _order(frame[frame["status"] == "ok"]) if len(frame) else frame
    candidates: list[dict[str, Any]] = ([{str(k): v for k, v in r.items()} for r in ok.to_dict("records")]
                                        if len(ok) else [])
    trace = poisson_requests(spec.rate_per_s, spec.duration_s, seed=spec.seed, prompt=spec.prompt_tokens,
                             output=spec.output_tokens, dataset=length_dataset(spec.lengths)) if candidates else None
    max_confirm = int(sizing_defaults()["inference_max_confirm"].value)
    passed: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    simulations = 0
    confirmed = 0
    planned = min(len(candidates), max_confirm)
    for row in candidates:
        if progress is not None:
            progress("confirming", confirmed, planned)
        best = min((e["usd_per_million_output_tokens"] for e in passed), default=math.inf)
        if confirmed >= max_confirm or (confirmed >= spec.confirm_top and
                                         not row["usd_per_million_output_tokens"] <= best):
            break  # past the confirm_top cheapest, only plans as cheap as the best confirmed one (a tie) or cheaper
        assert trace is not None
        plan = _plan_of(row, catalog)
        conf = confirm(spec, model, plan, int(row["replicas"]), with_tier(trace, spec, _tier_of(row)), catalog)
        simulations += conf.runs
        confirmed += 1
        entry = _entry(spec, model, row, catalog, conf)
        (passed if conf.passed else rejected).append(entry)
    passed.sort(key=_entry_key)
    ties = inference_ties(spec.engine, model, passed, catalog)
    screen_only = [{**_entry(spec, model, r, catalog, None), "tie": False} for r in candidates[confirmed:]][: spec.top]
    results = passed + screen_only
    by_system: dict[str, dict[str, Any]] = {}
    for e in passed:
        by_system.setdefault(e["system"], e)
    for row in candidates[confirmed:]:  # systems with no confirmed plan: their best screen candidate
        if row["system"] not in by_system:
            by_system[str(row["system"])] = _entry(spec, model, row, catalog, None)
    note = None
    if not passed:
        note = _binding_note(spec, frame, scr.pruned_reasons, rejected)
    disaggregated: list[dict[str, Any]] = []
    if spec.disagg and len(frame):
        disaggregated, runs = _disaggregated(spec, model, frame, catalog)
        simulations += runs
    return InferenceSizingResult(spec, frame, results, list(by_system.values()), rejected, scr.plans_evaluated,
                                 scr.plans_pruned, scr.pruned_reasons, simulations, time.perf_counter() - start,
                                 screen_wall, note, disaggregated, ties)


def _disaggregated(spec: InferenceSizingSpec, model: ModelSpec, frame: pd.DataFrame, catalog: Catalog
                   ) -> tuple[list[dict[str, Any]], int]:
    """The cheapest prefill and decode pools on each system (every timed plan a candidate for either), the
    ``confirm_top`` cheapest confirmed by simulation; (layouts, cheapest simulated passing first; simulations)."""
    from fabricsim.sizing.inference.disagg import best_pools, confirm_pools

    plans = list(dict.fromkeys(_plan_of({str(k): v for k, v in r.items()}, catalog)
                               for r in frame.to_dict("records")))
    trace = poisson_requests(spec.rate_per_s, spec.duration_s, seed=spec.seed, prompt=spec.prompt_tokens,
                             output=spec.output_tokens, dataset=length_dataset(spec.lengths))
    schedulers = {p.system: engine_scheduler(spec, catalog.gpu(catalog.system(p.system).gpu)) for p in plans}
    out: list[dict[str, Any]] = []
    runs = 0
    for pre, dec in best_pools(spec, model, plans, catalog, schedulers)[: max(1, spec.confirm_top)]:
        layout = confirm_pools(spec, model, pre, dec, trace, catalog, schedulers[pre.plan.system])
        runs += int(layout["simulation"]["runs"])
        out.append(layout)
    out.sort(key=lambda e: (not e["simulated"], math.inf if e["usd_per_million_output_tokens"] is None
                            else e["usd_per_million_output_tokens"]))
    return out, runs


def _order(frame: pd.DataFrame) -> pd.DataFrame:
    keyed = frame.assign(weights_rank=frame["weights"].map(WEIGHT_ORDER.index))
    return keyed.sort_values(SORT_COLUMNS, kind="mergesort", na_position="last").drop(
        columns="weights_rank").reset_index(drop=True)


def _entry_key(e: dict[str, Any]) -> tuple[Any, ...]:
    cost = e["usd_per_million_output_tokens"]
    p = e["plan"]
    return (math.inf if cost is None else cost, e["gpus"], p["tp"], p["pp"], p["ep"], WEIGHT_ORDER.index(p["weights"]),
            p["kv"], e["system"], e["fabric"])


def _plan_of(row: dict[str, Any], catalog: Catalog) -> ReplicaPlan:
    from fabricsim.collectives import resolve_fabric_link

    link = resolve_fabric_link(catalog, catalog.system(str(row["system"])), str(row["fabric"])).id
    return ReplicaPlan(str(row["system"]), str(row["fabric"]), link, int(row["tp"]), int(row["pp"]), int(row["ep"]),
                       str(row["weights"]), str(row["kv"]))


def _num(value: Any) -> Any:
    item = value.item() if hasattr(value, "item") else value
    return None if isinstance(item, float) and math.isnan(item) else item


def _entry(spec: InferenceSizingSpec, model: ModelSpec, row: dict[str, Any], catalog: Catalog,
           conf: Confirmation | None) -> dict[str, Any]:
    """One result as JSON: cluster, plan, replicas, latencies (simulated where confirmed), cost, energy, bottleneck."""
    plan = _plan_of(row, catalog)
    system = catalog.system(plan.system)
    screen_figs = {"replicas": _num(row["replicas"]), "max_batch": _num(row["max_batch"]),
                   "capacity_rps_per_replica": _num(row["capacity_rps"]), "ttft_s": _num(row["screen_ttft_s"]),
                   "tpot_s": _num(row["screen_tpot_s"]),
                   "usd_per_million_output_tokens": _num(row["usd_per_million_output_tokens"])}
    replicas = conf.replicas if conf is not None else int(row["replicas"])
    costs = price(spec, plan, system, replicas, catalog, tier_costs(row)) if conf is not None else row
    lat: dict[str, Any] = {f"{k}_s_p{p}": None for k in ("ttft", "tpot") for p in (50, 90, 99)}
    goodput = attainment = None
    sim: dict[str, Any] | None = None
    if conf is not None:
        res = conf.result
        lat.update(res.percentiles_json(("ttft", "tpot")))
        goodput, attainment = res.goodput_rps, res.slo_attainment
        sim = {"passed": conf.passed, "reason": conf.reason, "runs": conf.runs, "replicas": conf.replicas,
               "requests": res.requests_arrived, "mean_batch": res.mean_batch_size, "preemptions": res.preemptions,
               "output_tokens_per_s": res.output_tokens_per_s, "overloaded": res.overloaded}
    per_hour = _num(costs["cost_usd_per_hour"])
    facility_w = _num(costs["facility_power_w"])
    tokens_per_hour = spec.rate_per_s * spec.output_tokens * 3600.0
    bands = result_bands(spec.engine, model, plan.system, plan.weights, catalog, lat,
                         _num(costs["usd_per_million_output_tokens"]), conf is not None)
    return {
        "system": plan.system, "fabric": plan.fabric,
        "plan": plan.to_json(),
        "gpus_per_replica": plan.gpus, "replicas": replicas, "gpus": replicas * plan.gpus,
        "nodes": _num(costs["nodes"]), "max_batch": _num(row["max_batch"]), **lat,
        "goodput_rps": goodput, "slo_attainment": attainment,
        "usd_per_million_output_tokens": _num(costs["usd_per_million_output_tokens"]),
        "cost_usd_per_hour": per_hour, "capex_usd": _num(costs["capex_usd"]),
        "energy": {"facility_power_w": facility_w,
                   "kwh_per_million_output_tokens": None if facility_w is None else
                   facility_w / 1000.0 / tokens_per_hour * 1e6},
        "bottleneck": _bottleneck(model, plan, int(row["max_batch"]), spec, catalog),
        "simulated": conf is not None and conf.passed, "simulation": sim, "screen": screen_figs,
        "launch": _launch(spec, model, plan, catalog), **bands,
        **({} if "kv_tier_servers" not in row else {"kv_tier": _tier_json(spec, row)}),
    }


def _tier_of(row: dict[str, Any]) -> TierPlan | None:
    """The networked KV tier a screen row carries, as the simulation takes it (None without one)."""
    if "kv_tier_servers" not in row:
        return None
    return TierPlan(str(row["kv_tier_chosen"]), int(row["kv_tier_tokens"]), float(row["kv_tier_load_s"]),
                    float(row["kv_tier_load_s_per_token"]), float(row["kv_tier_latency_s"]),
                    int(row["kv_tier_servers"]), float(row["kv_tier_capex_usd"]), float(row["kv_tier_power_w"]),
                    float(row["kv_tier_fabric_bytes_per_s"]))


def _tier_json(spec: InferenceSizingSpec, row: dict[str, Any]) -> dict[str, Any]:
    """A result's networked KV tier: the server and how many, what they cost, the engine's choice, a request's load
    and the fabric bandwidth the offered rate's loads take."""
    return {"server": spec.kv_server or DEFAULT_KV_SERVER, "servers": _num(row["kv_tier_servers"]),
            "capex_usd": _num(row["kv_tier_capex_usd"]), "power_w": _num(row["kv_tier_power_w"]),
            "chosen": row["kv_tier_chosen"], "tokens_per_request": _num(row["kv_tier_tokens"]),
            "load_s": _num(row["kv_tier_load_s"]), "fabric_bytes_per_s": _num(row["kv_tier_fabric_bytes_per_s"])}


def _launch(spec: InferenceSizingSpec, model: ModelSpec, plan: ReplicaPlan, catalog: Catalog) -> dict[str, Any]:
    """The engine's command line for one replica of the plan, as the search priced it (engine defaults)."""
    return launch_json(inference_plan(plan, spec), catalog.gpu(catalog.system(plan.system).gpu),
                       spec.checkpoint or model.name)


def _bottleneck(model: ModelSpec, plan: ReplicaPlan, batch: int, spec: InferenceSizingSpec, catalog: Catalog) -> str:
    """The layer that bounds a static batch of the chosen size (compute, HBM, NVLink, ...), from the inference model."""
    cluster = Cluster(catalog.system(plan.system), fabric=plan.link, catalog=catalog)
    pred = predict_inference(model, cluster, inference_plan(plan, spec, max(1, batch)))
    return pred.bottleneck


def _plan_text(row: Any) -> str:
    return f"{row['system']} tp={row['tp']}" + (f" pp={row['pp']}" if row["pp"] > 1 else "") + (
        f" {row['weights']}" if row["weights"] != "bf16" else "")


def _binding_note(spec: InferenceSizingSpec, frame: pd.DataFrame, pruned: dict[str, int],
                  rejected: list[dict[str, Any]]) -> str:
    """Which constraint bound: memory, the TPOT or TTFT SLO (and how close the fastest plan came), GPUs or the
    simulation."""
    fmt = units.format_duration
    if frame.empty:
        top = max(pruned, key=lambda k: pruned[k]) if pruned else "no candidate plans"
        return f"no plan fits on any candidate system (most pruned by {top})"
    status = frame["status"]
    if not (status.isin(["ok", "ttft", "max-gpus", "max-replicas"])).any():
        fastest = frame.iloc[int(frame["tpot_min_s"].to_numpy().argmin())]
        return (f"no plan meets tpot {fmt(spec.slo_tpot_s)}: the fastest reaches {fmt(fastest['tpot_min_s'])} on "
                f"{_plan_text(fastest)}")
    if not (status.isin(["ok", "tpot", "max-gpus", "max-replicas"])).any():
        fastest = frame.iloc[int(frame["ttft_min_s"].to_numpy().argmin())]
        return (f"no plan meets ttft {fmt(spec.slo_ttft_s)}: the fastest reaches {fmt(fastest['ttft_min_s'])} on "
                f"{_plan_text(fastest)}")
    if not (status.isin(["ok", "max-gpus", "max-replicas"])).any():
        return (f"no plan meets ttft {fmt(spec.slo_ttft_s)} and tpot {fmt(spec.slo_tpot_s)} at once "
                "(each alone is met by some plan)")
    if not (status == "ok").any():
        sized = frame[frame["replicas"] > 0]
        least = sized.iloc[int((sized["replicas"] * sized["gpus_per_replica"]).to_numpy().argmin())]
        need = int(least["replicas"] * least["gpus_per_replica"])
        limit = f"--max-gpus {spec.max_gpus}" if spec.max_gpus is not None else f"{spec.max_replicas} replicas"
        return (f"no plan serves {spec.rate_per_s:g} req/s within {limit}: the fewest GPUs needed is {need} on "
                f"{_plan_text(least)}")
    if rejected:
        return (f"no candidate met the SLOs at p{spec.slo_percentile} in the serving simulation, e.g. "
                f"{rejected[0]['system']} tp={rejected[0]['plan']['tp']}: {rejected[0]['simulation']['reason']}")
    return "no candidate qualified"

