"""`fabricsim infer`: time to first token, time per output token, throughput, memory and the bounding layer of a
static batch served on one parallel group."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import fabricsim.cli.options as opts
import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.cli.launch_view import launch_lines
from fabricsim.cli.serve_options import DECODE, KV_TIER, PREFIX, SERVE
from fabricsim.cli.spec_options import ENGINE_OPTIONS, LAUNCH_OPTIONS, SERVING_PLAN_OPTIONS

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.api import ServeRequest
    from fabricsim.inference import InferencePlan, InferencePrediction
    from fabricsim.serving import ServingResult
    from fabricsim.validation import Band, BandResult


def render_inference(pred: InferencePrediction, title: str) -> Table:
    """Prefill and one decode step per layer kind, and the whole batch's share."""
    from fabricsim.inference import LAYERS

    table = ui.new_table(title)
    ui.text_column(table, "layer")
    for header in ("prefill (s)", "decode step (s)", "whole batch (s)", "share"):
        ui.num_column(table, header)
    ui.text_column(table, "")
    total = sum(pred.breakdown_s.values())
    for kind in LAYERS:
        whole = pred.breakdown_s[kind]
        if whole == 0:
            continue
        share = whole / total
        bar = "█" * round(share * (16 if ui.narrow() else 40))
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
    per_user = 1.0 / banded_value(found, "tpot_s", pred.tpot_s)
    per_gpu = banded_value(found, "output_tokens_per_s_per_gpu", pred.output_tokens_per_s_per_gpu)
    return [
        *spec,
        f"TTFT {banded(found, 'ttft_s', pred.ttft_s)}",
        f"TPOT {banded(found, 'tpot_s', pred.tpot_s)}",
        f"end to end {banded(found, 'e2e_s', pred.e2e_s)}",
        f"output tokens/s {banded(found, 'output_tokens_per_s', pred.output_tokens_per_s, _rate)}; "
        f"{per_gpu:,.1f} per GPU, {per_user:,.1f} tokens/s per user",
        fit,
        f"max batch at {plan.context:,} tokens of context: {pred.max_batch:,}; max context at batch {plan.batch}: "
        f"{context_text(pred)}",
        f"bottleneck: [bold]{pred.bottleneck}[/]",
        *(f"[yellow]warning: {w}[/]" for w in pred.warnings if w != pred.memory.summary()),  # memory: `fit` above
    ]


def context_text(pred: InferencePrediction) -> str:
    """'131,072 (model window; memory holds 1,476,954)', or '40,967 (memory; model window 131,072)'."""
    window = pred.context_window
    if window is None:
        return f"{pred.max_context:,} (memory; model window not known)"
    if pred.context_limit == "window":
        return f"{pred.max_context:,} (model window; memory holds {pred.max_context_memory:,})"
    return f"{pred.max_context:,} (memory; model window {window:,})"


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def _as_band(b: BandResult | None) -> Band | None:
    """``b`` where it is a band (not a reason for none)."""
    from fabricsim.validation import Band

    return b if isinstance(b, Band) else None


def banded_value(found: dict[str, BandResult] | None, key: str, raw: float) -> float:
    """The figure to plan with: the model's own where its band holds it (or there is none), else the band's centre
    (the model's figure with its median error on the comparable published cases taken out)."""
    b = (found or {}).get(key)
    return raw if b is None else b.shown(raw)


def banded(found: dict[str, BandResult] | None, key: str, raw: float,
           show: Callable[[float], str] = units.format_duration) -> str:
    """A figure and its band (`Band.figure`: the printed figure always inside the printed band); without a band the
    model's figure and why there is none."""
    found_one = (found or {}).get(key)
    return show(raw) if found_one is None else found_one.figure(raw, show)


def band_legend(*founds: dict[str, BandResult] | None) -> list[str]:
    """One line saying what a banded figure is, where any figure has a band."""
    if not any(_as_band(b) for found in founds for b in (found or {}).values()):
        return []
    return ["[dim]a figure outside its band is printed as the band's centre: the model's raw figure with its median "
            "error on the comparable published cases taken out (JSON: <key>_band.estimate; the table above is raw)[/]"]


def _served(found: dict[str, BandResult] | None, prefix: str, stats: Any) -> str:
    """'p50 a, p90 b, p99 c' of one served latency and the p50's band: each the model's figure where its band holds
    it, else the band's centre (and then the model's raw percentiles named); why there is no band otherwise."""
    keys = [(p, f"{prefix}_p{p[1:]}", getattr(stats, p + "_s")) for p in ("p50", "p90", "p99")]
    p50 = (found or {}).get(f"{prefix}_p50")

    def show(value: float) -> str:
        return units.format_duration(value) if math.isfinite(value) else "-"

    band = _as_band(p50)
    if band is None:
        text = ", ".join(f"{p} {show(raw)}" for p, _, raw in keys)
        return text if p50 is None else f"{text}; p50 {p50.text(units.format_duration)}"
    text = ", ".join(f"{p} {show(banded_value(found, key, raw) if math.isfinite(raw) else raw)}"
                     for p, key, raw in keys)
    if all(banded_value(found, key, raw) == raw for _, key, raw in keys if math.isfinite(raw)):
        return (f"{text} (p50 {show(band.low)}-{show(band.high)}, {band.level:.0%} band from {band.cases} "
                "comparable published cases)")
    return (f"{text} (p50 {show(band.low)}-{show(band.high)}, {band.level:.0%} band from {band.cases} comparable "
            f"published cases; model's raw figures {', '.join(show(raw) for _, _, raw in keys)}, its bias there "
            f"{band.bias:+.0%})")


INFER_PLAN = SERVING_PLAN_OPTIONS
INFER = (INFER_PLAN, opts.PRINT, opts.BREAKDOWN_PLOT, opts.CALIBRATION, SERVE, ENGINE_OPTIONS, PREFIX, KV_TIER, DECODE,
         LAUNCH_OPTIONS, opts.REPORT)


@opts.declared(*INFER)
@ui.spec_errors
def infer_command(**options: Any) -> None:
    """Predict serving one static batch: TTFT, TPOT, throughput, memory per GPU and the bounding layer; with
    --rate (or --trace), also serve requests on continuous-batching replicas: latency percentiles, goodput."""
    inputs, form, plot, report = opts.run_options(INFER, options)
    from fabricsim.api import infer

    o = options
    result = infer(**ui.api_arguments(infer, inputs))
    pred, plan, served, serve, decode = result.prediction, result.plan, result.served, result.serve, result.decode
    assert pred is not None and plan is not None and serve is not None
    if plot is not None:
        from fabricsim.report import plot_bars

        plot_bars(pred.breakdown_s, f"{result.model_name}: {plan.gpus} GPUs on {o['system']}", "seconds (whole batch)",
                  plot)
    ui.write_command_report(report, result, inputs)
    ui.model_import_note(result)
    found, served_found, launch = result.bands, result.served_bands, result.data["launch"]
    if ui.emit(form, result.data, inputs):
        return
    title = (f"{result.model_name} on {plan.gpus} x {o['system']} GPUs: tp={o['tp']} pp={o['pp']} ep={o['ep']} "
             f"dp={o['dp']}, batch {o['batch']}, prompt {o['prompt']}, output {o['output']}, weights {plan.weights}, "
             f"KV {plan.kv}, engine "
             f"{plan.engine_profile.label}")
    ui.console.print(render_inference(pred, title))
    for line in summary_lines(pred, plan, found):
        ui.console.print(line)
    for line in kv_tier_lines(result.data.get("kv_tier")):
        ui.console.print(line)
    if served is not None:
        for line in serving_lines(served, serve, "" if decode is None else (
                f" (decode: tp={decode[0].tp} ep={decode[0].ep} dp={decode[0].dp} on {decode[1].system.id})"),
                served_found):
            ui.console.print(line)
    for line in band_legend(found, served_found):
        ui.console.print(line)
    for line in launch_lines(launch):
        ui.console.print(line, soft_wrap=True)


def kv_tier_lines(tier: dict[str, Any] | None) -> list[str]:
    """The networked KV tier in a few lines (``infer --kv-tier network``): servers and capacity, a request's load,
    TTFT with and without the tier, the fabric bandwidth its loads take at the offered rate."""
    if tier is None:
        return []
    f = units.format_bytes
    held = "" if tier["prefixes_held"] is None else f", {tier['prefixes_held']:,} prefixes of this share"
    lines = [f"[bold]KV tier[/] network: {tier['servers']} x {tier['server']}, {f(tier['capacity_bytes'])} "
             f"({tier['capacity_tokens']:,} tokens of this model's KV{held}), "
             f"{units.format_rate(tier['read_bytes_per_s'])} read shared by {tier['gpus_served']} GPUs, "
             f"first byte {units.format_duration(tier['latency_s'])}"]
    if tier["tokens_per_request"]:
        lines.append(f"KV tier load: {tier['tokens_per_request']:,} tokens a request, "
                     f"{f(tier['load_bytes_per_request'])} ({f(tier['load_bytes_per_request_per_gpu'])} a GPU) at "
                     f"{units.format_rate(tier['load_bytes_per_s_per_gpu'])} a GPU; the batch's load "
                     f"{units.format_duration(tier['load_s'])}; TTFT {units.format_duration(tier['ttft_s'])} "
                     f"({tier['chosen']}), recomputing {units.format_duration(tier['ttft_without_tier_s'])}")
    if tier["fabric_bytes_per_s"] is not None:
        share = tier["fabric_bytes_per_s_per_gpu"] / tier["gpu_fabric_bytes_per_s"]
        lines.append(f"KV tier traffic at the offered rate: {units.format_rate(tier['fabric_bytes_per_s'])} over "
                     f"the fabric, {units.format_rate(tier['fabric_bytes_per_s_per_gpu'])} a GPU ({share:.1%} of its "
                     "scale-out link)")
    lines += [f"[yellow]note[/]: {note}" for note in tier["notes"]]
    return lines


def serving_lines(r: ServingResult, serve: ServeRequest, decode: str = "",
                  found: dict[str, BandResult] | None = None) -> list[str]:
    """The serving simulation in a few lines: percentiles, throughput, goodput, overload (``decode``: the
    disaggregated decode pool's own plan, in words)."""
    where = (f"{serve.disagg[0]} prefill + {serve.disagg[1]} decode replicas{decode}" if serve.disagg
             else f"{serve.replicas} replica{'s' if serve.replicas > 1 else ''}")
    source = f"trace {serve.trace}" if serve.trace is not None else f"Poisson {serve.rate_per_s:g} requests/s"
    lines = [f"[bold]serving[/] ({source} on {where}): {r.requests_completed:,} of {r.requests_arrived:,} requests "
             f"completed, {r.output_tokens_per_s:,.0f} output tokens/s, {r.preemptions:,} preemptions, mean batch "
             f"{r.mean_batch_size:.1f}",
             f"TTFT {_served(found, 'ttft_s', r.ttft)}", f"TPOT {_served(found, 'tpot_s', r.tpot)}",
             f"end to end {_served(found, 'e2e_s', r.e2e)}"]
    if r.goodput_rps is not None and r.slo_attainment is not None:
        lines.append(f"goodput {r.goodput_rps:.2f} requests/s ({r.slo_attainment:.1%} of requests meet the SLOs)")
    if r.overloaded:
        lines.append(f"[bold red]overloaded[/]: {r.overload_reason}; add --replicas, --tp, or lower --rate")
    return lines
