"""`fabricsim.train`: one training step's time, throughput, memory and bounding layer, with its error bands and
goodput; the engine of `fabricsim train` (and of `whatif`, which takes the same run)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fabricsim.api.coerce import api_call, fabric_alias
from fabricsim.api.goodput import goodput_given, goodput_json, goodput_spec, guarded_goodput, run_goodput
from fabricsim.api.result import Result, model_import_fields
from fabricsim.api.topology import check_design
from fabricsim.errors import SpecError, cli_field

if TYPE_CHECKING:
    from fabricsim.comm import Cluster
    from fabricsim.model import HFImport, ModelSpec
    from fabricsim.traffic import BackgroundSpec, JobSpec
    from fabricsim.training import AutoChoice, Goodput, ParallelPlan, TrainingPrediction
    from fabricsim.validation import BandResult


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




@dataclass(frozen=True)
class Run:
    """A resolved `train` invocation: the model, the plan (auto knobs chosen), the cluster and the prediction."""

    spec: ModelSpec
    choice: AutoChoice
    cluster: Cluster
    system: str
    fabric: str | None
    oversubscription: float
    imported: HFImport | None = None  # the Hugging Face import behind --model (None: a preset or spec file)

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
    from fabricsim.catalog import load_catalog, network_link_id, partial_system_id, partly_used
    from fabricsim.comm import DIRECT_FABRICS, Cluster
    from fabricsim.inputs import oversubscription as checked_oversubscription
    from fabricsim.model import resolve_model
    from fabricsim.training import parse_layout, search_knobs

    oversubscription = checked_oversubscription(oversubscription)
    catalog = load_catalog(*(calibration or []))
    catalog.system(system, field="--system")  # the name checked at the edge: an error names the option typed
    if fabric is not None:  # resolved once here: every layer below gets the catalog's link id
        fabric = network_link_id(catalog, fabric, field="--ib")
    if gpus_per_node is not None:  # checked here so the error names the option
        named = partial_system_id(system, gpus_per_node)  # an id with /N that disagrees is refused first
        partly_used(catalog.system(system), gpus_per_node, field="--gpus-per-node")
        system = named
    spec, imported = resolve_model(model)
    check_moe_options(spec, {"moe_balance": moe_balance, "moe_dispatcher": moe_dispatcher,
                             "capacity_factor": capacity_factor, "ep_comm_overlap": ep_comm_overlap,
                             "shared_expert_overlap": shared_expert_overlap})
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
    nodes_field = "--gpus" if cluster_nodes is None else "--cluster-nodes"  # what sets the dragonfly's size
    if cluster_nodes is None and sim != "flow" and kind in DIRECT_FABRICS and world is not None:
        cluster_nodes = -(-world // sysm.gpus_per_node)  # the analytical taper is the whole network's
    cluster = Cluster(sysm, fabric=fabric, oversubscription=oversubscription, catalog=catalog,
                      sim=sim, routing=routing, other_jobs=tuple(other_jobs), background=tuple(background),
                      fabric_kind=kind, planes=planes, dragonfly_routing=dragonfly_routing,
                      storage_nodes=storage, fabric_nodes=cluster_nodes)
    check_design(kind, planes, dragonfly_routing, sim=sim)
    _check_planes(cluster)
    if world is not None:  # refused as `topo` refuses it, before the search
        _check_cluster(cluster, world, "--gpus" if gpus is not None else "--dp")
        _check_dragonfly(cluster, world, nodes_field)
    try:
        choice = search_knobs(spec, fields, cluster)
    except SpecError as exc:  # name the option the user gave, not the plan's field
        raise cli_field(exc, PLAN_OPTIONS) from None
    _check_cluster(cluster, choice.plan.world_size, "--gpus")
    _check_dragonfly(cluster, choice.plan.world_size, nodes_field)
    return Run(spec, choice, cluster, cluster.system.id, fabric, oversubscription, imported)


# ParallelPlan fields whose option has another name
PLAN_OPTIONS = {"virtual_stages": "vpp", "pp_layout": "pp-layout", "flash_attention": "flash-attn",
                "sequence_parallel": "sequence-parallel", "overlap_grad_reduce": "overlap-grad-reduce",
                "overlap_param_gather": "overlap-param-gather", "tp_comm_overlap": "tp-comm-overlap",
                "ep_comm_overlap": "ep-comm-overlap", "shared_expert_overlap": "shared-expert-overlap",
                "grad_dtype": "grad-dtype",
                "moe_balance": "moe-balance", "capacity_factor": "capacity-factor",
                "moe_dispatcher": "moe-dispatcher"}


def check_moe_options(spec: ModelSpec, given: dict[str, Any]) -> None:
    """MoE options set other than their default on a dense model (and --shared-expert-overlap on a model without
    shared experts) are refused, not ignored: the step has no expert layer for them to act on."""
    from fabricsim.training import ParallelPlan

    if spec.moe is None:
        moved = [f"--{PLAN_OPTIONS[k]}" for k, v in given.items() if v != ParallelPlan.model_fields[k].default]
        if moved:
            raise SpecError(f"{'applies' if len(moved) == 1 else 'apply'} to mixture-of-experts models; "
                            f"{spec.name} is dense (leave {'it' if len(moved) == 1 else 'them'} out)",
                            field=", ".join(moved))
    elif given.get("shared_expert_overlap") and not spec.moe.shared_experts:
        raise SpecError(f"applies to MoE models with shared experts; {spec.name} has none (leave it out)",
                        field="--shared-expert-overlap")


def _check_planes(cluster: Cluster) -> None:
    """--planes refused as `topo` refuses it (the switch's ports must split into that many planes, a fat tree's),
    by building one node of the multi-plane fabric: the analytical model prices it as one fat tree."""
    if cluster.planes == 1:
        return
    from fabricsim.collectives import resolve_fabric_link
    from fabricsim.topology import build_cluster

    link = resolve_fabric_link(cluster.catalog, cluster.system, cluster.fabric).id
    try:
        build_cluster(cluster.system.id, nodes=1, fabric=cluster.fabric_kind, link=link, planes=cluster.planes,
                      catalog=cluster.catalog)
    except SpecError as exc:
        if exc.field == "planes":
            raise SpecError(exc.message, field="--planes") from None
        raise


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


def _check_dragonfly(cluster: Cluster, gpus: int, field: str) -> None:
    """A dragonfly needs two groups or more: refused below that as `topo` refuses it (one group is a fat tree)."""
    if cluster.fabric_kind != "dragonfly":
        return
    from math import ceil

    from fabricsim.collectives import resolve_fabric_link
    from fabricsim.topology import dragonfly_group_nodes, resolve_switch

    link = resolve_fabric_link(cluster.catalog, cluster.system, cluster.fabric).id
    group = dragonfly_group_nodes(resolve_switch(link, cluster.catalog).radix, cluster.system.nics_per_node)
    nodes = max(ceil(gpus / cluster.system.gpus_per_node), cluster.fabric_nodes or 0)
    if nodes <= group:
        raise SpecError(f"{nodes} node{'s fit' if nodes != 1 else ' fits'} in one dragonfly group ({group} nodes of "
                        f"{cluster.system.id}): use --fabric fat-tree, or a dragonfly of more than {group} nodes "
                        "(--cluster-nodes)", field=field)


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


def flow_bar(sim: str) -> AbstractContextManager[None]:
    """A progress bar on stderr for a flow-simulated step (once it passes 2 s); nothing for the analytical model."""
    if sim != "flow":
        return nullcontext()
    from fabricsim.api.progress import progress_bar
    from fabricsim.network import flow_progress

    return flow_progress(progress_bar())


@dataclass(frozen=True, repr=False)
class TrainResult(Result):
    """A predicted training step: ``step_time_s``, ``tokens_per_s``, ``mfu``, ``bottleneck`` and the breakdown by
    layer, with the run behind it (``run``: model, plan with the auto knobs chosen, cluster), bands and goodput."""

    command: ClassVar[str] = "train"
    headline_keys: ClassVar[tuple[str, ...]] = ("step_time_s", "tokens_per_s", "mfu", "bottleneck")

    run: Run | None = None
    bands: dict[str, BandResult] | None = None
    goodput: Goodput | None = None

    @property
    def prediction(self) -> TrainingPrediction:
        assert self.run is not None
        return self.run.prediction

    @property
    def plan(self) -> ParallelPlan:
        assert self.run is not None
        return self.run.plan

    @property
    def step_time_s(self) -> float:
        return self.prediction.step_time_s

    @property
    def tokens_per_s(self) -> float:
        return self.prediction.tokens_per_s

    @property
    def mfu(self) -> float:
        return self.prediction.mfu

    @property
    def bottleneck(self) -> str:
        return self.prediction.bottleneck


@api_call(fabric_alias)
def train(*, model: str = "llama3-70b", system: str = "dgx-h100", gpus: int | None = None, tp: int = 1, pp: int = 1,
          dp: int | None = None, cp: int = 1, ep: int = 1, etp: int | None = None, gpus_per_node: int | None = None,
          seq: int = 4096, gbs: int = 512, mbs: int | None = None, vpp: int | None = None,
          recompute: str | None = None, zero: int | None = None, precision: str = "bf16", kernels: str = "fused",
          grad_dtype: str = "fp32", pp_layout: str | None = None, flash_attn: bool = True,
          sequence_parallel: bool | None = None, overlap_grad_reduce: bool = True, overlap_param_gather: bool = True,
          tp_comm_overlap: bool = False, ep_comm_overlap: bool = False, shared_expert_overlap: bool = False,
          dropout: bool = True, moe_balance: str = "random", capacity_factor: float | None = None,
          moe_dispatcher: str = "alltoall", ib: str | None = None, oversubscription: float = 1.0,
          fabric_kind: str = "fat-tree", planes: int = 1, dragonfly_routing: str = "minimal",
          calibration: Sequence[str] | None = None, sim: str = "analytical", routing: str = "ecmp",
          jobs: str | Path | None = None, cluster_nodes: int | None = None, storage: str = "superpod-better",
          storage_bw: str | None = None, storage_network: str | None = None, storage_server: str | None = None,
          storage_servers: int | None = None, spares: str | None = None, checkpoint_mode: str = "sync",
          checkpoint_interval: str | None = None, mtbf_scale: float = 1.0, restart: str | None = None,
          goodput: bool = True) -> TrainResult:
    """Predict one training step (the options and defaults of `fabricsim train`): knobs left None (mbs, vpp,
    recompute, zero) are chosen as the fastest setting that fits. ``ib`` is the network between nodes as --ib
    names it (ndr, ib-ndr, 400g, a switch id), as in `topology`; ``fabric=`` for it is a deprecated alias
    (``fabric=`` naming a design, e.g. rail-only, sets ``fabric_kind``). Values are taken in their natural types
    (``gpus="16"``, ``tp=8.0``); bad input raises ``fabricsim.SpecError``. ``goodput=False`` skips the goodput
    add-on (``goodput`` None; the step is the same); a failure of the add-on leaves it None with a
    ``goodput_note``, unless a goodput option the caller gave is refused."""
    inputs = dict(locals())
    calibration = list(calibration or [])
    options = goodput_spec(storage, storage_bw, checkpoint_mode, checkpoint_interval, mtbf_scale, restart,
                           network=storage_network, server=storage_server, servers=storage_servers, spares=spares) \
        if goodput else None
    with flow_bar(sim):
        run = prepare_run(model=model, system=system, gpus=gpus, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, seq=seq,
                          gbs=gbs, mbs=mbs, vpp=vpp, recompute=recompute, zero=zero, precision=precision,
                          kernels=kernels, pp_layout=pp_layout, flash_attn=flash_attn,
                          sequence_parallel=sequence_parallel, overlap_grad_reduce=overlap_grad_reduce,
                          overlap_param_gather=overlap_param_gather, tp_comm_overlap=tp_comm_overlap,
                          ep_comm_overlap=ep_comm_overlap, shared_expert_overlap=shared_expert_overlap,
                          dropout=dropout, moe_balance=moe_balance, capacity_factor=capacity_factor,
                          moe_dispatcher=moe_dispatcher, fabric=ib, oversubscription=oversubscription,
                          calibration=calibration, sim=sim, routing=routing,
                          jobs=None if jobs is None else Path(jobs), cluster_nodes=cluster_nodes,
                          grad_dtype=grad_dtype, etp=etp, gpus_per_node=gpus_per_node, fabric_kind=fabric_kind,
                          planes=planes, dragonfly_routing=dragonfly_routing)
    from fabricsim.validation import band_fields

    pred = run.prediction
    found = training_bands(run, calibration)
    good, note = (None, None) if options is None else guarded_goodput(
        lambda: run_goodput(run.spec, run.cluster, pred, options), goodput_given(train, inputs))
    data = {**pred.to_json(), **band_fields(found), "plan": plan_json(run.plan), "chosen": run.choice.to_json(),
            "goodput": None if good is None else goodput_json(good), **model_import_fields(run.imported)}
    if note is not None:
        data["goodput_note"] = note
    rows = [{"layer": k, "exposed_s": pred.breakdown.exposed[k], "overlapped_s": pred.breakdown.overlapped[k]}
            for k in pred.breakdown.exposed]
    return TrainResult(inputs, data, rows=rows, run=run, bands=found, goodput=good)
