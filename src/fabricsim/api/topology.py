"""`fabricsim.topology`: build a cluster topology (fat tree, rail-only, multi-plane, dragonfly+, Slim Fly, torus,
mesh; NVLink domains; a storage network) and its bill of materials; the engine of `fabricsim topo`. Also the
cluster options `topo` and `traffic` share, parsed into a ClusterSpec."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from fabricsim import units
from fabricsim.api.result import Result
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from fabricsim.api.specs import TopologyRun
    from fabricsim.catalog import Catalog
    from fabricsim.topology import BillOfMaterials, ClusterSpec, StorageNetworkSpec, Topology


STORAGE_OPTIONS = {"network": "--storage-network", "tier": "--storage", "server": "--storage-server",
                   "servers": "--storage-servers", "write_bytes_per_s": "--storage-bw", "switch": "--storage-switch"}


def storage_network_spec(network: str, tier: str | None, storage_bw: str | None, server: str | None,
                         servers: int | None, switch: str | None, node_cable: str) -> StorageNetworkSpec | None:
    """The storage options as a validated spec (None: --storage-network none); bad values are one line naming
    the option. ``tier`` None: the default tier."""
    from pydantic import ValidationError

    from fabricsim.errors import cli_field, spec_error
    from fabricsim.topology import DEFAULT_STORAGE_TIER, StorageNetworkSpec

    kind = network.strip().lower()
    if kind == "none":
        given = [o for o, v in (("--storage", tier), ("--storage-server", server), ("--storage-servers", servers),
                                ("--storage-bw", storage_bw), ("--storage-switch", switch)) if v is not None]
        if given:
            raise SpecError(f"describe{'s' if len(given) == 1 else ''} a storage network, and --storage-network is "
                            "none (nothing billed): add --storage-network separate or converged",
                            field=", ".join(given))
        return None
    try:
        return StorageNetworkSpec(
            network=kind, tier=(tier or DEFAULT_STORAGE_TIER).strip().lower(), servers=servers, switch=switch,
            node_cable=node_cable,
            write_bytes_per_s=None if storage_bw is None else units.parse_rate(storage_bw, field="--storage-bw"),
            **({} if server is None else {"server": server.strip().lower()}))
    except ValidationError as exc:
        raise cli_field(spec_error(exc), STORAGE_OPTIONS) from None


def check_storage_tier(tier: str, calibration: Sequence[str] = ()) -> None:
    """--storage names a catalog storage tier (its error lists them)."""
    from fabricsim.catalog import load_catalog
    from fabricsim.errors import cli_field

    try:
        load_catalog(*calibration).storage_tier(tier.strip().lower())
    except SpecError as exc:
        raise cli_field(exc, {"storage": "--storage"}) from None


def topo_json(topo: Topology, bom: BillOfMaterials) -> dict[str, Any]:
    """The BOM plus the topology's size: gpus, links (directed), switches by tier and bisection first."""
    from fabricsim.topology import LINK_KINDS

    kinds = {name: int((topo.link_kind == i).sum()) for i, name in enumerate(LINK_KINDS)}
    head = {
        "gpus": topo.num_gpus,
        "links": topo.num_links,
        "links_by_kind": kinds,
        "endpoints": topo.num_endpoints,
        "switches": bom.switches,
        "bisection_bytes_per_s": bom.bisection_bytes_per_s,
        "sharp": topo.sharp,
        "spec": topo.spec.model_dump(mode="json"),
    }
    data = bom.model_dump(mode="json")
    return head | {k: v for k, v in data.items() if k not in head} | {"facility": topo_facility(topo, bom)}


def topo_facility(topo: Topology, bom: BillOfMaterials) -> dict[str, Any]:
    """The cluster's racks, facility power and floor in a hall of the cooling its system needs (an add-on: what it
    cannot give is an ``error`` in the block)."""
    from fabricsim.topology import facility, hall_for

    try:
        system = topo.system
        hall = hall_for(topo.catalog, system)
        return facility(system, topo.catalog.gpu(system.gpu), topo.num_nodes, bom.power_w, hall).to_json()
    except SpecError as exc:
        return {"error": exc.message}


def fabric_link(ib: str | None, eth: str | None, switch: str | None) -> str | None:
    """The spec's ``link`` from the CLI's alternatives: --ib ndr -> ib-ndr, --ib eth-400g (or --eth 400g) ->
    eth-400g, --switch id;
    None when none is given (the system's own NIC generation)."""
    for flag, value in (("--ib", ib), ("--eth", eth), ("--switch", switch)):
        if value is not None and not value.strip():
            raise SpecError("empty; name a network (e.g. ndr, 400g) or leave the option out", field=flag)
    given = [flag for flag, v in (("--ib", ib), ("--eth", eth), ("--switch", switch)) if v]
    if len(given) > 1:
        raise SpecError("--ib, --eth and --switch are alternatives; give one", field=", ".join(given))
    if switch:
        return switch
    if eth:  # a rate (400, 400g, eth-400g); anything else goes to the resolver as typed, which names --eth
        rate = eth.strip().lower().removeprefix("eth-")
        return f"eth-{rate.removesuffix('g')}g" if rate.removesuffix("g").isdigit() else eth.strip().lower()
    if ib:  # any network name: the build resolves it (`catalog.network_id`)
        return ib.strip().lower()
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


# planes a multi-plane fat tree splits a NIC port into: its lanes split 2, 4 or 8 ways (`topology.multiplane`); the
# switch's port rate decides which of them a build takes
PLANE_COUNTS = (1, 2, 4, 8)


def check_design(fabric: str, planes: int, dragonfly_routing: str, *, sim: str | None = None) -> None:
    """--planes and --dragonfly-routing checked as `topo` checks them, each error naming its option: planes a port
    splits into, a routing the dragonfly builder knows, a dragonfly routing only on a dragonfly and, where ``sim``
    is given, only on the flow simulator (the analytical model prices a dragonfly as a fat tree tapered to its
    bisection, which no routing changes)."""
    from typing import get_args

    from fabricsim.topology import ClusterSpec

    if planes not in PLANE_COUNTS:
        raise SpecError(f"must be 1, 2, 4 or 8 (a NIC port's lanes split 2, 4 or 8 ways), got {planes}",
                        field="--planes")
    routings = get_args(ClusterSpec.model_fields["dragonfly_routing"].annotation)
    if dragonfly_routing not in routings:
        raise SpecError(f"unknown routing {dragonfly_routing!r}; allowed: {', '.join(routings)}",
                        field="--dragonfly-routing")
    if dragonfly_routing != routings[0] and fabric != "dragonfly" and fabric in get_args(
            ClusterSpec.model_fields["fabric"].annotation):  # an unknown fabric is refused as such
        raise SpecError(f"routes a dragonfly (--fabric dragonfly); a {fabric} has its own routing: leave it out",
                        field="--dragonfly-routing")
    if dragonfly_routing != routings[0] and sim is not None and sim != "flow":
        raise SpecError("acts on the flow simulator; add --sim flow (the analytical model prices a dragonfly as a "
                        "fat tree tapered to its bisection, which routing does not change)",
                        field="--dragonfly-routing")


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

    check_design(fabric.strip().lower(), planes, dragonfly_routing)
    return ClusterSpec.parse({
        "system": with_nvlink_domain(system, nvlink_domain), "nodes": nodes, "fabric": fabric,
        "link": fabric_link(ib, eth, switch), "tiers": tiers,
        "rail_optimized": rail_optimized, "oversubscription": oversubscription, "node_cable": node_cable,
        "torus_dims": parse_dims(torus_dims), "nodes_per_switch": nodes_per_switch, "planes": planes,
        "dragonfly_routing": dragonfly_routing,
    })


def resolved_names(spec: ClusterSpec, catalog: Catalog, *, system: str, nvlink_domain: int | None = None,
                   eth: str | None = None, switch: str | None = None) -> ClusterSpec:
    """``spec`` with its names resolved once, at the edge, each error naming the option typed: the system
    (``--system``, then ``--nvlink-domain`` for the joined id) and the network (``--ib``, ``--eth`` or ``--switch``:
    ``ndr`` and ``ib-ndr`` build, and print, the same cluster). `topo` and `traffic` share it."""
    from fabricsim.catalog import network_id

    catalog.system(system, field="--system")
    if nvlink_domain is not None:
        catalog.system(spec.system, field="--nvlink-domain")
    if spec.link is None:
        return spec
    flag = "--switch" if switch else "--eth" if eth else "--ib"
    link = network_id(catalog, spec.link, field=flag, kind="fabric link or switch")
    kind = catalog.switches[link].kind if link in catalog.switches else catalog.link(link).kind
    if eth and kind != "ethernet":
        raise SpecError(f"{eth.strip()!r} is {kind}, not Ethernet: give it as --ib {eth.strip()}", field="--eth")
    return spec.model_copy(update={"link": link})


@dataclass(frozen=True, repr=False)
class TopologyResult(Result):
    """A built cluster: ``topology`` (links, router) and its ``bom`` (switches by tier, cables, cost, power,
    bisection); ``to_frame()`` is the bill's items."""

    command: ClassVar[str] = "topo"
    headline_keys: ClassVar[tuple[str, ...]] = ("gpus", "capex_usd", "power_w", "bisection_bytes_per_s")

    topology: Topology | None = None
    bom: BillOfMaterials | None = None

    def report_extras(self) -> dict[str, Any]:
        """The drawing of the cluster, for the report."""
        from fabricsim.report import topology_svg

        assert self.topology is not None
        return {"topology_svg": topology_svg(self.topology)}


def run_topology(run: TopologyRun, inputs: dict[str, Any]) -> TopologyResult:
    """`fabricsim.topology` (generated in `fabricsim.api.calls` from `TopologyRun`): the cluster, its storage
    network and its bill of materials; ``inputs`` the call's keyword arguments as given, the result's echo."""
    o = run
    from fabricsim.catalog import load_catalog
    from fabricsim.topology import build_topology

    spec = cluster_spec(o.system, o.nodes, o.fabric, o.ib, o.eth, o.switch, o.tiers, o.rail_optimized,
                        o.oversubscription, o.node_cable, o.torus_dims, o.nodes_per_switch, o.planes,
                        o.dragonfly_routing, o.nvlink_domain)
    if o.storage is not None:  # a tier is named before anything asks what uses it
        check_storage_tier(o.storage, o.calibration)
    network = storage_network_spec(o.storage_network, o.storage, o.storage_bw, o.storage_server, o.storage_servers,
                                   o.storage_switch, o.node_cable)
    if network is not None:
        spec = spec.model_copy(update={"storage": network})
    catalog = load_catalog(*o.calibration)
    spec = resolved_names(spec, catalog, system=o.system, nvlink_domain=o.nvlink_domain, eth=o.eth, switch=o.switch)
    topo = build_topology(spec, catalog)
    bom = topo.bom()
    data = topo_json(topo, bom)
    return TopologyResult(inputs, data, rows=data["items"], topology=topo, bom=bom)
