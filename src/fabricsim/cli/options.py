"""Each option of the run commands declared once: its name, type and help in one ``Annotated`` alias (here, or in
`topo_options`, `goodput_options`, `serve_options` and a command's own table), its default in the API function the
command calls (`from_api` reads it from `fabricsim.api`'s signature, so the CLI and the API cannot disagree). A
command takes ``**options``; `declared` gives it the signature of its groups of declarations, in order, which typer
reads to build the options, and `run_options` puts the values back in that order (the JSON ``inputs`` echo).

Adding an option to `train` and `whatif`: the keyword argument (with its default) in `fabricsim.api.train` and
`whatif`, one alias and one entry in `PLAN` here, and its use; tests/test_one_declaration.py checks that no other
command declares the same name differently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from inspect import Parameter, Signature, signature
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from fabricsim.api import topology, train, whatif
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
)
from fabricsim.cli.output import REPORT_SUFFIXES, FormatOpt, JsonOpt, ReportOpt, command_inputs, output_format
from fabricsim.cli.topo_options import (
    DragonflyRouting,
    Eth,
    Ib,
    NodeCable,
    Nodes,
    NodesPerSwitch,
    NvlinkDomain,
    Oversubscription,
    Planes,
    RailOptimized,
    Switch,
    System,
    Tiers,
    TorusDims,
)
from fabricsim.cli.topo_options import Fabric as Design

F = TypeVar("F", bound=Callable[..., Any])
Decl = tuple[Any, Any]  # (the Annotated type with its typer.Option, the default)
Group = Mapping[str, Decl]

# The plan and cluster options of `train`, shared with `whatif` (which takes the same run).
Model = Annotated[str, typer.Option("--model", help="preset name or model spec YAML/JSON file")]
SystemOpt = System
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
Fabric = Ib
FabricKind = Annotated[str, typer.Option("--fabric", help="scale-out design: fat-tree, rail-only, dragonfly or "
                                         "slim-fly (built by --sim flow; the analytical model prices a "
                                         "rail-optimized fat tree, which rail-only and --planes match for NCCL's "
                                         "rail-local traffic, tapered to a dragonfly's or Slim Fly's bisection)")]
Sim = Annotated[str, typer.Option("--sim", help="analytical, or flow: data- and expert-parallel collectives of every "
                                  "group at once on the built fat tree (flow simulation)")]
ROUTING_HELP = ("ecmp (a hashed path per flow), adaptive (split by load) or spray (per packet) [default: ecmp]; "
                "flow simulation only (collective and train: with --sim flow)")
"""--routing's one help text: `collective` declares it optional (refused without --sim flow), `traffic` always
simulates flows."""
Routing = Annotated[str, typer.Option("--routing", help=ROUTING_HELP)]
Jobs = Annotated[Path | None, typer.Option("--jobs", help="with --sim flow: other jobs and background traffic "
                                           "(the `traffic --jobs` YAML), placed after this job's GPUs")]
ClusterNodes = Annotated[int | None, typer.Option("--cluster-nodes", help="with --sim flow: nodes of the whole "
                                                  "fabric (default: this job's)")]
AsJson = JsonOpt
Calibration = Annotated[list[str] | None, typer.Option(
    "--calibration", help="calibration overlay YAML applied on top of the catalog (repeatable)")]


def from_api(func: Callable[..., Any], declarations: Mapping[str, Any]) -> dict[str, Decl]:
    """name -> (declaration, default) where the default is that of ``func``'s keyword argument of the same name:
    a run option's default is written once, in the API function the command calls (`fabricsim.api`). An entry
    given as a (declaration, default) pair already is an option of the CLI alone (how it prints: --format, --plot)."""
    params = signature(func).parameters
    return {name: kind if isinstance(kind, tuple) else (kind, params[name].default)
            for name, kind in declarations.items()}


# The cluster `topo` and `traffic` describe (defaults: `fabricsim.topology`'s).
CLUSTER: dict[str, Decl] = from_api(topology, {
    "system": System, "nodes": Nodes, "fabric": Design, "ib": Ib, "eth": Eth, "switch": Switch, "tiers": Tiers,
    "rail_optimized": RailOptimized, "oversubscription": Oversubscription, "node_cable": NodeCable,
    "torus_dims": TorusDims, "nodes_per_switch": NodesPerSwitch, "planes": Planes,
    "dragonfly_routing": DragonflyRouting, "nvlink_domain": NvlinkDomain,
})
# parameter name -> (declaration, default), in `--help` order; the defaults are `fabricsim.train`'s.
PLAN: dict[str, Decl] = from_api(train, {
    "model": Model, "system": System, "gpus": Gpus, "tp": Tp, "pp": Pp, "dp": Dp, "cp": Cp, "ep": Ep, "etp": Etp,
    "gpus_per_node": GpusPerNode, "seq": Seq, "gbs": Gbs, "mbs": Mbs, "vpp": Vpp, "recompute": Recompute,
    "zero": Zero, "precision": Precision, "kernels": Kernels, "grad_dtype": GradDtype, "pp_layout": PpLayout,
    "flash_attn": FlashAttn, "sequence_parallel": SequenceParallel, "overlap_grad_reduce": OverlapGradReduce,
    "overlap_param_gather": OverlapParamGather, "tp_comm_overlap": TpCommOverlap, "ep_comm_overlap": EpCommOverlap,
    "shared_expert_overlap": SharedExpertOverlap, "dropout": Dropout, "moe_balance": MoEBalance,
    "capacity_factor": CapacityFactor, "moe_dispatcher": MoEDispatcher, "ib": Ib, "oversubscription": Oversubscription,
})
TOPOLOGY: dict[str, Decl] = from_api(train, {"fabric_kind": FabricKind, "planes": Planes,
                                             "dragonfly_routing": DragonflyRouting})
FLOW: dict[str, Decl] = from_api(train, {"sim": Sim, "routing": Routing, "jobs": Jobs, "cluster_nodes": ClusterNodes})
GOODPUT: dict[str, Decl] = from_api(train, {
    "storage": Storage, "storage_bw": StorageBw, "storage_network": StorageNetwork, "storage_server": StorageServer,
    "storage_servers": StorageServers, "spares": Spares, "checkpoint_mode": CheckpointMode,
    "checkpoint_interval": CheckpointInterval, "mtbf_scale": MtbfScale, "restart": Restart,
})
GOODPUT_SWITCH: dict[str, Decl] = from_api(train, {"goodput": GoodputOpt})
CALIBRATION: dict[str, Decl] = from_api(train, {"calibration": Calibration})
# How the CLI prints: no API argument.
PRINT: dict[str, Decl] = {"fmt": (FormatOpt, None), "as_json": (AsJson, False)}
REPORT: dict[str, Decl] = {"report": (ReportOpt, None)}
BREAKDOWN_PLOT: dict[str, Decl] = {"plot": (
    Annotated[Path | None, typer.Option("--plot", help="write the breakdown as a bar chart PNG")], None)}
# `topo`, `traffic` and `collective` echo an empty list, the run commands none (their JSON `inputs` as before).
CALIBRATION_LIST: Decl = (Calibration, [])

# Each command's options in `--help` order.
TRAIN = (PLAN, TOPOLOGY, PRINT, BREAKDOWN_PLOT, CALIBRATION, FLOW, GOODPUT, GOODPUT_SWITCH, REPORT)
WHATIF_OWN: dict[str, Decl] = from_api(whatif, {
    "factor": Annotated[float, typer.Option("--factor", help="how much faster each layer is made")],
    "swap": Annotated[list[str] | None, typer.Option(
        "--swap", help="cluster swap KEY=VALUE, repeatable: system=gb200-nvl72, ib=xdr, oversubscription=1, "
        "fabric=rail-only, planes=2; storage=2x (or a tier, or converged|separate|none), spares=2%, "
        "checkpoint=async, mtbf=2 change goodput (storage and spares also the bill)")],
})
WHATIF = (PLAN, WHATIF_OWN, GOODPUT_SWITCH, GOODPUT, PRINT, CALIBRATION, REPORT)


def declared(*groups: Group) -> Callable[[F], F]:
    """Give a command defined as ``def command(**options: Any)`` the keyword parameters of these groups, in order
    (typer builds its options from the signature; a name in two groups is a programming error)."""
    params = [Parameter(name, Parameter.KEYWORD_ONLY, annotation=kind, default=default)
              for group in groups for name, (kind, default) in group.items()]
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise TypeError(f"an option declared twice: {sorted({n for n in names if names.count(n) > 1})}")

    def wrap(func: F) -> F:
        func.__signature__ = Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        return func

    return wrap


def given(groups: tuple[Group, ...], options: Mapping[str, Any]) -> dict[str, Any]:
    """The options typer passed, in the order of their declaration (the ``inputs`` echo and ``--dump-config``)."""
    return {name: options[name] for group in groups for name in group if name in options}


def run_options(groups: tuple[Group, ...], options: Mapping[str, Any]) -> tuple[dict[str, Any], str, Path | None,
                                                                              Path | None]:
    """What every run command does first: the JSON ``inputs`` echo (declaration order), the output format, and the
    --plot and --report paths checked before any work (None where the command has no such option)."""
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    inputs = command_inputs(given(groups, options))
    form = output_format(options["fmt"], options["as_json"])
    plot = check_output_path(options.get("plot"), "--plot", PLOT_SUFFIXES)
    return inputs, form, plot, check_output_path(options.get("report"), "--report", REPORT_SUFFIXES)
