"""`fabricsim train`: one training step's time, throughput, memory and the layer that bounds it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.cli.goodput_options import goodput_lines, storage_fallback_notes
from fabricsim.cli.launch_view import launch_lines
from fabricsim.cli.options import TRAIN, declared, run_options

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.api import Run
    from fabricsim.training import AutoChoice, ParallelPlan, TrainingPrediction
    from fabricsim.validation import BandResult


def render_training(pred: TrainingPrediction, title: str) -> Table:
    """The breakdown as a bar per layer, exposed and overlapped seconds."""
    from fabricsim.training import LAYERS

    table = ui.new_table(title=title, header_style="bold")
    ui.text_column(table, "layer")
    for header in ("exposed (s)", "overlapped (s)", "share of step"):
        ui.num_column(table, header)
    table.add_column("", overflow="crop", no_wrap=True, ratio=1)
    step = pred.step_time_s
    for kind in LAYERS:
        exposed, hidden = pred.breakdown.exposed[kind], pred.breakdown.overlapped[kind]
        if exposed == 0 and hidden == 0:
            continue
        share = exposed / step
        bar = "█" * round(share * 30)
        style = "bold red" if kind == pred.bottleneck else ""
        table.add_row(kind, f"{exposed:.4g}", f"{hidden:.4g}", f"{share:6.1%}", f"[{style}]{bar}[/]" if style else bar)
    return table


def mfu_lines(pred: TrainingPrediction) -> list[str]:
    """MFU with its numerator and the peak it is measured against, named; the executed FLOP/s (recompute counted,
    causal attention as run) as HFU against the same peak; an HFU below MFU says why (MFU counts attention unmasked,
    the kernels skip the masked half, and recompute did not add back as much)."""
    below = "; below MFU: MFU counts attention unmasked, the kernels run half of it" if pred.hfu < pred.mfu else ""
    return [f"MFU {pred.mfu:.1%}: {pred.model_tflops_per_gpu:.1f} model TFLOP/s per GPU of the "
            f"{pred.peak_precision.upper()} dense peak {pred.peak_tflops_per_gpu:.1f} TFLOP/s",
            f"HFU {pred.hfu:.1%}: {pred.tflops_per_gpu:.1f} TFLOP/s per GPU executed (recompute counted, causal "
            f"attention as run{below})"]


def step_line(pred: TrainingPrediction, found: dict[str, BandResult] | None = None) -> str:
    """'step time 9.68 s (8.9-10.6 s, 80% band from n comparable published cases), 1,234 tokens/s'."""
    if found is None:
        return f"step time {units.format_duration(pred.step_time_s)}, {pred.tokens_per_s:,.0f} tokens/s"
    band = found["step_time_s"]
    tokens_per_s = pred.tokens_per_s * pred.step_time_s / band.shown(pred.step_time_s)
    return f"step time {band.figure(pred.step_time_s, units.format_duration)}, {tokens_per_s:,.0f} tokens/s"


def summary_lines(pred: TrainingPrediction, found: dict[str, BandResult] | None = None) -> list[str]:
    """Step time (with its band) and throughput, memory, bottleneck and warnings: the lines under the table."""
    return [
        step_line(pred, found),
        *mfu_lines(pred),
        f"memory: {pred.memory.summary()}",
        f"bottleneck: [bold]{pred.bottleneck}[/]",
        *[f"[yellow]warning:[/] {w}" for w in pred.warnings],
    ]




def etp_text(plan: ParallelPlan) -> str:
    """`` etp=N`` when the experts' TP differs from the attention's, else nothing."""
    return f" etp={plan.expert_tp}" if plan.expert_tp != plan.tp else ""


def run_title(run: Run) -> str:
    """The table title: model, GPUs and nodes, and every knob of the plan."""
    plan, pred = run.plan, run.prediction
    return (f"{run.spec.name} on {plan.world_size} GPUs ({pred.nodes} x {run.system}): tp={plan.tp} pp={plan.pp} "
            f"dp={plan.dp} cp={plan.cp} ep={plan.ep}{etp_text(plan)}, seq {plan.seq}, gbs {plan.gbs}, mbs {plan.mbs}, "
            f"vpp {plan.virtual_stages}, recompute {plan.recompute}, zero {plan.zero}, {plan.precision}"
            + ("" if run.framework is None or run.framework.id == "megatron" else f", {run.framework.id}"))


def choice_line(choice: AutoChoice) -> str:
    """The search's line for the table output: what it chose, or that nothing fits."""
    colour = "cyan" if choice.fits else "yellow"
    return f"[{colour}]{choice.note()}[/]"


@declared(*TRAIN)
@ui.spec_errors
def train_command(**options: Any) -> None:
    """Predict one training step: time, tokens/s, MFU, memory per GPU and the bounding layer; knobs left unset
    (--vpp, --mbs, --recompute, --zero) are chosen as the fastest setting that fits."""
    inputs, form, plot, report = run_options(TRAIN, options)
    from fabricsim.api import train

    result = train(**ui.api_arguments(train, inputs))
    run, pred = result.run, result.prediction
    assert run is not None
    if plot is not None:
        from fabricsim.report import plot_breakdown

        plot_breakdown(pred, f"{run.spec.name}: {run.plan.world_size} GPUs ({pred.nodes} x {options['system']})", plot)
    ui.write_command_report(report, result, inputs)
    ui.model_import_note(result)
    storage_fallback_notes(result.data)
    if ui.emit(form, result.data, inputs, result.rows):
        return
    ui.console.print(render_training(pred, run_title(run)))
    ui.console.print(choice_line(run.choice))
    good = [] if result.goodput is None else goodput_lines(result.goodput)
    for line in summary_lines(pred, result.bands) + good + launch_lines(result.data["launch"]):
        ui.console.print(line)
    qos = result.data.get("qos")
    if qos is not None:
        ui.console.print(f"QoS: step {units.format_duration(qos['on_step_time_s'])} with each traffic class in its "
                         f"own queue (this job: {qos['own_class']}), {units.format_duration(qos['off_step_time_s'])} "
                         "with every class in one (--no-qos)")
    if result.data.get("degraded"):
        ui.console.print(f"degraded: {', '.join(result.data['degraded'])}")
