"""`fabricsim.train`: one training step's time, throughput, memory and bounding layer, with its error bands and
goodput; the engine of `fabricsim train` (and of `whatif`, which takes the same run)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fabricsim.api.goodput import goodput_given, goodput_json, guarded_goodput, run_goodput, run_goodput_spec
from fabricsim.api.result import LazyDocument, Result, model_import_fields
from fabricsim.api.topology import check_design
from fabricsim.errors import SpecError, cli_field

if TYPE_CHECKING:
    from fabricsim.api.specs import DesignOptions, FlowOptions, PlanOptions, TrainRun
    from fabricsim.api.specs.cluster import DegradeOptions
    from fabricsim.catalog import Catalog
    from fabricsim.comm import Cluster
    from fabricsim.model import HFImport, ModelSpec
    from fabricsim.traffic import BackgroundSpec, JobSpec
    from fabricsim.training import (
        AutoChoice,
        FrameworkProfile,
        Goodput,
        GoodputSpec,
        ParallelPlan,
        TrainingPrediction,
    )
    from fabricsim.validation import BandResult


def training_bands(run: Run, calibration: list[str] | None) -> dict[str, BandResult]:
    """The error bands of a run's step time and rates, from comparable published training runs."""
    return prediction_bands(run.spec, run.cluster, run.prediction, calibration)


def prediction_bands(spec: ModelSpec, cluster: Cluster, pred: TrainingPrediction, calibration: list[str] | None
                     ) -> dict[str, BandResult]:
    """The error bands of one training prediction's step time, tokens/s and model FLOP/s."""
    from fabricsim.validation import bands, training_regime

    gpu = cluster.catalog.gpu(cluster.system.gpu)
    regime = training_regime(spec.moe is not None, gpu, pred.peak_precision, pred.gpus, pred.sharded)
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
    framework: FrameworkProfile | None = None  # the training stack (None: fabricsim's defaults, Megatron-Core's)
    stack_settings: tuple[tuple[str, Any], ...] = ()  # the knobs the stack set (those the user left unset)
    healthy_catalog: Catalog | None = None  # the catalog before --degrade slowed the GPU (None: none is slow)

    def framework_json(self) -> dict[str, Any]:
        """The stack, where its settings were read, and the knobs it set in this run."""
        if self.framework is None:
            return {"id": "megatron", "settings_applied": {}}
        return {"id": self.framework.id, "name": self.framework.name, "version": self.framework.version,
                "source": self.framework.source, "settings_applied": dict(self.stack_settings)}

    @property
    def plan(self) -> ParallelPlan:
        return self.choice.plan

    @property
    def prediction(self) -> TrainingPrediction:
        return self.choice.prediction


def prepare_run(plan: PlanOptions, calibration: Sequence[str] = (), *, design: DesignOptions | None = None,
                flow: FlowOptions | None = None, parts: DegradeOptions | None = None) -> Run:
    """Load the model and catalog, build the cluster, choose the unset knobs and predict the step: the plan
    options of a run spec (`TrainRun`, `WhatIfRun`, or a `PlanOptions` of its own), its scale-out design (a
    rail-optimized fat tree when None), flow simulation (analytical when None), the parts running below their
    rating (`--degrade`: the slowest GPU paces the compute, the slowest NIC link the collectives between
    nodes; a fabric link between switches needs the flow simulator) and SHARP (`--sharp`, `--sharp-jobs`)."""
    from fabricsim.catalog import load_catalog, network_link_id, partial_system_id, partly_used, with_gpu_power
    from fabricsim.comm import DIRECT_FABRICS, Cluster
    from fabricsim.inputs import oversubscription as checked_oversubscription
    from fabricsim.model import resolve_model
    from fabricsim.training import framework_profile, search_knobs

    p = plan
    system, fabric, gpus_per_node, gpus, dp = p.system, p.ib, p.gpus_per_node, p.gpus, p.dp
    fabric_kind, planes, dragonfly_routing = ("fat-tree", 1, "minimal") if design is None else (
        design.fabric_kind, design.planes, design.dragonfly_routing)
    sim, routing, jobs, cluster_nodes = ("analytical", "ecmp", None, None) if flow is None else (
        flow.sim, flow.routing, None if flow.jobs is None else Path(flow.jobs), flow.cluster_nodes)
    cc, qos = (None, True) if flow is None else (flow.cc, flow.qos)  # the Cluster refuses --cc without --sim flow
    oversubscription = checked_oversubscription(p.oversubscription)
    catalog = load_catalog(*calibration)
    catalog.system(system, field="--system")  # the name checked at the edge: an error names the option typed
    catalog = with_gpu_power(catalog, catalog.system(system).gpu, p.gpu_power, field="--gpu-power")
    from fabricsim.topology import job_nic_fraction, parse_degrade

    degradation = parse_degrade(None if parts is None else parts.degrade)
    degradation.check_use(flow=sim == "flow", compute=True)
    sharp, sharp_jobs = (False, 1) if parts is None else (parts.sharp, parts.sharp_jobs)
    if sharp_jobs < 1:
        raise SpecError(f"at least 1 (this job), got {sharp_jobs}", field="--sharp-jobs")
    healthy = None
    if degradation.compute_fraction < 1.0:  # a synchronous step runs at its slowest rank's pace
        from fabricsim.catalog import with_gpu_clock

        healthy = catalog
        catalog = with_gpu_clock(catalog, catalog.system(system).gpu, degradation.compute_fraction,
                                 f"at {degradation.compute_fraction:g} of its clock (--degrade)")
    if fabric is not None:  # resolved once here: every layer below gets the catalog's link id
        fabric = network_link_id(catalog, fabric, field="--ib")
    if gpus_per_node is not None:  # checked here so the error names the option
        named = partial_system_id(system, gpus_per_node)  # an id with /N that disagrees is refused first
        partly_used(catalog.system(system), gpus_per_node, field="--gpus-per-node")
        system = named
    profile = framework_profile(p.framework)  # resolved at the edge: an error names --framework
    spec, imported = resolve_model(p.model)
    check_moe_options(spec, {name: getattr(p, name) for name in MOE_OPTIONS})
    fields = plan_fields(p, profile.values())
    other_jobs: list[JobSpec] = []
    background: list[BackgroundSpec] = []
    storage = 0
    classes: dict[str, float] = {}
    own_class = "default"
    if jobs is not None:
        from fabricsim.traffic import load_jobs_file

        parsed = load_jobs_file(jobs)
        other_jobs, background, storage = parsed.jobs, parsed.background, parsed.storage_nodes
        classes, own_class = parsed.classes, parsed.own_class
    world = gpus if gpus is not None else (p.tp * p.pp * p.cp * dp if dp is not None else None)
    kind = fabric_kind.strip().lower()
    sysm = catalog.system(system)
    nodes_field = "--gpus" if cluster_nodes is None else "--cluster-nodes"  # what sets the dragonfly's size
    if cluster_nodes is None and sim != "flow" and kind in DIRECT_FABRICS and world is not None:
        cluster_nodes = -(-world // sysm.gpus_per_node)  # the analytical taper is the whole network's
    cluster = Cluster(sysm, fabric=fabric, oversubscription=oversubscription, catalog=catalog,
                      sim=sim, routing=routing, other_jobs=tuple(other_jobs), background=tuple(background),
                      fabric_kind=kind, planes=planes, dragonfly_routing=dragonfly_routing,
                      storage_nodes=storage, fabric_nodes=cluster_nodes,
                      congestion=catalog.congestion_control(cc) if cc is not None else None, qos=qos,
                      classes=tuple(classes.items()), own_class=own_class,
                      network_fraction=job_nic_fraction(degradation, -(-world // sysm.gpus_per_node)
                                                        if world is not None else 1 << 30),
                      degradation=degradation if degradation else None, sharp=sharp, sharp_jobs=sharp_jobs)
    check_design(kind, planes, dragonfly_routing, sim=sim)
    _check_planes(cluster)
    if world is not None:  # refused as `topo` refuses it, before the search
        _check_cluster(cluster, world, "--gpus" if gpus is not None else "--dp")
        _check_dragonfly(cluster, world, nodes_field)
    try:
        choice = search_knobs(spec, fields, cluster)
    except SpecError as exc:  # name the option the user gave, not the plan's field
        raise cli_field(exc, plan_option_names()) from None
    _check_cluster(cluster, choice.plan.world_size, "--gpus")
    _check_dragonfly(cluster, choice.plan.world_size, nodes_field)
    job_nodes = -(-choice.plan.world_size // sysm.gpus_per_node)
    degradation.check_parts(choice.plan.world_size, max(job_nodes, cluster_nodes or 0))
    applied = tuple((k, v) for k, v in profile.values().items() if getattr(p, k) is None)
    return Run(spec, choice, cluster, cluster.system.id, fabric, oversubscription, imported, profile, applied,
               healthy)


MOE_OPTIONS = ("moe_balance", "moe_dispatcher", "capacity_factor", "ep_comm_overlap", "shared_expert_overlap")
"""The plan options that act on expert layers only (refused on a dense model unless left at their default)."""
PLAN_RENAMES = {"vpp": "virtual_stages", "flash_attn": "flash_attention"}
"""Run options whose ParallelPlan field is named otherwise."""
NOT_PLAN = ("model", "system", "ib", "oversubscription", "gpus_per_node", "framework", "gpu_power")
"""Run options that choose the model, the cluster and the stack rather than a ParallelPlan field."""


def plan_fields(p: PlanOptions, stack: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ParallelPlan fields of a run's plan options (the pipeline layout parsed): a knob left unset (None) takes
    the training stack's setting (``stack``, its profile's values) where it names one, else the plan's default."""
    from fabricsim.api.specs import PlanOptions
    from fabricsim.training import FRAMEWORK_SEARCHED, FRAMEWORK_SETTABLE, parse_layout

    fields = {PLAN_RENAMES.get(name, name): getattr(p, name) for name in PlanOptions.model_fields
              if name not in NOT_PLAN}
    for name in FRAMEWORK_SETTABLE:
        if fields.get(name) is None:
            if stack and name in stack:
                fields[name] = stack[name]
            elif name not in FRAMEWORK_SEARCHED:  # left to the plan's default (the searched knobs: the search)
                fields.pop(name, None)
    fields["pp_layout"] = parse_layout(p.pp_layout)
    return fields


def plan_option_names() -> dict[str, str]:
    """ParallelPlan field -> the option that sets it, where they are spelt otherwise (``virtual_stages`` ->
    ``vpp``, ``grad_dtype`` -> ``grad-dtype``): the name an error of the plan gives the user."""
    return dict(_plan_option_names())


@cache
def _plan_option_names() -> dict[str, str]:
    from fabricsim.api.specs import PlanOptions, field_cli

    names = {PLAN_RENAMES.get(n, n): field_cli(n, f).split("/")[0][2:] for n, f in PlanOptions.model_fields.items()
             if n not in NOT_PLAN}
    return {field: option for field, option in names.items() if field != option}


def check_moe_options(spec: ModelSpec, given: dict[str, Any]) -> None:
    """MoE options set other than their default on a dense model (and --shared-expert-overlap on a model without
    shared experts) are refused, not ignored: the step has no expert layer for them to act on."""
    from fabricsim.training import ParallelPlan

    if spec.moe is None:
        names = plan_option_names()
        moved = [f"--{names[k]}" for k, v in given.items() if v != ParallelPlan.model_fields[k].default]
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
    from fabricsim.topology import build_cluster

    link = cluster.link.id
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

    from fabricsim.topology import check_buildable

    if gpus < 1:
        return
    nodes = ceil(gpus / cluster.system.gpus_per_node)
    link = cluster.link.id
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

    from fabricsim.topology import dragonfly_group_nodes, resolve_switch

    link = cluster.link.id
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


@dataclass(frozen=True)
class _Extras:
    """A train result's add-ons, each computed once on first access: error bands, goodput (or the note why not)
    and the JSON document around the prediction. Plain fields, no closure, so a result pickles."""

    run_spec: TrainRun
    prepared: Run
    calibration: tuple[str, ...]
    options: GoodputSpec | None  # the goodput options, parsed at the call (None: goodput off)
    cache: dict[str, Any] = field(default_factory=dict, compare=False)

    def bands(self) -> dict[str, BandResult]:
        if "bands" not in self.cache:
            self.cache["bands"] = training_bands(self.prepared, list(self.calibration))
        return self.cache["bands"]  # type: ignore[no-any-return]

    def goodput(self) -> tuple[Goodput | None, str | None]:
        if "goodput" not in self.cache:
            o, prepared, options = self.run_spec, self.prepared, self.options
            self.cache["goodput"] = (None, None) if options is None else guarded_goodput(
                lambda: run_goodput(prepared.spec, prepared.cluster, prepared.prediction, options), goodput_given(o))
        return self.cache["goodput"]  # type: ignore[no-any-return]

    def document(self) -> dict[str, Any]:
        """The payload `fabricsim train --json` prints (before SI conversion)."""
        from fabricsim.validation import band_fields

        prepared, pred = self.prepared, self.prepared.prediction
        good, note = self.goodput()
        data = {**pred.to_json(), **band_fields(self.bands()), "plan": plan_json(prepared.plan),
                "chosen": prepared.choice.to_json(), "goodput": None if good is None else goodput_json(good),
                "framework": prepared.framework_json(), **model_import_fields(prepared.imported),
                "launch": run_launch_json(prepared, self.run_spec.model), "degraded": degraded_parts(prepared),
                **qos_comparison(prepared)}
        if note is not None:
            data["goodput_note"] = note
        return data


@dataclass(frozen=True, repr=False)
class TrainResult(Result):
    """A predicted training step: ``step_time_s``, ``tokens_per_s``, ``mfu``, ``bottleneck`` and the breakdown by
    layer, with the run behind it (``run``: model, plan with the auto knobs chosen, cluster), bands and goodput
    (computed on first access, as is ``data``: the prediction is the call's cost)."""

    command: ClassVar[str] = "train"
    headline_keys: ClassVar[tuple[str, ...]] = ("step_time_s", "tokens_per_s", "mfu", "bottleneck")

    run: Run | None = None
    extras: _Extras | None = field(default=None, repr=False, compare=False)

    @property
    def bands(self) -> dict[str, BandResult] | None:
        """The error bands of the step time, tokens/s and model FLOP/s (comparable published runs)."""
        return None if self.extras is None else self.extras.bands()

    @property
    def goodput(self) -> Goodput | None:
        """Time to train on the wall clock (None with goodput off, or where it could not be computed: see
        ``data["goodput_note"]``)."""
        return None if self.extras is None else self.extras.goodput()[0]

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

    def headline(self) -> dict[str, Any]:
        """The headline from the prediction itself (the repr of a result no one asked the document of is free)."""
        return {"step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s, "mfu": self.mfu,
                "bottleneck": self.bottleneck}


def run_launch_json(run: Run, model: Any) -> dict[str, Any]:
    """The training stack's own launch line for the run's plan (``{"train": ...}``, or ``{"error": why}``)."""
    from fabricsim.training import framework_launch_json, framework_profile

    profile = run.framework or framework_profile("megatron")
    model_id = model if isinstance(model, str) else run.spec.name
    return framework_launch_json(profile, run.plan, run.spec, model_id, run.cluster.system.gpus_per_node)


def qos_comparison(run: Run) -> dict[str, Any]:
    """With the flow simulator and traffic classes beside the job (a jobs file's `classes`): its step with each
    class in its own queue and with every class in one, so the worth of QoS shows ({} otherwise)."""
    cluster = run.cluster
    if cluster.sim != "flow" or not cluster.classes or not (cluster.other_jobs or cluster.background):
        return {}
    from dataclasses import replace

    from fabricsim.training import predict_training

    other = float(predict_training(run.spec, run.plan, replace(cluster, qos=not cluster.qos)).step_time_s)
    mine = float(run.prediction.step_time_s)
    on, off = (mine, other) if cluster.qos else (other, mine)
    return {"qos": {"on_step_time_s": on, "off_step_time_s": off, "own_class": cluster.own_class}}


def degraded_parts(run: Run) -> list[str]:
    """The parts running below their rating, as phrases (empty when none)."""
    return [] if run.cluster.degradation is None else run.cluster.degradation.describe()


def run_train(run: TrainRun, inputs: dict[str, Any]) -> TrainResult:
    """`fabricsim.train` (generated in `fabricsim.api.calls` from `TrainRun`): the run spec's step, with its bands,
    goodput and JSON document computed on first access; ``inputs`` the call's keyword arguments as given, the
    result's ``inputs`` echo. Goodput options the user gave are checked now: their error fails the call."""
    o = run
    calibration = tuple(o.calibration or [])
    options = run_goodput_spec(o)  # parsed now: a bad value fails the call, as it fails the command
    with flow_bar(o.sim):
        prepared = prepare_run(o, list(calibration), design=o, flow=o, parts=o)
    extras = _Extras(o, prepared, calibration, options)
    if options is not None and goodput_given(o):  # what the user asked of the add-on answers now, or fails the call
        extras.goodput()
    pred = prepared.prediction
    rows = [{"layer": k, "exposed_s": pred.breakdown.exposed[k], "overlapped_s": pred.breakdown.overlapped[k]}
            for k in pred.breakdown.exposed]
    return TrainResult(inputs, LazyDocument(extras.document), rows=rows, run=prepared, extras=extras)
