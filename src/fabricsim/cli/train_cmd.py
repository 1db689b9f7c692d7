"""`fabricsim train`: one training step's time, throughput, memory and the layer that bounds it."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fabricsim import units
from fabricsim.cli.goodput_options import (
    CheckpointInterval,
    CheckpointMode,
    MtbfScale,
    Restart,
    Spares,
    Storage,
    StorageBw,
    StorageNetwork,
    StorageServer,
    StorageServers,
    goodput_json,
    goodput_lines,
    goodput_spec,
    run_goodput,
)
from fabricsim.cli.output import (
    FormatOpt,
    JsonOpt,
    command_inputs,
    console,
    emit,
    fabric_help,
    new_table,
    num_column,
    output_format,
    spec_errors,
    text_column,
)
from fabricsim.cli.topo_options import DragonflyRouting, Planes
from fabricsim.errors import SpecError, cli_field

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.comm import Cluster
    from fabricsim.model import ModelSpec
    from fabricsim.traffic import BackgroundSpec, JobSpec
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
    causal attention as run) as HFU against the same peak."""
    return [f"MFU {pred.mfu:.1%}: {pred.model_tflops_per_gpu:.1f} model TFLOP/s per GPU of the "
            f"{pred.peak_precision.upper()} dense peak {pred.peak_tflops_per_gpu:.1f} TFLOP/s",
            f"HFU {pred.hfu:.1%}: {pred.tflops_per_gpu:.1f} TFLOP/s per GPU executed (recompute counted, causal "
            "attention as run)"]


def training_bands(run: Run, calibration: list[str] | None) -> dict[str, BandResult]:
    """The error bands of a run's step time and rates, from comparable published training runs."""
    return prediction_bands(run.spec, run.cluster, run.prediction, calibration)


def prediction_bands(spec: ModelSpec, cluster: Cluster, pred: TrainingPrediction, calibration: list[str] | None
                     ) -> dict[str, BandResult]:
    """The error bands of one training prediction's step time, tokens/s and model FLOP/s."""
    from fabricsim.validation import bands, training_regime

    gpu = cluster.catalog.gpu(cluster.system.gpu)
    regime = training_regime(spec.moe is not None, gpu, pred.peak_precision, pred.gpus)
    return bands({"step_time_s": (pred.step_time_s, True), "tokens_per_s": (pred.tokens_per_s, False),
                  "model_flops_per_s_per_gpu": (pred.model_tflops_per_gpu * 1e12, False)}, regime,
                 calibration or [])


def step_line(pred: TrainingPrediction, found: dict[str, BandResult] | None = None) -> str:
    """'step time 9.68 s (8.9-10.6 s, 80% band from n comparable published cases), 1,234 tokens/s'."""
    text = f"step time {units.format_duration(pred.step_time_s)}"
    if found is not None:
        text += " " + found["step_time_s"].text(units.format_duration)
    return text + f", {pred.tokens_per_s:,.0f} tokens/s"


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


@dataclass(frozen=True)
class Run:
    """A resolved `train` invocation: the model, the plan (auto knobs chosen), the cluster and the prediction."""

    spec: ModelSpec
    choice: AutoChoice
    cluster: Cluster
    system: str
    fabric: str | None
    oversubscription: float

    @property
    def plan(self) -> ParallelPlan:
        return self.choice.plan

    @property
    def prediction(self) -> TrainingPrediction:
        return self.choice.prediction


def prepare_run(*, model: str, system: str, gpus: int | None, tp: int, pp: int, dp: int | None, cp: int, ep: int,
                seq: int, gbs: int, mbs: int | None, vpp: int | None, recompute: str | None, zero: int | None,
                precision: str, kernels: str, pp_layout: str | None, flash_attn: bool,
                sequence_parallel: bool | None, overlap_grad_reduce: bool, overlap_param_gather: bool,
                tp_comm_overlap: bool, fabric: str | None, oversubscription: float,
                ep_comm_overlap: bool = False, shared_expert_overlap: bool = False, dropout: bool = True,
                moe_balance: str = "random",
                capacity_factor: float | None = None, moe_dispatcher: str = "alltoall",
                calibration: list[str] | None, sim: str = "analytical", routing: str = "ecmp",
                jobs: Path | None = None, cluster_nodes: int | None = None, grad_dtype: str = "fp32",
                etp: int | None = None, gpus_per_node: int | None = None, fabric_kind: str = "fat-tree",
                planes: int = 1, dragonfly_routing: str = "minimal") -> Run:
    """Load the model and catalog, build the cluster, choose the unset knobs and predict the step."""
    from fabricsim.catalog import load_catalog, partial_system_id, partly_used
    from fabricsim.comm import DIRECT_FABRICS, Cluster
    from fabricsim.inputs import oversubscription as checked_oversubscription
    from fabricsim.model import load_model
    from fabricsim.training import parse_layout, search_knobs

    oversubscription = checked_oversubscription(oversubscription)
    catalog = load_catalog(*(calibration or []))
    if gpus_per_node is not None:  # checked here so the error names the option
        partly_used(catalog.system(system), gpus_per_node, field="--gpus-per-node")
    system = partial_system_id(system, gpus_per_node)
    spec = load_model(model)
    fields: dict[str, Any] = {"gpus": gpus, "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "etp": etp,
                              "seq": seq,
                              "gbs": gbs, "mbs": mbs, "virtual_stages": vpp, "recompute": recompute, "zero": zero,
                              "precision": precision, "kernels": kernels, "pp_layout": parse_layout(pp_layout),
                              "grad_dtype": grad_dtype,
                              "flash_attention": flash_attn, "sequence_parallel": sequence_parallel,
                              "overlap_grad_reduce": overlap_grad_reduce, "overlap_param_gather": overlap_param_gather,
                              "tp_comm_overlap": tp_comm_overlap, "ep_comm_overlap": ep_comm_overlap,
                              "shared_expert_overlap": shared_expert_overlap,
                              "dropout": dropout, "moe_balance": moe_balance, "capacity_factor": capacity_factor,
                              "moe_dispatcher": moe_dispatcher}
    other_jobs: list[JobSpec] = []
    background: list[BackgroundSpec] = []
    storage = 0
    if jobs is not None:
        from fabricsim.traffic import load_jobs

        other_jobs, background, storage = load_jobs(jobs)
    world = gpus if gpus is not None else (tp * pp * cp * dp if dp is not None else None)
    kind = fabric_kind.strip().lower()
    sysm = catalog.system(system)
    if cluster_nodes is None and sim != "flow" and kind in DIRECT_FABRICS and world is not None:
        cluster_nodes = -(-world // sysm.gpus_per_node)  # the analytical taper is the whole network's
    cluster = Cluster(sysm, fabric=fabric, oversubscription=oversubscription, catalog=catalog,
                      sim=sim, routing=routing, other_jobs=tuple(other_jobs), background=tuple(background),
                      fabric_kind=kind, planes=planes, dragonfly_routing=dragonfly_routing,
                      storage_nodes=storage, fabric_nodes=cluster_nodes)
    if world is not None:  # refused as `topo` refuses it, before the search
        _check_cluster(cluster, world, "--gpus" if gpus is not None else "--dp")
    try:
        choice = search_knobs(spec, fields, cluster)
    except SpecError as exc:  # name the option the user gave, not the plan's field
        raise cli_field(exc, PLAN_OPTIONS) from None
    _check_cluster(cluster, choice.plan.world_size, "--gpus")
    return Run(spec, choice, cluster, cluster.system.id, fabric, oversubscription)


# ParallelPlan fields whose option has another name
PLAN_OPTIONS = {"virtual_stages": "vpp", "pp_layout": "pp-layout", "flash_attention": "flash-attn",
                "sequence_parallel": "sequence-parallel", "overlap_grad_reduce": "overlap-grad-reduce",
                "overlap_param_gather": "overlap-param-gather", "tp_comm_overlap": "tp-comm-overlap",
                "ep_comm_overlap": "ep-comm-overlap", "shared_expert_overlap": "shared-expert-overlap",
                "grad_dtype": "grad-dtype",
                "moe_balance": "moe-balance", "capacity_factor": "capacity-factor",
                "moe_dispatcher": "moe-dispatcher"}


def _check_cluster(cluster: Cluster, gpus: int, field: str) -> None:
    """A job of ``gpus`` GPUs (and the --cluster-nodes fabric) must fit a fat tree some catalog switch builds."""
    from math import ceil

    from fabricsim.collectives import resolve_fabric_link
    from fabricsim.topology import check_buildable

    if gpus < 1:
        return
    nodes = ceil(gpus / cluster.system.gpus_per_node)
    link = resolve_fabric_link(cluster.catalog, cluster.system, cluster.fabric).id
    check_buildable(cluster.system.id, nodes, link, cluster.oversubscription, cluster.catalog, field=field)
    if cluster.fabric_nodes is not None:
        if cluster.fabric_nodes < 1:
            raise SpecError(f"must be at least 1, got {cluster.fabric_nodes}", field="--cluster-nodes")
        _check_cluster_nodes(cluster.fabric_nodes, nodes, gpus)
        check_buildable(cluster.system.id, cluster.fabric_nodes, link, cluster.oversubscription, cluster.catalog,
                        field="--cluster-nodes")


def _check_cluster_nodes(cluster_nodes: int, job_nodes: int, gpus: int) -> None:
    """--cluster-nodes is the whole fabric the job shares: it must hold at least the job's own nodes."""
    if cluster_nodes < job_nodes:
        raise SpecError(f"{cluster_nodes} nodes cannot hold the job's {gpus} GPUs ({job_nodes} nodes); give at "
                        f"least {job_nodes}", field="--cluster-nodes")


def plan_json(plan: ParallelPlan) -> dict[str, Any]:
    """The plan a prediction ran, knobs under their CLI names."""
    return {"tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "ep": plan.ep, "etp": plan.expert_tp,
            "seq": plan.seq,
            "gbs": plan.gbs, "mbs": plan.mbs, "vpp": plan.virtual_stages, "recompute": plan.recompute,
            "zero": plan.zero, "precision": plan.precision, "grad_dtype": plan.grad_dtype, "dropout": plan.dropout,
            "ep_comm_overlap": plan.ep_comm_overlap, "shared_expert_overlap": plan.shared_expert_overlap}


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


def _flow_bar(sim: str) -> AbstractContextManager[None]:
    """A progress bar on stderr for a flow-simulated step (once it passes 2 s); nothing for the analytical model."""
    if sim != "flow":
        return nullcontext()
    from fabricsim.cli.output import progress_bar
    from fabricsim.network import flow_progress

    return flow_progress(progress_bar())


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
    fabric: Fabric = None,
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
    storage_network: StorageNetwork = "separate",
    storage_server: StorageServer = None,
    storage_servers: StorageServers = None,
    spares: Spares = None,
    checkpoint_mode: CheckpointMode = "sync",
    checkpoint_interval: CheckpointInterval = None,
    mtbf_scale: MtbfScale = 1.0,
    restart: Restart = None,
) -> None:
    """Predict one training step: time, tokens/s, MFU, memory per GPU and the bounding layer; knobs left unset
    (--vpp, --mbs, --recompute, --zero) are chosen as the fastest setting that fits."""
    inputs = command_inputs(locals())
    form = output_format(fmt, as_json)
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    options = goodput_spec(storage, storage_bw, checkpoint_mode, checkpoint_interval, mtbf_scale, restart,
                           network=storage_network, server=storage_server, servers=storage_servers, spares=spares)
    with _flow_bar(sim):
        run = prepare_run(model=model, system=system, gpus=gpus, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, seq=seq,
                          gbs=gbs, mbs=mbs, vpp=vpp, recompute=recompute, zero=zero, precision=precision,
                          kernels=kernels, pp_layout=pp_layout, flash_attn=flash_attn,
                          sequence_parallel=sequence_parallel, overlap_grad_reduce=overlap_grad_reduce,
                          overlap_param_gather=overlap_param_gather, tp_comm_overlap=tp_comm_overlap,
                          ep_comm_overlap=ep_comm_overlap, shared_expert_overlap=shared_expert_overlap,
                          dropout=dropout, moe_balance=moe_balance, capacity_factor=capacity_factor,
                          moe_dispatcher=moe_dispatcher, fabric=fabric,
                          oversubscription=oversubscription, calibration=calibration, sim=sim, routing=routing,
                          jobs=jobs, cluster_nodes=cluster_nodes, grad_dtype=grad_dtype, etp=etp,
                          gpus_per_node=gpus_per_node, fabric_kind=fabric_kind, planes=planes,
                          dragonfly_routing=dragonfly_routing)
    pred = run.prediction
    if plot is not None:
        from fabricsim.report import plot_breakdown

        plot_breakdown(pred, f"{run.spec.name}: {run.plan.world_size} GPUs ({pred.nodes} x {system})", plot)
    from fabricsim.validation import band_fields

    found = training_bands(run, calibration)
    good = run_goodput(run.spec, run.cluster, pred, options)
    data = {**pred.to_json(), **band_fields(found), "plan": plan_json(run.plan), "chosen": run.choice.to_json(),
            "goodput": goodput_json(good)}
    rows = [{"layer": k, "exposed_s": pred.breakdown.exposed[k], "overlapped_s": pred.breakdown.overlapped[k]}
            for k in pred.breakdown.exposed]
    if emit(form, data, inputs, rows):
        return
    console.print(render_training(pred, run_title(run)))
    console.print(choice_line(run.choice))
    for line in summary_lines(pred, found) + goodput_lines(good):
        console.print(line)
