"""`fabricsim.infer`: a static batch served on one parallel group (TTFT, TPOT, throughput, memory, bounding layer)
and, with a request rate or trace, continuous-batching replicas (latency percentiles, goodput); the engine of
`fabricsim infer`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fabricsim.api.kvtier import check_capacity, kv_tier_json, kv_tier_of, with_network_tier
from fabricsim.api.result import Result, model_import_fields
from fabricsim.api.serve import DecodePool, ServeRequest, decode_pool, serve_request
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from fabricsim.api.specs import InferRun
    from fabricsim.comm import Cluster
    from fabricsim.inference import InferencePlan, InferencePrediction, NetworkKvTier
    from fabricsim.model import HFImport, ModelSpec
    from fabricsim.serving import ServingResult
    from fabricsim.validation import BandResult


@dataclass(frozen=True, repr=False)
class InferResult(Result):
    """A served batch: ``prediction`` (ttft_s, tpot_s, output_tokens_per_s, memory, breakdown_s, bottleneck), its
    ``plan``, and with a rate or trace the serving simulation (``served``); bands for each."""

    command: ClassVar[str] = "infer"
    headline_keys: ClassVar[tuple[str, ...]] = ("ttft_s", "tpot_s", "output_tokens_per_s", "bottleneck")

    prediction: InferencePrediction | None = None
    plan: InferencePlan | None = None
    served: ServingResult | None = None
    serve: ServeRequest | None = None
    decode: tuple[InferencePlan, Cluster] | None = None
    bands: dict[str, BandResult] = field(default_factory=dict)
    served_bands: dict[str, BandResult] = field(default_factory=dict)
    model_name: str = ""

    @property
    def ttft_s(self) -> float:
        assert self.prediction is not None
        return self.prediction.ttft_s

    @property
    def tpot_s(self) -> float:
        assert self.prediction is not None
        return self.prediction.tpot_s

    @property
    def bottleneck(self) -> str:
        assert self.prediction is not None
        return self.prediction.bottleneck


def run_infer(run: InferRun, inputs: dict[str, Any]) -> InferResult:
    """`fabricsim.infer` (generated in `fabricsim.api.calls` from `InferRun`): the static batch and, with a rate
    or a trace, the served requests; ``inputs`` the call's keyword arguments as given, the result's echo."""
    o = run
    model, system, gpus, tp, pp, ep, dp, batch = o.model, o.system, o.gpus, o.tp, o.pp, o.ep, o.dp, o.batch
    fabric, engine, checkpoint = o.fabric, o.engine, o.checkpoint
    draft_tokens, acceptance = o.draft_tokens, o.acceptance
    trace = None if o.trace is None else Path(o.trace)
    calibration = list(o.calibration or [])
    from fabricsim.catalog import load_catalog, with_gpu_power
    from fabricsim.comm import Cluster
    from fabricsim.inference import InferencePlan, predict_inference
    from fabricsim.inputs import oversubscription as checked_oversubscription
    from fabricsim.model import resolve_model

    oversubscription = checked_oversubscription(o.oversubscription)
    from fabricsim.inference import engine_profile

    profile = engine_profile(engine)  # an unknown engine is a one-line error naming the known ones
    catalog = load_catalog(*(calibration or []))
    catalog = with_gpu_power(catalog, catalog.system(system, field="--system").gpu, o.gpu_power, field="--gpu-power")
    gpu = catalog.gpu(catalog.system(system).gpu)
    serve = serve_request(rate=o.rate, duration=o.duration, trace=trace, slo_ttft=o.slo_ttft, slo_tpot=o.slo_tpot,
                          disagg=o.disagg, replicas=o.replicas, max_seqs=o.max_seqs,
                          max_batched_tokens=o.max_batched_tokens, chunked_prefill=o.chunked_prefill, seed=o.seed,
                          engine_max_seqs=profile.max_batch(gpu),
                          engine_max_batched_tokens=profile.max_batched_tokens(gpu),
                          engine_chunked_prefill=profile.scheduler.chunked_prefill, lengths=o.lengths)
    spec, imported = resolve_model(model)
    if draft_tokens and acceptance is None:
        raise SpecError("speculative decoding needs the mean tokens a step yields per sequence (1 + expected accepted "
                        f"drafts, 1 to {1 + draft_tokens})", field="--acceptance")
    plan = InferencePlan(tp=tp, pp=pp, ep=ep, dp=dp, batch=batch, prompt_tokens=o.prompt, output_tokens=o.output,
                         weights=o.weights.strip().lower(), kv=o.kv.strip().lower(),
                         max_context=_max_context(model, imported),
                         draft_tokens=draft_tokens, acceptance_length=1.0 if acceptance is None else acceptance,
                         engine=engine.strip(), prefix_hit=o.prefix_hit, prefix_host=o.prefix_host,
                         prefix_network=o.prefix_network,
                         engine_max_seqs=o.max_seqs,
                         engine_max_batched_tokens=o.max_batched_tokens)
    if plan.draft_tokens and not spec.mtp_modules:
        raise SpecError(f"{spec.name} has no MTP module to draft with (speculative decoding drafts with the model's "
                        "own multi-token-prediction module, as deepseek-v3's; separate draft models are not "
                        "modelled): drop --draft-tokens, or use a model spec with mtp_modules >= 1",
                        field="--draft-tokens")
    if gpus is not None and gpus != plan.gpus:
        raise SpecError(f"{gpus} must equal tp*pp*dp = {tp}*{pp}*{dp} = {plan.gpus}", field="--gpus")
    cluster = Cluster(catalog.system(system), fabric=fabric, oversubscription=oversubscription, catalog=catalog)
    tier = kv_tier_of(o.kv_tier, o.kv_server, o.kv_servers, o.prefix_network, cluster,
                      plan.gpus * (serve.disagg[0] if serve.disagg else serve.replicas))
    if tier is not None:
        check_capacity(tier, spec, plan)
    pred = predict_inference(spec, cluster, plan, tier)
    if not pred.fits and pred.max_batch >= 1:  # the model fits, this batch's KV cache does not: a bad --batch
        gib = 2.0**30
        raise SpecError(f"{batch} sequences of {plan.context} tokens need {pred.memory.total_bytes / gib:,.1f} GiB "
                        f"per GPU, {pred.memory.usable_bytes / gib:,.1f} usable: at most {pred.max_batch} fit; lower "
                        "--batch, or add --tp/--pp, --kv fp8", field="--batch")
    pool = decode_pool(serve.disagg, tp=o.decode_tp, ep=o.decode_ep, dp=o.decode_dp, system=o.decode_system)
    decode = None
    if pool is not None:  # the decode pool's own plan and system
        from dataclasses import replace

        dp_d = pool.dp or plan.dp
        decode = (replace(plan, tp=pool.tp or plan.tp, ep=pool.ep or plan.ep, dp=dp_d, batch=dp_d),
                  Cluster(catalog.system(pool.system or system), fabric=fabric, oversubscription=oversubscription,
                          catalog=catalog))
        _check_decode_plan(spec, decode[0], decode[1], pool)
    served, tier_rate = _serve(spec, cluster, plan, serve, decode, tier, pred) if serve.active else (None, None)
    from fabricsim.inference import launch_json

    launch = launch_json(plan, gpu, checkpoint or served_checkpoint(model),
                         max_seqs=serve.max_seqs if serve.active else None,
                         max_batched_tokens=None if not serve.active or serve.budget_from_engine
                         else serve.max_batched_tokens,
                         chunked_prefill=serve.chunked_prefill if serve.active else None, disagg=serve.disagg,
                         decode=None if decode is None else (decode[0], decode[1].catalog.gpu(
                             decode[1].system.gpu)))
    from fabricsim.validation import band_fields, inference_bands, served_values, static_inference_values

    def banded(values: dict[str, tuple[float, bool, str]], served_run: bool) -> dict[str, BandResult]:
        return inference_bands(values, plan.engine_profile.label, gpu, spec.moe is not None, served_run,
                               plan.weights, calibration or [])

    found = banded(static_inference_values(pred.ttft_s, pred.tpot_s, pred.e2e_s, pred.output_tokens_per_s,
                                           pred.output_tokens_per_s_per_gpu), False)
    data: dict[str, Any] = {**pred.to_json(), **band_fields(found), "plan": plan.to_json(), "launch": launch,
                            **model_import_fields(imported)}
    if decode is not None:
        data["decode_pool"] = {"system": decode[1].system.id, "plan": decode[0].to_json()}
    if tier is not None:
        data["kv_tier"] = kv_tier_json(spec, cluster, plan, tier, pred, tier_rate)
    served_found: dict[str, BandResult] = {}
    if served is not None:
        served_found = banded(served_values(served.percentiles_json(), served.output_tokens_per_s), True)
        data |= {**_serving_json(served), **band_fields(served_found), "serving_options": serve.to_json()}
    return InferResult(inputs, data, prediction=pred, plan=plan, served=served, serve=serve, decode=decode,
                       bands=found, served_bands=served_found, model_name=spec.name)


def _check_decode_plan(spec: ModelSpec, plan: InferencePlan, cluster: Cluster, pool: DecodePool) -> None:
    """The decode pool's own plan checked on its own GPU, each error naming the --decode-* option that set what it
    objects to (the prefill pool's values where none was given)."""
    from fabricsim.errors import cli_field
    from fabricsim.inference import check_inference_plan

    given = [name for name, value in (("--decode-tp", pool.tp), ("--decode-ep", pool.ep), ("--decode-dp", pool.dp),
                                      ("--decode-system", pool.system)) if value is not None]
    sizes = [name for name in given if name != "--decode-system"] or given
    names = {"--tp": "--decode-tp" if pool.tp is not None else sizes[0],
             "--ep": "--decode-ep" if pool.ep is not None else sizes[0],
             "--dp": "--decode-dp" if pool.dp is not None else sizes[0]}
    names |= dict.fromkeys(("--weights", "--attention-weights", "--attention-out-weights"),
                           "--decode-system" if pool.system is not None else sizes[0])
    try:
        check_inference_plan(spec, plan, cluster.catalog.gpu(cluster.system.gpu))
    except SpecError as exc:
        renamed = cli_field(exc, names)
        raise SpecError(f"the decode pool (tp={plan.tp} ep={plan.ep} dp={plan.dp} on {cluster.system.id}): "
                        f"{renamed.message}", field=renamed.field) from None


def served_checkpoint(model: str) -> str:
    """What an engine's launch command serves for ``--model``: a Hugging Face config's folder (``hf:org/name`` as
    the hub id), else the name as given."""
    if model.startswith("hf:"):
        return model.removeprefix("hf:")
    path = Path(model)
    return str(path.parent) if path.suffix.lower() == ".json" and path.name == "config.json" else model


def _max_context(model: str, imported: HFImport | None) -> int | None:
    """The model's context window: a Hugging Face config's max_position_embeddings, or a preset's."""
    if imported is not None:
        return imported.max_context
    from fabricsim.model import preset

    try:
        return preset(model).max_context
    except SpecError:
        return None


def _serve(spec: ModelSpec, cluster: Cluster, plan: InferencePlan, serve: ServeRequest,
           decode: tuple[InferencePlan, Cluster] | None = None, tier: NetworkKvTier | None = None,
           pred: InferencePrediction | None = None) -> tuple[ServingResult, float | None]:
    """Serve the requests on the replicas the options describe, each priced by the inference model (a
    disaggregated decode pool on its own plan and system when ``decode`` gives them), and the bytes per second the
    networked KV tier's loads read (None without a tier)."""
    from fabricsim.inference import host_link_bytes_per_s, kv_bytes_per_token_gpu, step_cost, with_kv_handoff
    from fabricsim.serving import (
        ServingLayout,
        engine_scheduler_config,
        load_request_trace,
        poisson_requests,
        simulate_serving,
    )

    engine = plan.engine_profile
    if serve.trace is not None:
        requests = load_request_trace(serve.trace)
        if requests.cached_tokens is not None and not engine.scheduler.prefix_cache:
            raise SpecError(f"the trace gives cached_tokens, but {engine.name} {engine.version} does not cache "
                            "prefixes by default", field="--trace")
    else:
        assert serve.rate_per_s is not None
        requests = poisson_requests(serve.rate_per_s, serve.duration_s, seed=serve.seed,
                                    prompt=plan.prompt_tokens, output=plan.output_tokens, dataset=serve.lengths)
    if plan.prefix_hit:
        requests = requests.with_prefix_hit(plan.prefix_hit)
    if plan.prefix_host:  # the host tier's share, copied back over the GPU's host link before the request runs
        requests = requests.with_host_hit(plan.prefix_host,
                                          kv_bytes_per_token_gpu(spec, plan) / host_link_bytes_per_s(cluster))
    tier_rate = None
    if tier is not None:  # the networked tier's share, loaded over the fabric where the engine loads it
        requests, tier_rate = with_network_tier(requests, spec, cluster, plan, tier, pred)
    cost = step_cost(spec, cluster, plan)
    # the longest request must fit (drawn lengths run past the means; fixed ones are the plan's)
    longest = plan.context if serve.lengths is None else int((requests.prompt_tokens + requests.output_tokens).max())
    if cost.kv_capacity_tokens < longest:
        raise SpecError(f"the KV cache of one replica holds {cost.kv_capacity_tokens} tokens, fewer than one request "
                        f"of {longest}; add --tp/--pp or use --weights fp8 / --kv fp8", field="--rate")
    decode_cost = None
    decode_plan, decode_cluster = decode or (plan, cluster)  # the decode pool: its own plan and system, or these
    p, d = serve.disagg or (1, 0)
    same_node = (decode_cluster.system.id == cluster.system.id
                 and p * plan.gpus + d * decode_plan.gpus <= cluster.system.nvlink_domain_gpus)
    if decode is not None and serve.disagg is not None:
        decode_cost = step_cost(spec, decode_cluster, decode_plan)
        if decode_cost.kv_capacity_tokens < longest:
            raise SpecError(f"the KV cache of one decode replica holds {decode_cost.kv_capacity_tokens} tokens, "
                            f"fewer than one request of {longest}; raise --decode-tp or use --kv fp8",
                            field="--decode-tp")
        cost = with_kv_handoff(cost, spec, cluster, plan, decode_plan)
    layout = ServingLayout(replicas=serve.replicas, routing="shortest_queue" if serve.replicas > 1 else "round_robin",
                           disagg=serve.disagg, kv_same_node=same_node)
    scheduler = engine_scheduler_config(
        engine, cluster.catalog.gpu(cluster.system.gpu), max_seqs=serve.max_seqs,
        max_batched_tokens=None if serve.budget_from_engine else serve.max_batched_tokens,
        chunked_prefill=serve.chunked_prefill,
        longest_request_tokens=int((requests.prompt_tokens + requests.output_tokens).max(initial=1)))
    from fabricsim.api.progress import progress_bar

    bar = progress_bar("requests")  # on stderr, once the run passes 2 s
    try:
        return simulate_serving(cost, requests, scheduler=scheduler, layout=layout, slo_ttft_s=serve.slo_ttft_s,
                                slo_tpot_s=serve.slo_tpot_s, decode_cost=decode_cost,
                                progress=None if bar is None else lambda done, total: bar("serving", done, total)
                                ), tier_rate
    finally:
        if bar is not None:
            bar.close()


def _finite(value: float | None) -> float | None:
    """JSON has no NaN: a latency no request reached is null."""
    return None if value is None or not math.isfinite(value) else value


def _serving_json(r: ServingResult) -> dict[str, Any]:
    """The serving simulation's fields, SI units."""
    out: dict[str, Any] = dict(r.percentiles_json())
    out.update(requests_arrived=r.requests_arrived, requests_completed=r.requests_completed,
               requests_unfinished=r.requests_unfinished, served_output_tokens_per_s=r.output_tokens_per_s,
               goodput=_finite(r.goodput_rps), slo_attainment=_finite(r.slo_attainment), preemptions=r.preemptions,
               mean_batch_size=r.mean_batch_size, overloaded=r.overloaded, overload_reason=r.overload_reason)
    return out
