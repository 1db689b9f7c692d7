"""The cluster options `topo` and `traffic` share, declared once (typer annotations; `cli.options.CLUSTER` pairs them
with `fabricsim.topology`'s defaults): the ClusterSpec they describe (`fabricsim.api.cluster_spec`)."""

from __future__ import annotations

from typing import Annotated

import typer

from fabricsim.cli.output import fabric_help

# fabricsim.topology.FABRICS, spelled out so that `--help` does not import the topology package (a test checks it).
FABRIC_KINDS = ("fat-tree", "rail-only", "dragonfly", "slim-fly", "torus", "mesh")

System = Annotated[str, typer.Option("--system", help="catalog system id (fabricsim catalog systems)")]
Nodes = Annotated[int, typer.Option("--nodes", help="compute nodes (servers, or racks for NVL72)")]
Fabric = Annotated[str, typer.Option("--fabric", help=f"one of {', '.join(FABRIC_KINDS)}")]
Ib = Annotated[str | None, typer.Option("--ib", help=fabric_help)]
Eth = Annotated[str | None, typer.Option("--eth", help="Ethernet fabric, 400g or 800g (older spelling of --ib "
                                         "eth-400g)")]
Switch = Annotated[str | None, typer.Option("--switch", help="fabric switch id instead (qm9700, sn5600, ...)")]
Tiers = Annotated[int | None, typer.Option("--tiers", help="fat-tree tiers 1-3 (default: fewest that fit)")]
RailOptimized = Annotated[bool, typer.Option("--rail-optimized/--no-rail-optimized",
                                             help="NIC i of every node on rail leaf i (fat tree)")]
Oversubscription = Annotated[float, typer.Option(
    "--oversubscription", help="fat-tree leaf node ports : uplinks (>= 1): the analytical model divides the network "
    "share of the bytes that leave a leaf by it; topo, traffic and --sim flow build it")]
NodeCable = Annotated[str, typer.Option("--node-cable", help="optical or copper NIC-to-switch cables")]
TorusDims = Annotated[str | None, typer.Option("--torus-dims", help="torus switches per dimension, e.g. 4x4x2")]
NodesPerSwitch = Annotated[int, typer.Option("--nodes-per-switch", help="torus: nodes per torus switch")]
DragonflyRouting = Annotated[str, typer.Option("--dragonfly-routing", help="--fabric dragonfly only: minimal, valiant "
                                               "(through an intermediate group) or ugal (per flow the minimal path "
                                               "unless a non-minimal one is less loaded, under any --routing); "
                                               "train and collective route it with --sim flow")]
NvlinkDomain = Annotated[int | None, typer.Option(
    "--nvlink-domain", help="join rack-scale nodes into NVLink domains of this many GPUs through a second NVLink "
    "switch tier (144 or 576 on gb200-nvl72; a roadmap design; the same as --system gb200-nvl72@144)")]
Planes = Annotated[int, typer.Option("--planes", help="fat tree: planes each NIC's bandwidth is split over, 1, 2, 4 "
                                     "or 8 as the switch's ports split (multi-plane, each a fat tree of split switch "
                                     "ports)")]
