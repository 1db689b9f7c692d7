"""`fabricsim infer`: time to first token, time per output token, throughput, memory and the bounding layer of a
static batch served on one parallel group."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fabricsim import units
from fabricsim.cli.launch_view import Checkpoint, launch_lines
from fabricsim.cli.output import (
    FormatOpt,
    command_inputs,
    console,
    emit,
    narrow,
    new_table,
    num_column,
    output_format,
    spec_errors,
    text_column,
)
from fabricsim.cli.serve_options import (
    ChunkedPrefill,
    DecodeDp,
    DecodeEp,
    DecodeSystem,
    DecodeTp,
    Disagg,
    Duration,
    MaxBatchedTokens,
    MaxSeqs,
    PrefixHit,
    PrefixHost,
    Rate,
    Replicas,
    Seed,
    ServeRequest,
    SloTpot,
    SloTtft,
    Trace,
    decode_pool,
    serve_request,
)
from fabricsim.cli.train_cmd import AsJson, Calibration, Ep, Fabric, Model, Oversubscription, Pp, SystemOpt, Tp
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.comm import Cluster
    from fabricsim.inference import InferencePlan, InferencePrediction
    from fabricsim.model import ModelSpec
    from fabricsim.serving import ServingResult
    from fabricsim.validation import BandResult

Gpus = Annotated[int | None, typer.Option("--gpus", help="GPUs of the group (= tp*pp*dp); checked when given")]
Dp = Annotated[int, typer.Option("--dp", help="attention data parallelism within the group (MoE: experts span it)")]
Batch = Annotated[int, typer.Option("--batch", help="sequences in the static batch")]
Prompt = Annotated[int, typer.Option("--prompt", help="prompt tokens per sequence")]
Output = Annotated[int, typer.Option("--output", help="output tokens per sequence")]
Weights = Annotated[str, typer.Option("--weights", help="weight format: bf16, fp8, int4 (W4A16) or fp4 (NVFP4)")]
Kv = Annotated[str, typer.Option("--kv", help="KV-cache format: bf16 or fp8")]
Plot = Annotated[Path | None, typer.Option("--plot", help="write the breakdown as a bar chart PNG")]
DraftTokens = Annotated[int, typer.Option("--draft-tokens", help="speculative decoding: draft tokens per sequence and "
                                          "step from the model's MTP module (one layer + shared head); 0: none")]
EngineOpt = Annotated[str, typer.Option("--engine", help="serving engine as NAME[@VERSION]: trtllm, vllm or sglang "
                                        "(e.g. vllm@0.6.3): the KV-cache memory, batch, prefill chunk and host time "
                                        "per step of that release")]
Acceptance = Annotated[float | None, typer.Option("--acceptance", help="speculative decoding: mean tokens a step "
                                                  "yields per sequence, 1 + expected accepted drafts (1 to 1 + "
                                                  "--draft-tokens); required with --draft-tokens")]


def render_inference(pred: InferencePrediction, title: str) -> Table:
    """Prefill and one decode step per layer kind, and the whole batch's share."""
    from fabricsim.inference import LAYERS

    table = new_table(title)
    text_column(table, "layer")
    for header in ("prefill (s)", "decode step (s)", "whole batch (s)", "share"):
        num_column(table, header)
    text_column(table, "")
    total = sum(pred.breakdown_s.values())
    for kind in LAYERS:
        whole = pred.breakdown_s[kind]
        if whole == 0:
            continue
        share = whole / total
        bar = "█" * round(share * (16 if narrow() else 40))
        style = "bold red" if kind == pred.bottleneck else ""
        table.add_row(kind, f"{pred.prefill_s[kind]:.4g}", f"{pred.decode_step_s[kind]:.4g}", f"{whole:.4g}",
                      f"{share:6.1%}", f"[{style}]{bar}[/]" if style else bar)
    return table


def summary_lines(pred: InferencePrediction, plan: InferencePlan,
                  found: dict[str, BandResult] | None = None) -> list[str]:
    fit = (f"[green]fits[/]: {pred.memory.summary()}" if pred.fits else
           f"[bold red]{pred.memory.summary()}[/]; try more --tp or --pp, --weights fp8 (or int4), --kv fp8, "
           "or a smaller --batch")
    spec = ([f"speculative decoding: {plan.draft_tokens} draft tokens, {plan.acceptance_length:g} tokens a step; "
             f"decode step {units.format_duration(sum(pred.decode_step_s.values()))} (drafts "
             f"{units.format_duration(sum(pred.draft_step_s.values()))})"] if plan.draft_tokens else [])
    return [
        *spec,
        f"TTFT {units.format_duration(pred.ttft_s)}{_band(found, 'ttft_s')}, TPOT "
        f"{units.format_duration(pred.tpot_s)}{_band(found, 'tpot_s')}, end to end {units.format_duration(pred.e2e_s)}",
        f"{pred.output_tokens_per_s:,.0f} output tokens/s ({pred.output_tokens_per_s_per_gpu:,.1f} per GPU), "
        f"{1.0 / pred.tpot_s:,.1f} tokens/s per user",
        fit,
        f"max batch at {plan.context} tokens of context: {pred.max_batch}; max context at batch {plan.batch}: "
        f"{pred.max_context}",
        f"bottleneck: [bold]{pred.bottleneck}[/]",
    ]


def _band(found: dict[str, BandResult] | None, key: str) -> str:
    """' (low-high, 80% band from n comparable published cases)' for a duration, or '' without bands."""
    return "" if not found or key not in found else " " + found[key].text(units.format_duration)


def _p50_band(found: dict[str, BandResult] | None, key: str) -> str:
    """'; p50 (low-high, 80% band ...)' for a served percentile, or ''."""
    text = _band(found, key)
    return f"; p50{text}" if text else ""


def _max_context(model: str) -> int | None:
    """The preset's context window, when the model is a preset that states one."""
    from fabricsim.model import preset

    try:
        return preset(model).max_context
    except SpecError:
        return None


@spec_errors
def infer_command(
    model: Model = "llama3-70b",
    system: SystemOpt = "dgx-h100",
    gpus: Gpus = None,
    tp: Tp = 1,
    pp: Pp = 1,
    ep: Ep = 1,
    dp: Dp = 1,
    batch: Batch = 1,
    prompt: Prompt = 2048,
    output: Output = 256,
    weights: Weights = "bf16",
    kv: Kv = "bf16",
    draft_tokens: DraftTokens = 0,
    acceptance: Acceptance = None,
    fabric: Fabric = None,
    oversubscription: Oversubscription = 1.0,
    fmt: FormatOpt = None,
    as_json: AsJson = False,
    plot: Plot = None,
    calibration: Calibration = None,
    rate: Rate = None,
    duration: Duration = None,
    trace: Trace = None,
    slo_ttft: SloTtft = None,
    slo_tpot: SloTpot = None,
    disagg: Disagg = None,
    replicas: Replicas = None,
    max_seqs: MaxSeqs = None,
    max_batched_tokens: MaxBatchedTokens = None,
    chunked_prefill: ChunkedPrefill = None,
    seed: Seed = None,
    engine: EngineOpt = "trtllm",
    prefix_hit: PrefixHit = 0.0,
    prefix_host: PrefixHost = 0.0,
    decode_tp: DecodeTp = None,
    decode_ep: DecodeEp = None,
    decode_dp: DecodeDp = None,
    decode_system: DecodeSystem = None,
    checkpoint: Checkpoint = None,
) -> None:
    """Predict serving one static batch: TTFT, TPOT, throughput, memory per GPU and the bounding layer; with
    --rate (or --trace), also serve requests on continuous-batching replicas: latency percentiles, goodput."""
    inputs = command_inputs(locals())
    form = output_format(fmt, as_json)
    from fabricsim.catalog import load_catalog
    from fabricsim.comm import Cluster
    from fabricsim.inference import InferencePlan, predict_inference
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path
    from fabricsim.inputs import oversubscription as checked_oversubscription
    from fabricsim.model import load_model

    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    oversubscription = checked_oversubscription(oversubscription)
    from fabricsim.inference import engine_profile

    profile = engine_profile(engine)  # an unknown engine is a one-line error naming the known ones
    catalog = load_catalog(*(calibration or []))
    gpu = catalog.gpu(catalog.system(system).gpu)
    serve = serve_request(rate=rate, duration=duration, trace=trace, slo_ttft=slo_ttft, slo_tpot=slo_tpot,
                          disagg=disagg, replicas=replicas, max_seqs=max_seqs,
                          max_batched_tokens=max_batched_tokens, chunked_prefill=chunked_prefill, seed=seed,
                          engine_max_seqs=profile.max_batch(gpu),
                          engine_max_batched_tokens=profile.max_batched_tokens(gpu),
                          engine_chunked_prefill=profile.scheduler.chunked_prefill)
    spec = load_model(model)
    if draft_tokens and acceptance is None:
        raise SpecError("speculative decoding needs the mean tokens a step yields per sequence (1 + expected accepted "
                        f"drafts, 1 to {1 + draft_tokens})", field="--acceptance")
    plan = InferencePlan(tp=tp, pp=pp, ep=ep, dp=dp, batch=batch, prompt_tokens=prompt, output_tokens=output,
                         weights=weights.strip().lower(), kv=kv.strip().lower(), max_context=_max_context(model),
                         draft_tokens=draft_tokens, acceptance_length=1.0 if acceptance is None else acceptance,
                         engine=engine.strip(), prefix_hit=prefix_hit, prefix_host=prefix_host,
                         engine_max_seqs=max_seqs,
                         engine_max_batched_tokens=max_batched_tokens)
    if plan.draft_tokens and not spec.mtp_modules:
        raise SpecError(f"{spec.name} has no MTP module to draft with (speculative decoding drafts with the model's "
                        "own multi-token-prediction module, as deepseek-v3's; separate draft models are not "
                        "modelled): drop --draft-tokens, or use a model spec with mtp_modules >= 1",
                        field="--draft-tokens")
    if gpus is not None and gpus != plan.gpus:
        raise SpecError(f"{gpus} must equal tp*pp*dp = {tp}*{pp}*{dp} = {plan.gpus}", field="--gpus")
    cluster = Cluster(catalog.system(system), fabric=fabric, oversubscription=oversubscription, catalog=catalog)
    pred = predict_inference(spec, cluster, plan)
    if not pred.fits and pred.max_batch >= 1:  # the model fits, this batch's KV cache does not: a bad --batch
        gib = 2.0**30
        raise SpecError(f"{batch} sequences of {plan.context} tokens need {pred.memory.total_bytes / gib:,.1f} GiB "
                        f"per GPU, {pred.memory.usable_bytes / gib:,.1f} usable: at most {pred.max_batch} fit; lower "
                        "--batch, or add --tp/--pp, --kv fp8", field="--batch")
    pool = decode_pool(serve.disagg, tp=decode_tp, ep=decode_ep, dp=decode_dp, system=decode_system)
    decode = None
    if pool is not None:  # the decode pool's own plan and system
        from dataclasses import replace

        dp_d = pool.dp or plan.dp
        decode = (replace(plan, tp=pool.tp or plan.tp, ep=pool.ep or plan.ep, dp=dp_d, batch=dp_d),
                  Cluster(catalog.system(pool.system or system), fabric=fabric, oversubscription=oversubscription,
                          catalog=catalog))
    served = _serve(spec, cluster, plan, serve, decode) if serve.active else None
    if plot is not None:
        from fabricsim.report import plot_bars

        plot_bars(pred.breakdown_s, f"{spec.name}: {plan.gpus} GPUs on {system}", "seconds (whole batch)", plot)
    from fabricsim.inference import launch_json

    launch = launch_json(plan, gpu, checkpoint or model,
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
    data: dict[str, Any] = {**pred.to_json(), **band_fields(found), "plan": plan.to_json(), "launch": launch}
    if decode is not None:
        data["decode_pool"] = {"system": decode[1].system.id, "plan": decode[0].to_json()}
    served_found: dict[str, BandResult] = {}
    if served is not None:
        served_found = banded(served_values(served.percentiles_json(), served.output_tokens_per_s), True)
        data |= {**_serving_json(served), **band_fields(served_found), "serving_options": serve.to_json()}
    if emit(form, data, inputs):
        return
    title = (f"{spec.name} on {plan.gpus} x {system} GPUs: tp={tp} pp={pp} ep={ep} dp={dp}, batch {batch}, prompt "
             f"{prompt}, output {output}, weights {plan.weights}, KV {plan.kv}, engine {plan.engine_profile.label}")
    console.print(render_inference(pred, title))
    for line in summary_lines(pred, plan, found):
        console.print(line)
    if served is not None:
        for line in serving_lines(served, serve, "" if decode is None else (
                f" (decode: tp={decode[0].tp} ep={decode[0].ep} dp={decode[0].dp} on {decode[1].system.id})"),
                served_found):
            console.print(line)
    for line in launch_lines(launch):
        console.print(line, soft_wrap=True)


def _serve(spec: ModelSpec, cluster: Cluster, plan: InferencePlan, serve: ServeRequest,
           decode: tuple[InferencePlan, Cluster] | None = None) -> ServingResult:
    """Serve the requests on the replicas the options describe, each priced by the inference model (a
    disaggregated decode pool on its own plan and system when ``decode`` gives them)."""
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
                                    prompt=plan.prompt_tokens, output=plan.output_tokens)
    if plan.prefix_hit:
        requests = requests.with_prefix_hit(plan.prefix_hit)
    if plan.prefix_host:  # the host tier's share, copied back over the GPU's host link before the request runs
        requests = requests.with_host_hit(plan.prefix_host,
                                          kv_bytes_per_token_gpu(spec, plan) / host_link_bytes_per_s(cluster))
    cost = step_cost(spec, cluster, plan)
    if cost.kv_capacity_tokens < plan.context:
        raise SpecError(f"the KV cache of one replica holds {cost.kv_capacity_tokens} tokens, fewer than one request "
                        f"of {plan.context}; add --tp/--pp or use --weights fp8 / --kv fp8", field="--rate")
    decode_cost = None
    decode_plan, decode_cluster = decode or (plan, cluster)  # the decode pool: its own plan and system, or these
    p, d = serve.disagg or (1, 0)
    same_node = (decode_cluster.system.id == cluster.system.id
                 and p * plan.gpus + d * decode_plan.gpus <= cluster.system.nvlink_domain_gpus)
    if decode is not None and serve.disagg is not None:
        decode_cost = step_cost(spec, decode_cluster, decode_plan)
        if decode_cost.kv_capacity_tokens < plan.context:
            raise SpecError(f"the KV cache of one decode replica holds {decode_cost.kv_capacity_tokens} tokens, "
                            f"fewer than one request of {plan.context}; raise --decode-tp or use --kv fp8",
                            field="--decode-tp")
        cost = with_kv_handoff(cost, spec, cluster, plan, decode_plan)
    layout = ServingLayout(replicas=serve.replicas, routing="shortest_queue" if serve.replicas > 1 else "round_robin",
                           disagg=serve.disagg, kv_same_node=same_node)
    scheduler = engine_scheduler_config(
        engine, cluster.catalog.gpu(cluster.system.gpu), max_seqs=serve.max_seqs,
        max_batched_tokens=None if serve.budget_from_engine else serve.max_batched_tokens,
        chunked_prefill=serve.chunked_prefill,
        longest_request_tokens=int((requests.prompt_tokens + requests.output_tokens).max(initial=1)))
    from fabricsim.cli.output import progress_bar

    bar = progress_bar("requests")  # on stderr, once the run passes 2 s
    try:
        return simulate_serving(cost, requests, scheduler=scheduler, layout=layout, slo_ttft_s=serve.slo_ttft_s,
                                slo_tpot_s=serve.slo_tpot_s, decode_cost=decode_cost,
                                progress=None if bar is None else lambda done, total: bar("serving", done, total))
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


def serving_lines(r: ServingResult, serve: ServeRequest, decode: str = "",
                  found: dict[str, BandResult] | None = None) -> list[str]:
    """The serving simulation in a few lines: percentiles, throughput, goodput, overload (``decode``: the
    disaggregated decode pool's own plan, in words)."""
    def pcts(stats: Any) -> str:
        return ", ".join(f"{p} {units.format_duration(getattr(stats, p + '_s'))}"
                         if math.isfinite(getattr(stats, p + "_s")) else f"{p} -" for p in ("p50", "p90", "p99"))

    where = (f"{serve.disagg[0]} prefill + {serve.disagg[1]} decode replicas{decode}" if serve.disagg
             else f"{serve.replicas} replica{'s' if serve.replicas > 1 else ''}")
    source = f"trace {serve.trace}" if serve.trace is not None else f"Poisson {serve.rate_per_s:g} requests/s"
    lines = [f"[bold]serving[/] ({source} on {where}): {r.requests_completed:,} of {r.requests_arrived:,} requests "
             f"completed, {r.output_tokens_per_s:,.0f} output tokens/s, {r.preemptions:,} preemptions, mean batch "
             f"{r.mean_batch_size:.1f}",
             f"TTFT {pcts(r.ttft)}{_p50_band(found, 'ttft_s_p50')}",
             f"TPOT {pcts(r.tpot)}{_p50_band(found, 'tpot_s_p50')}", f"end to end {pcts(r.e2e)}"]
    if r.goodput_rps is not None and r.slo_attainment is not None:
        lines.append(f"goodput {r.goodput_rps:.2f} requests/s ({r.slo_attainment:.1%} of requests meet the SLOs)")
    if r.overloaded:
        lines.append(f"[bold red]overloaded[/]: {r.overload_reason}; add --replicas, --tp, or lower --rate")
    return lines
