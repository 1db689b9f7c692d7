"""Options several run specs share under one declaration each (an ``Annotated`` type whose `opt` carries the
default and help): the system, the network, the scale-out design and the calibration overlays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fabricsim.api.specs.fields import opt

FABRIC_HELP = ("network between nodes: hdr, ndr, xdr (InfiniBand) or eth-400g, eth-800g (Ethernet); ib-ndr, "
               "400g also accepted (default: the system's NICs)")
"""The one network option's help (``--ib`` of every command)."""

ModelOption = Annotated[str, opt("llama3-70b", "preset name or model spec YAML/JSON file")]
TpOption = Annotated[int, opt(1, "tensor-parallel size")]
PpOption = Annotated[int, opt(1, "pipeline-parallel stages")]
EpOption = Annotated[int, opt(1, "expert-parallel size (MoE)")]
SystemOption = Annotated[str, opt("dgx-h100", "catalog system id (fabricsim catalog systems)")]
GpuPowerOption = Annotated[float | None, opt(
    None, "board power limit of every GPU (default: its rating): GEMM-heavy work runs into it, so the sustained "
    "compute clock falls along the GPU's catalog power curve; HBM, NVLink and the network keep their rates",
    unit="W")]
WorkersOption = Annotated[int | None, opt(None, "processes [default: all cores]")]
"""Local processes: size's search, and trace import's rank files read at once."""
NodesOption = Annotated[int, opt(1, "compute nodes (servers, or racks for NVL72)")]
NetworkOption = Annotated[str | None, opt(None, FABRIC_HELP, cli="--ib")]
OversubscriptionOption = Annotated[float, opt(
    1.0, "fat-tree leaf node ports : uplinks (>= 1): the analytical model divides the network share of the bytes "
    "that leave a leaf by it; topo, traffic and --sim flow build it")]
DesignOption = Annotated[str, opt(
    "fat-tree", "scale-out design: fat-tree, rail-only, dragonfly, slim-fly, torus or mesh (topo and traffic build "
    "each; train and collective take the first four: the analytical model prices a rail-optimized fat tree, which "
    "rail-only and --planes match for NCCL's rail-local traffic, tapered to a dragonfly's or Slim Fly's bisection, "
    "and --sim flow builds the design)", cli="--fabric")]
PlanesOption = Annotated[int, opt(
    1, "fat tree: planes each NIC's bandwidth is split over, 1, 2, 4 or 8 as the switch's ports split "
    "(multi-plane, each a fat tree of split switch ports)")]
DragonflyRoutingOption = Annotated[str, opt(
    "minimal", "--fabric dragonfly only: minimal, valiant (through an intermediate group) or ugal (per flow the "
    "minimal path unless a non-minimal one is less loaded, under any --routing); train and collective route it "
    "with --sim flow")]
CALIBRATION_HELP = "calibration overlay YAML applied on top of the catalog (repeatable)"
Calibration = Annotated[Sequence[str] | None, opt(None, CALIBRATION_HELP)]
FlashAttnOption = Annotated[bool, opt(True, "fused attention (no materialised scores)")]
CapacityFactorOption = Annotated[float | None, opt(None, "expert capacity as a multiple of the mean load; tokens "
                                                         "beyond it are dropped (default: dropless)")]
RailOptimizedOption = Annotated[bool, opt(True, "NIC i of every node on rail leaf i (fat tree)")]
FRAMEWORK_HELP = ("training stack as NAME[@VERSION]: megatron (Megatron-Core, NeMo, Megatron-Bridge), torchtitan, "
                  "nemo-automodel, deepspeed or maxtext (fabricsim catalog frameworks): the settings it runs by "
                  "default (kernels, ZeRO/FSDP, gradient reduction dtype, TP overlap, recompute, dropout) for the "
                  "knobs left unset")
"""--framework's one help text (`size` declares it optional: training only, refused with --inference)."""
FrameworkOption = Annotated[str, opt("megatron", FRAMEWORK_HELP)]
CC_HELP = ("fabric behaviour under congestion (fabricsim catalog congestion): ideal (max-min fair sharing at once), "
           "ib (credits + congestion control), ib-nocc, roce-pfc (PFC only), roce-dcqcn, spectrum-x: lossless "
           "back-pressure slows flows that share a paused link with a congested one until rate control reacts; "
           "flow simulation only (collective and train: with --sim flow)")
"""--cc's one help text (traffic, and collective and train with --sim flow)."""
CongestionOption = Annotated[str | None, opt(None, CC_HELP, shown="ideal")]
QosOption = Annotated[bool, opt(True, "traffic classes of a jobs file (its `classes:` weights) each get their own "
                                "queue at their weight (service levels on virtual lanes, Ethernet priorities with "
                                "ETS); --no-qos puts every class in one shared queue")]
DEGRADE_HELP = ("parts below their rating, repeatable: gpu=0.8@3 (GPU 3 at 0.8 of its clock), node=0.7@5 (every GPU "
                "of node 5), link=0.5@node2 or link=0.5@node2/nic1 (a node's NIC links at half rate), "
                "link=0@leaf2-spine0 (a failed fabric link, rerouted; with the flow simulator): the step runs at "
                "its slowest rank's pace, rings and trees at their slowest link's")
"""--degrade's one help text (train, whatif, collective, traffic)."""
DegradeOption = Annotated[Sequence[str] | None, opt(None, DEGRADE_HELP)]
SharpJobsOption = Annotated[int, opt(
    1, "jobs (this one included) that want SHARP trees through the same leaf switches: a switch holds trees for only "
    "so many at once (catalog switches: sharp_jobs); a job without one runs NCCL's next choice (collective: --algo "
    "collnet falls back to it)")]
SharpOption = Annotated[bool, opt(False, "NCCL_COLLNET_ENABLE=1: collectives across nodes may reduce in the SHARP "
                                  "switches where the job gets a tree (--sharp-jobs), when NCCL's tuner finds it "
                                  "faster")]
KvTierOption = Annotated[str, opt(
    "none", "networked KV-cache tier: none, or network (servers on the scale-out fabric holding shared prefixes' KV: "
    "--prefix-network of each prompt is loaded over the GPU's NICs where that beats computing it; --kv-server, "
    "--kv-servers)")]
PrefixNetworkOption = Annotated[float, opt(
    0.0, "with --kv-tier network: fraction of each prompt found in the networked KV tier (0..1, past --prefix-hit "
    "and --prefix-host): loaded from the tier's servers over the fabric, or recomputed where that is faster")]
KvServerOption = Annotated[str | None, opt(
    None, "with --kv-tier network: the tier's server (fabricsim catalog storage-servers, one with a KV tier "
    "latency)", shown="icms-bf4-flash")]
KvServersOption = Annotated[int | None, opt(
    None, "with --kv-tier network: servers in the tier (their read rate is shared by the serving GPUs, their "
    "capacity bounds the prefixes held) [default: infer the server's fewest sold; size --inference enough for the "
    "bytes the rate reads]")]
