"""`fabricsim train`: one training step's time, throughput, memory and the layer that bounds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from fabricsim import units
from fabricsim.catalog import load_catalog
from fabricsim.cli.output import console, print_json, spec_errors
from fabricsim.workload import load_model
from fabricsim.workload.runspec import build_plan, parse_layout
from fabricsim.workload.training import LAYERS, Cluster, TrainingPrediction, predict_training


def render_training(pred: TrainingPrediction, title: str) -> Table:
    """The breakdown as a bar per layer, exposed and overlapped seconds."""
    table = Table(title=title, header_style="bold")
    for header in ("layer", "exposed (s)", "overlapped (s)", "share of step", ""):
        table.add_column(header)
    step = pred.step_time_s
    for kind in LAYERS:
        exposed, hidden = pred.breakdown.exposed[kind], pred.breakdown.overlapped[kind]
        if exposed == 0 and hidden == 0:
            continue
        share = exposed / step
        bar = "█" * round(share * 40)
        style = "bold red" if kind == pred.bottleneck else ""
        table.add_row(kind, f"{exposed:.4g}", f"{hidden:.4g}", f"{share:6.1%}", f"[{style}]{bar}[/]" if style else bar)
    return table


def summary_lines(pred: TrainingPrediction) -> list[str]:
    return [
        f"step time {units.format_duration(pred.step_time_s)}, {pred.tokens_per_s:,.0f} tokens/s, "
        f"{pred.tflops_per_gpu:.1f} TFLOP/s per GPU, MFU {pred.mfu:.1%}",
        f"memory: {pred.memory.summary()}",
        f"bottleneck: [bold]{pred.bottleneck}[/]",
        *[f"[yellow]warning:[/] {w}" for w in pred.warnings],
    ]


@spec_errors
def train_command(
    model: str = typer.Option("llama3-70b", "--model", help="preset name or model spec YAML/JSON file"),
    system: str = typer.Option("dgx-h100", "--system", help="system preset"),
    gpus: int | None = typer.Option(None, "--gpus", help="total GPUs (= tp*pp*dp*cp)"),
    tp: int = typer.Option(1, "--tp"),
    pp: int = typer.Option(1, "--pp"),
    dp: int | None = typer.Option(None, "--dp", help="default: gpus / (tp*pp*cp)"),
    cp: int = typer.Option(1, "--cp"),
    ep: int = typer.Option(1, "--ep"),
    seq: int = typer.Option(4096, "--seq", help="sequence length (tokens)"),
    gbs: int = typer.Option(512, "--gbs", help="global batch (sequences)"),
    mbs: int | None = typer.Option(None, "--mbs", help="micro-batch (sequences); default 1"),
    vpp: int = typer.Option(1, "--vpp", help="virtual pipeline stages (interleaved 1F1B when > 1)"),
    recompute: str = typer.Option("none", "--recompute", help="none, selective or full"),
    zero: int = typer.Option(1, "--zero", help="ZeRO stage 0-3 (1 = distributed optimizer, 3 = FSDP)"),
    precision: str = typer.Option("bf16", "--precision", help="bf16, or fp8 (TransformerEngine FP8 GEMMs)"),
    kernels: str = typer.Option("fused", "--kernels", help="element-wise kernels: fused (Megatron/TE) or eager"),
    pp_layout: str | None = typer.Option(None, "--pp-layout",
                                         help="layers per pipeline stage, e.g. 7,8,8,7 (default: automatic)"),
    flash_attn: bool = typer.Option(True, "--flash-attn/--no-flash-attn",
                                    help="fused attention (no materialised scores)"),
    sequence_parallel: bool | None = typer.Option(None, "--sequence-parallel/--no-sequence-parallel",
                                                  help="Megatron sequence parallelism [default: on when tp > 1]"),
    overlap_grad_reduce: bool = typer.Option(True, "--overlap-grad-reduce/--no-overlap-grad-reduce",
                                             help="reduce gradients during the backward pass"),
    overlap_param_gather: bool = typer.Option(True, "--overlap-param-gather/--no-overlap-param-gather",
                                              help="gather updated parameters during the next forward"),
    tp_comm_overlap: bool = typer.Option(False, "--tp-comm-overlap/--no-tp-comm-overlap",
                                         help="overlap TP collectives with GEMMs (TransformerEngine userbuffers)"),
    fabric: str | None = typer.Option(None, "--ib", help="network (ndr, hdr, xdr, eth-400g...)"),
    oversubscription: float = typer.Option(1.0, "--oversubscription"),
    as_json: bool = typer.Option(False, "--json"),
    plot: Path | None = typer.Option(None, "--plot", help="write the breakdown as a bar chart PNG"),
    calibration: list[str] = typer.Option([], "--calibration", help="calibration overlay YAML"),
) -> None:
    """Predict one training step: time, tokens/s, MFU, memory per GPU and the bounding layer."""
    catalog = load_catalog(*calibration)
    spec = load_model(model)
    fields: dict[str, Any] = {"gpus": gpus, "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "seq": seq,
                              "gbs": gbs, "mbs": mbs, "virtual_stages": vpp, "recompute": recompute, "zero": zero,
                              "precision": precision, "kernels": kernels, "pp_layout": parse_layout(pp_layout),
                              "flash_attention": flash_attn, "sequence_parallel": sequence_parallel,
                              "overlap_grad_reduce": overlap_grad_reduce, "overlap_param_gather": overlap_param_gather,
                              "tp_comm_overlap": tp_comm_overlap}
    plan = build_plan(fields)
    cluster = Cluster(catalog.system(system), fabric=fabric, oversubscription=oversubscription, catalog=catalog)
    pred = predict_training(spec, plan, cluster)
    if plot is not None:
        from fabricsim.report.plots import plot_breakdown

        plot_breakdown(pred, f"{spec.name}: {plan.world_size} x {system}", plot)
    if as_json:
        print_json(pred.to_json())
        return
    title = (f"{spec.name} on {plan.world_size} GPUs ({pred.nodes} x {system}): tp={plan.tp} pp={plan.pp} "
             f"dp={plan.dp} cp={plan.cp} ep={plan.ep}, seq {plan.seq}, gbs {plan.gbs}, mbs {plan.mbs}, "
             f"{plan.precision}")
    console.print(render_training(pred, title))
    for line in summary_lines(pred):
        console.print(line)
