"""`fabricsim train`: one training step's time, throughput, memory and the layer that bounds it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fabricsim import units
from fabricsim.cli.goodput_options import (
    CheckpointInterval,
    CheckpointMode,
    GoodputOpt,
    MtbfScale,
    Restart,
    Spares,
    Storage,
    StorageBw,
    StorageNetwork,
    StorageServer,
    StorageServers,
    goodput_lines,
    storage_fallback_notes,
)
from fabricsim.cli.output import (
    REPORT_SUFFIXES,
    FormatOpt,
    JsonOpt,
    ReportOpt,
    api_arguments,
    command_inputs,
    console,
    emit,
    fabric_help,
    model_import_note,
    new_table,
    num_column,
    output_format,
    spec_errors,
    text_column,
    write_command_report,
)
from fabricsim.cli.topo_options import DragonflyRouting, Planes

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.api import Run
    from fabricsim.training import AutoChoice, ParallelPlan, TrainingPrediction
    from fabricsim.validation import BandResult


def render_training(pred: TrainingPrediction, title: str) -> Table:
    """The breakdown as a bar per layer, exposed and overlapped seconds."""
    from fabricsim.training import LAYERS

    table = new_table(title=title, header_style="bold")
    text_column(table, "layer")
    for header in ("exposed (s)", "overlapped (s)", "share of step"):
        num_column(table, header)
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
    from fabricsim.validation import shown_figure

    if found is None:
        return f"step time {units.format_duration(pred.step_time_s)}, {pred.tokens_per_s:,.0f} tokens/s"
    band = found["step_time_s"]
    tokens_per_s = pred.tokens_per_s * pred.step_time_s / shown_figure(pred.step_time_s, band.to_json())
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


# The plan and cluster options of `train`, shared with `whatif` (which takes the same run).
Model = Annotated[str, typer.Option("--model", help="preset name or model spec YAML/JSON file")]
SystemOpt = Annotated[str, typer.Option("--system", help="system preset")]
Gpus = Annotated[int | None, typer.Option("--gpus", help="total GPUs (= tp*pp*dp*cp)")]
Tp = Annotated[int, typer.Option("--tp", help="tensor-parallel size")]
Pp = Annotated[int, typer.Option("--pp", help="pipeline-parallel stages")]
Dp = Annotated[int | None, typer.Option("--dp", help="default: gpus / (tp*pp*cp)")]
Cp = Annotated[int, typer.Option("--cp", help="context-parallel size")]
Ep = Annotated[int, typer.Option("--ep", help="expert-parallel size (MoE)")]
GpusPerNode = Annotated[int | None, typer.Option(
    "--gpus-per-node", help="GPUs of each node (rack) the job uses (default all): 64 runs 128 GPUs on two GB200 "
    "NVL72 racks; the whole node is still priced")]
Etp = Annotated[int | None, typer.Option("--etp", help="expert tensor-parallel size (MoE; default tp): etp*ep "
                                         "divides tp*cp*dp, so EP may span TP ranks (MoE parallel folding)")]
Seq = Annotated[int, typer.Option("--seq", help="sequence length (tokens)")]
Gbs = Annotated[int, typer.Option("--gbs", help="global batch (sequences)")]
Mbs = Annotated[int | None, typer.Option("--mbs", help="micro-batch (sequences) (default: auto)")]
Vpp = Annotated[int | None, typer.Option("--vpp", help="virtual pipeline stages (interleaved 1F1B when > 1) "
                                                      "(default: auto)")]
Recompute = Annotated[str | None, typer.Option("--recompute", help="none, selective or full (default: auto)")]
Zero = Annotated[int | None, typer.Option("--zero", help="ZeRO stage 0-3 (1 = distributed optimizer, 3 = FSDP) "
                                                        "(default: auto)")]
Precision = Annotated[str, typer.Option("--precision", help="bf16, or fp8 (TransformerEngine FP8 GEMMs)")]
Kernels = Annotated[str, typer.Option("--kernels", help="element-wise kernels: fused (Megatron/TE) or eager")]
GradDtype = Annotated[str, typer.Option("--grad-dtype", help="gradient buffer and reduction: fp32 (Megatron "
                                        "default), bf16 (NeMo FP8 performance recipes) or fp16 "
                                        "(Megatron-LM --fp16)")]
PpLayout = Annotated[str | None, typer.Option("--pp-layout", help="layers per pipeline stage, e.g. 7,8,8,7 "
                                                                  "(default: automatic)")]
FlashAttn = Annotated[bool, typer.Option("--flash-attn/--no-flash-attn",
                                         help="fused attention (no materialised scores)")]
SequenceParallel = Annotated[bool | None, typer.Option("--sequence-parallel/--no-sequence-parallel",
                                                       help="Megatron sequence parallelism [default: on when tp > 1]")]
OverlapGradReduce = Annotated[bool, typer.Option("--overlap-grad-reduce/--no-overlap-grad-reduce",
                                                 help="reduce gradients during the backward pass")]
OverlapParamGather = Annotated[bool, typer.Option("--overlap-param-gather/--no-overlap-param-gather",
                                                  help="gather updated parameters during the next forward")]
MoEBalance = Annotated[str, typer.Option(
    "--moe-balance", help="expert load: forced (Megatron's force-balanced benchmarks), random (balanced top-k "
    "routing) or skewed (a trained router's measured skew)")]
MoEDispatcher = Annotated[str, typer.Option(
    "--moe-dispatcher", help="token dispatch: alltoall (NCCL, a copy per routed expert) or deepep (DeepEP/HybridEP: "
    "one copy per destination node over the network, fanned out over NVLink)")]
CapacityFactor = Annotated[float | None, typer.Option(
    "--capacity-factor", help="expert capacity as a multiple of the mean load; tokens beyond it are dropped "
    "(default: dropless)")]
Dropout = Annotated[bool, typer.Option(
    "--dropout/--no-dropout", help="hidden dropout (Megatron-LM's default; its 1-byte masks are kept for the "
    "backward); --no-dropout as today's Llama/DeepSeek/Qwen recipes run")]
EpCommOverlap = Annotated[bool, typer.Option(
    "--ep-comm-overlap/--no-ep-comm-overlap",
    help="overlap the MoE all-to-all of one micro-batch with another's compute (Megatron-Core "
    "--overlap-moe-expert-parallel-comm)")]
SharedExpertOverlap = Annotated[bool, typer.Option(
    "--shared-expert-overlap/--no-shared-expert-overlap",
    help="run the shared experts beside the same micro-batch's all-to-all (Megatron-Core "
    "--moe-shared-expert-overlap)")]
TpCommOverlap = Annotated[bool, typer.Option("--tp-comm-overlap/--no-tp-comm-overlap",
                                             help="overlap TP collectives with GEMMs (TransformerEngine userbuffers)")]
Fabric = Annotated[str | None, typer.Option("--ib", help=fabric_help)]
FabricKind = Annotated[str, typer.Option("--fabric", help="scale-out design: fat-tree, rail-only, dragonfly or "
                                         "slim-fly (built by --sim flow; the analytical model prices a "
                                         "rail-optimized fat tree, which rail-only and --planes match for NCCL's "
                                         "rail-local traffic, tapered to a dragonfly's or Slim Fly's bisection)")]
Oversubscription = Annotated[float, typer.Option("--oversubscription", help="fat-tree leaf ports : uplinks (>= 1)")]
Sim = Annotated[str, typer.Option("--sim", help="analytical, or flow: data- and expert-parallel collectives of every "
                                  "group at once on the built fat tree (flow simulation)")]
Routing = Annotated[str, typer.Option("--routing", help="with --sim flow: ecmp, adaptive or spray")]
Jobs = Annotated[Path | None, typer.Option("--jobs", help="with --sim flow: other jobs and background traffic "
                                           "(the `traffic --jobs` YAML), placed after this job's GPUs")]
ClusterNodes = Annotated[int | None, typer.Option("--cluster-nodes", help="with --sim flow: nodes of the whole "
                                                  "fabric (default: this job's)")]
AsJson = JsonOpt
Calibration = Annotated[list[str] | None, typer.Option("--calibration", help="calibration overlay YAML")]


def etp_text(plan: ParallelPlan) -> str:
    """`` etp=N`` when the experts' TP differs from the attention's, else nothing."""
    return f" etp={plan.expert_tp}" if plan.expert_tp != plan.tp else ""


def run_title(run: Run) -> str:
    """The table title: model, GPUs and nodes, and every knob of the plan."""
    plan, pred = run.plan, run.prediction
    return (f"{run.spec.name} on {plan.world_size} GPUs ({pred.nodes} x {run.system}): tp={plan.tp} pp={plan.pp} "
            f"dp={plan.dp} cp={plan.cp} ep={plan.ep}{etp_text(plan)}, seq {plan.seq}, gbs {plan.gbs}, mbs {plan.mbs}, "
            f"vpp {plan.virtual_stages}, recompute {plan.recompute}, zero {plan.zero}, {plan.precision}")


def choice_line(choice: AutoChoice) -> str:
    """The search's line for the table output: what it chose, or that nothing fits."""
    colour = "cyan" if choice.fits else "yellow"
    return f"[{colour}]{choice.note()}[/]"


@spec_errors
def train_command(
    model: Model = "llama3-70b",
    system: SystemOpt = "dgx-h100",
    gpus: Gpus = None,
    tp: Tp = 1,
    pp: Pp = 1,
    dp: Dp = None,
    cp: Cp = 1,
    ep: Ep = 1,
    etp: Etp = None,
    gpus_per_node: GpusPerNode = None,
    seq: Seq = 4096,
    gbs: Gbs = 512,
    mbs: Mbs = None,
    vpp: Vpp = None,
    recompute: Recompute = None,
    zero: Zero = None,
    precision: Precision = "bf16",
    kernels: Kernels = "fused",
    grad_dtype: GradDtype = "fp32",
    pp_layout: PpLayout = None,
    flash_attn: FlashAttn = True,
    sequence_parallel: SequenceParallel = None,
    overlap_grad_reduce: OverlapGradReduce = True,
    overlap_param_gather: OverlapParamGather = True,
    tp_comm_overlap: TpCommOverlap = False,
    ep_comm_overlap: EpCommOverlap = False,
    shared_expert_overlap: SharedExpertOverlap = False,
    dropout: Dropout = True,
    moe_balance: MoEBalance = "random",
    capacity_factor: CapacityFactor = None,
    moe_dispatcher: MoEDispatcher = "alltoall",
    ib: Fabric = None,
    oversubscription: Oversubscription = 1.0,
    fabric_kind: FabricKind = "fat-tree",
    planes: Planes = 1,
    dragonfly_routing: DragonflyRouting = "minimal",
    fmt: FormatOpt = None,
    as_json: AsJson = False,
    plot: Annotated[Path | None, typer.Option("--plot", help="write the breakdown as a bar chart PNG")] = None,
    calibration: Calibration = None,
    sim: Sim = "analytical",
    routing: Routing = "ecmp",
    jobs: Jobs = None,
    cluster_nodes: ClusterNodes = None,
    storage: Storage = "superpod-better",
    storage_bw: StorageBw = None,
    storage_network: StorageNetwork = None,
    storage_server: StorageServer = None,
    storage_servers: StorageServers = None,
    spares: Spares = None,
    checkpoint_mode: CheckpointMode = "sync",
    checkpoint_interval: CheckpointInterval = None,
    mtbf_scale: MtbfScale = 1.0,
    restart: Restart = None,
    goodput: GoodputOpt = True,
    report: ReportOpt = None,
) -> None:
    """Predict one training step: time, tokens/s, MFU, memory per GPU and the bounding layer; knobs left unset
    (--vpp, --mbs, --recompute, --zero) are chosen as the fastest setting that fits."""
    inputs = command_inputs(locals())
    form = output_format(fmt, as_json)
    from fabricsim.api import train
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    report = check_output_path(report, "--report", REPORT_SUFFIXES)
    result = train(**api_arguments(train, inputs))
    run, pred = result.run, result.prediction
    assert run is not None
    if plot is not None:
        from fabricsim.report import plot_breakdown

        plot_breakdown(pred, f"{run.spec.name}: {run.plan.world_size} GPUs ({pred.nodes} x {system})", plot)
    write_command_report(report, result, inputs)
    model_import_note(result)
    storage_fallback_notes(result.data)
    if emit(form, result.data, inputs, result.rows):
        return
    console.print(render_training(pred, run_title(run)))
    console.print(choice_line(run.choice))
    good = [] if result.goodput is None else goodput_lines(result.goodput)
    for line in summary_lines(pred, result.bands) + good:
        console.print(line)
