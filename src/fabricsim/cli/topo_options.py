"""The cluster options `topo` and `traffic` share (typer annotations), and the ClusterSpec they describe."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from fabricsim.cli.output import fabric_help
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from fabricsim.topology import ClusterSpec

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
Oversubscription = Annotated[float, typer.Option("--oversubscription", help="leaf node ports : uplinks (>= 1)")]
NodeCable = Annotated[str, typer.Option("--node-cable", help="optical or copper NIC-to-switch cables")]
TorusDims = Annotated[str | None, typer.Option("--torus-dims", help="torus switches per dimension, e.g. 4x4x2")]
NodesPerSwitch = Annotated[int, typer.Option("--nodes-per-switch", help="torus: nodes per torus switch")]
DragonflyRouting = Annotated[str, typer.Option("--dragonfly-routing", help="dragonfly: minimal, valiant (through "
                                               "an intermediate group) or ugal (both; with --routing adaptive)")]
NvlinkDomain = Annotated[int | None, typer.Option(
    "--nvlink-domain", help="join rack-scale nodes into NVLink domains of this many GPUs through a second NVLink "
    "switch tier (144 or 576 on gb200-nvl72; a roadmap design; the same as --system gb200-nvl72@144)")]
Planes = Annotated[int, typer.Option("--planes", help="fat tree: planes each NIC's bandwidth is split over "
                                     "(multi-plane, each a fat tree of split switch ports)")]


def fabric_link(ib: str | None, eth: str | None, switch: str | None) -> str | None:
    """The spec's ``link`` from the CLI's alternatives: --ib ndr -> ib-ndr, --ib eth-400g (or --eth 400g) ->
    eth-400g, --switch id;
    None when none is given (the system's own NIC generation)."""
    for flag, value in (("--ib", ib), ("--eth", eth), ("--switch", switch)):
        if value is not None and not value.strip():
            raise SpecError("empty; name a network (e.g. ndr, 400g) or leave the option out", field=flag)
    given = [v for v in (ib, eth, switch) if v]
    if len(given) > 1:
        raise SpecError("--ib, --eth and --switch are alternatives; give one", field="link")
    if switch:
        return switch
    if eth:
        rate = eth.strip().lower().removeprefix("eth-")
        return f"eth-{rate if rate.endswith('g') else rate + 'g'}"
    if ib:
        key = ib.strip().lower()
        if key.startswith("eth-") or (key.endswith("g") and key[:-1].isdigit()):
            return f"eth-{key.removeprefix('eth-')}"
        return f"ib-{key.removeprefix('ib-')}"
    return None


def parse_dims(text: str | None) -> tuple[int, int, int] | None:
    """``4x4x2`` -> (4, 4, 2)."""
    if text is None:
        return None
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise SpecError(f"cannot read {text!r} as three sizes like 4x4x2", field="torus_dims")
    a, b, c = (int(p) for p in parts)
    return a, b, c


def with_nvlink_domain(system: str, nvlink_domain: int | None) -> str:
    """The system id ``--nvlink-domain`` asks for: ``gb200-nvl72`` joined into domains of N GPUs is
    ``gb200-nvl72@N``."""
    if nvlink_domain is None:
        return system
    if "@" in system:
        raise SpecError(f"{system!r} already names its NVLink domain; leave --nvlink-domain out",
                        field="--nvlink-domain")
    base, sep, used = system.partition("/")
    return f"{base}@{nvlink_domain}{sep}{used}"


def cluster_spec(system: str, nodes: int, fabric: str, ib: str | None, eth: str | None, switch: str | None,
                 tiers: int | None, rail_optimized: bool, oversubscription: float, node_cable: str,
                 torus_dims: str | None, nodes_per_switch: int, planes: int = 1,
                 dragonfly_routing: str = "minimal", nvlink_domain: int | None = None) -> ClusterSpec:
    """The validated ClusterSpec the shared options describe."""
    from fabricsim.topology import ClusterSpec

    return ClusterSpec.parse({
        "system": with_nvlink_domain(system, nvlink_domain), "nodes": nodes, "fabric": fabric,
        "link": fabric_link(ib, eth, switch), "tiers": tiers,
        "rail_optimized": rail_optimized, "oversubscription": oversubscription, "node_cable": node_cable,
        "torus_dims": parse_dims(torus_dims), "nodes_per_switch": nodes_per_switch, "planes": planes,
        "dragonfly_routing": dragonfly_routing,
    })
