"""`fabricsim infer`: time to first token, time per output token, throughput, memory and the bounding layer of a
static batch served on one parallel group."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fabricsim import units
from fabricsim.catalog import load_catalog
from fabricsim.cli.output import console, print_json, spec_errors
from fabricsim.cli.train_cmd import AsJson, Calibration, Ep, Fabric, Model, Oversubscription, Pp, SystemOpt, Tp
from fabricsim.errors import SpecError
from fabricsim.workload import load_model
from fabricsim.workload.inference import LAYERS, InferencePlan, InferencePrediction, predict_inference
from fabricsim.workload.presets import preset
from fabricsim.workload.training import Cluster

Gpus = Annotated[int | None, typer.Option("--gpus", help="GPUs of the group (= tp*pp*dp); checked when given")]
Dp = Annotated[int, typer.Option("--dp", help="attention data parallelism within the group (MoE: experts span it)")]
Batch = Annotated[int, typer.Option("--batch", help="sequences in the static batch")]
Prompt = Annotated[int, typer.Option("--prompt", help="prompt tokens per sequence")]
Output = Annotated[int, typer.Option("--output", help="output tokens per sequence")]
Weights = Annotated[str, typer.Option("--weights", help="weight format: bf16, fp8, int4 (W4A16) or fp4 (NVFP4)")]
Kv = Annotated[str, typer.Option("--kv", help="KV-cache format: bf16 or fp8")]
Plot = Annotated[Path | None, typer.Option("--plot", help="write the breakdown as a bar chart PNG")]


def render_inference(pred: InferencePrediction, title: str) -> Table:
    """Prefill and one decode step per layer kind, and the whole batch's share."""
    table = Table(title=title, header_style="bold")
    for header in ("layer", "prefill (s)", "decode step (s)", "whole batch (s)", "share", ""):
        table.add_column(header)
    total = sum(pred.breakdown_s.values())
    for kind in LAYERS:
        whole = pred.breakdown_s[kind]
        if whole == 0:
            continue
        share = whole / total
        bar = "█" * round(share * 40)
        style = "bold red" if kind == pred.bottleneck else ""
        table.add_row(kind, f"{pred.prefill_s[kind]:.4g}", f"{pred.decode_step_s[kind]:.4g}", f"{whole:.4g}",
                      f"{share:6.1%}", f"[{style}]{bar}[/]" if style else bar)
    return table


def summary_lines(pred: InferencePrediction, plan: InferencePlan) -> list[str]:
    fit = (f"[green]fits[/]: {pred.memory.summary()}" if pred.fits else
           f"[bold red]{pred.memory.summary()}[/]; try more --tp or --pp, --weights fp8 (or int4), --kv fp8, "
           "or a smaller --batch")
    return [
        f"TTFT {units.format_duration(pred.ttft_s)}, TPOT {units.format_duration(pred.tpot_s)}, end to end "
        f"{units.format_duration(pred.e2e_s)}",
        f"{pred.output_tokens_per_s:,.0f} output tokens/s ({pred.output_tokens_per_s_per_gpu:,.1f} per GPU), "
        f"{1.0 / pred.tpot_s:,.1f} tokens/s per user",
        fit,
        f"max batch at {plan.context} tokens of context: {pred.max_batch}; max context at batch {plan.batch}: "
        f"{pred.max_context}",
        f"bottleneck: [bold]{pred.bottleneck}[/]",
    ]


def _max_context(model: str) -> int | None:
    """The preset's context window, when the model is a preset that states one."""
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
    fabric: Fabric = None,
    oversubscription: Oversubscription = 1.0,
    as_json: AsJson = False,
    plot: Plot = None,
    calibration: Calibration = None,
) -> None:
    """Predict serving one static batch: TTFT, TPOT, throughput, memory per GPU and the bounding layer."""
    catalog = load_catalog(*(calibration or []))
    spec = load_model(model)
    plan = InferencePlan(tp=tp, pp=pp, ep=ep, dp=dp, batch=batch, prompt_tokens=prompt, output_tokens=output,
                         weights=weights.strip().lower(), kv=kv.strip().lower(), max_context=_max_context(model))
    if gpus is not None and gpus != plan.gpus:
        raise SpecError(f"{gpus} must equal tp*pp*dp = {tp}*{pp}*{dp} = {plan.gpus}", field="--gpus")
    cluster = Cluster(catalog.system(system), fabric=fabric, oversubscription=oversubscription, catalog=catalog)
    pred = predict_inference(spec, cluster, plan)
    if plot is not None:
        from fabricsim.report.plots import plot_bars

        plot_bars(pred.breakdown_s, f"{spec.name}: {plan.gpus} x {system}", "seconds (whole batch)", plot)
    if as_json:
        inputs = {"model": model, "system": system, "fabric": fabric, "oversubscription": oversubscription,
                  **plan.to_json()}
        print_json({**pred.to_json(), "inputs": inputs})
        return
    title = (f"{spec.name} on {plan.gpus} x {system} GPUs: tp={tp} pp={pp} ep={ep} dp={dp}, batch {batch}, prompt "
             f"{prompt}, output {output}, weights {plan.weights}, KV {plan.kv}")
    console.print(render_inference(pred, title))
    for line in summary_lines(pred, plan):
        console.print(line)
