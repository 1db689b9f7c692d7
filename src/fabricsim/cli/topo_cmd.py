"""`fabricsim topo`: build a cluster topology and print its bill of materials (table or JSON), optionally a sketch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fabricsim import units
from fabricsim.cli.goodput_options import Storage, StorageBw, StorageServer, StorageServers
from fabricsim.cli.output import (
    FormatOpt,
    JsonOpt,
    command_inputs,
    console,
    emit,
    narrow,
    new_table,
    num_column,
    output_format,
    spec_errors,
    text_column,
)
from fabricsim.cli.topo_options import (
    DragonflyRouting,
    Eth,
    Fabric,
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
    cluster_spec,
)
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.topology import BillOfMaterials, StorageNetworkSpec, Topology

DEFAULT_STORAGE_TIER = "superpod-better"
STORAGE_OPTIONS = {"network": "--storage-network", "tier": "--storage", "server": "--storage-server",
                   "servers": "--storage-servers", "write_bytes_per_s": "--storage-bw", "switch": "--storage-switch"}


def storage_network_spec(network: str, tier: str, storage_bw: str | None, server: str | None, servers: int | None,
                         switch: str | None, node_cable: str) -> StorageNetworkSpec | None:
    """The storage options as a validated spec (None: --storage-network none); bad values are one line naming
    the option."""
    from pydantic import ValidationError

    from fabricsim.errors import cli_field, spec_error
    from fabricsim.topology import StorageNetworkSpec

    kind = network.strip().lower()
    if kind == "none":
        given = [o for o, v in (("--storage-server", server), ("--storage-servers", servers),
                                ("--storage-bw", storage_bw), ("--storage-switch", switch)) if v is not None]
        if given:
            raise SpecError(f"{', '.join(given)} describe(s) a storage network: add --storage-network separate or "
                            "converged", field=given[0])
        return None
    try:
        return StorageNetworkSpec(
            network=kind, tier=tier.strip().lower(), servers=servers, switch=switch, node_cable=node_cable,
            write_bytes_per_s=None if storage_bw is None else units.parse_rate(storage_bw, field="--storage-bw"),
            **({} if server is None else {"server": server.strip().lower()}))
    except ValidationError as exc:
        raise cli_field(spec_error(exc), STORAGE_OPTIONS) from None


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
    return head | {k: v for k, v in data.items() if k not in head}


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.0f}"


def _watts(value: float | None) -> str:
    return "-" if value is None else (f"{value / 1e3:,.1f} kW" if value >= 1e3 else f"{value:.0f} W")


def _nvlink_domains(bom: BillOfMaterials) -> str:
    """Per-domain size and how many domains: the NVSwitch count is the cluster's, so it is said as such."""
    if bom.nvlink_domain_size <= 1:
        return "none (PCIe only)"
    domains = max(1, bom.gpus // bom.nvlink_domain_size)
    chips = (f"; {bom.nvswitch_chips} NVSwitch chips in all ({bom.nvswitch_chips // domains} per domain)"
             if bom.nvswitch_chips else "")
    return f"{domains} x {bom.nvlink_domain_size} GPUs{chips}"


def _storage_text(bom: BillOfMaterials) -> str:
    """The storage network in one cell: servers, network parts, rates and cost."""
    st = bom.storage
    assert st is not None
    cost = sum(i.price_usd or 0.0 for i in st.items)
    parts = (f"{sum(st.switches.values())} switches, {st.nics} NICs, {st.cables} cables" if st.network == "separate"
             else f"{st.compute_ports} compute-fabric ports, {st.cables} cables")
    return (f"{st.servers} x {st.server} ({st.network}: {parts}); {units.format_rate(st.write_bytes_per_s)} write, "
            f"{units.format_rate(st.read_bytes_per_s)} read; {_usd(cost)}")


def topo_tables(topo: Topology, bom: BillOfMaterials) -> tuple[Table, Table]:
    """A summary table and a line-item table."""
    summary = new_table(title=f"topology: {bom.nodes} x {bom.system}", header_style="bold", show_header=False)
    text_column(summary, "what")
    text_column(summary, "value")
    switches = ", ".join(f"{n} {t}" for t, n in bom.switches.items()) or "none"
    cables = ", ".join(f"{n} {seg}" for seg, n in bom.cables.items()) or "none"
    rows = [
        ("fabric", bom.fabric),
        ("GPUs / nodes / NICs", f"{bom.gpus} / {bom.nodes} / {bom.nics} x {bom.nic}"),
        ("NVLink domains", _nvlink_domains(bom)),
        ("switches", f"{switches} ({bom.switches_total} x {bom.switch}{', SHARP' if topo.sharp else ''})"),
        ("cables", f"{cables}: {bom.cables_copper} copper, {bom.cables_optical} optical, "
                   f"{bom.transceivers} transceivers"),
        ("scale-out per GPU", units.format_rate(bom.nic_bytes_per_s_per_gpu)),
        ("bisection", units.format_rate(bom.bisection_bytes_per_s)),
        ("oversubscription", f"{bom.oversubscription:g}:1"),
        ("capital cost", _usd(bom.capex_usd) if bom.capex_usd is not None
         else f"unknown (priced part {_usd(bom.capex_known_usd)})"),
        ("power", _watts(bom.power_w) if bom.power_w is not None
         else f"unknown (known part {_watts(bom.power_known_w)})"),
        ("links / endpoints", f"{topo.num_links} directed links, {topo.num_endpoints} endpoints"),
    ]
    if bom.storage is not None:
        rows.insert(-3, ("storage", _storage_text(bom)))
    for key, value in rows:
        summary.add_row(key, value)
    items = new_table(title="bill of materials", header_style="bold")
    cols = [c for c in ("item", "role", "count", "unit price", "date", "unit power", "verified")
            if not (narrow() and c in ("date", "verified"))]
    for col in cols:
        if col in ("count", "unit price", "unit power"):
            num_column(items, col)
        else:
            text_column(items, col)
    for i in bom.items:
        cells = {"item": i.item, "role": i.role, "count": f"{i.count:,}", "unit price": _usd(i.unit_price_usd),
                 "date": i.price_date or "-", "unit power": _watts(i.unit_power_w),
                 "verified": "yes" if i.verified else "[yellow]no[/]"}
        items.add_row(*(cells[c] for c in cols))
    return summary, items


@spec_errors
def topo_command(
    system: System = "dgx-h100",
    nodes: Nodes = 1,
    fabric: Fabric = "fat-tree",
    ib: Ib = None,
    eth: Eth = None,
    switch: Switch = None,
    tiers: Tiers = None,
    rail_optimized: RailOptimized = True,
    oversubscription: Oversubscription = 1.0,
    node_cable: NodeCable = "optical",
    torus_dims: TorusDims = None,
    nodes_per_switch: NodesPerSwitch = 1,
    planes: Planes = 1,
    dragonfly_routing: DragonflyRouting = "minimal",
    nvlink_domain: NvlinkDomain = None,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
    storage_network: Annotated[str, typer.Option(
        "--storage-network", help="storage to bill with the cluster: separate (its own switches, the nodes' storage "
        "NICs), converged (servers on the compute fabric) or none")] = "none",
    storage: Storage = DEFAULT_STORAGE_TIER,
    storage_bw: StorageBw = None,
    storage_server: StorageServer = None,
    storage_servers: StorageServers = None,
    storage_switch: Annotated[str | None, typer.Option(
        "--storage-switch", help="separate storage fabric: switch id or link [default: the compute fabric's]")] = None,
    plot: Path | None = typer.Option(None, "--plot", help="draw a sketch of the cluster to this image file"),
    calibration: list[str] = typer.Option([], "--calibration", help="overlay YAML applied on top of the catalog"),
) -> None:
    """Build a cluster topology: switches by tier, cables, cost, power and bisection bandwidth."""
    from fabricsim.catalog import load_catalog
    from fabricsim.topology import build_topology

    inputs = command_inputs(locals())
    form = output_format(fmt, as_json)
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    spec = cluster_spec(system, nodes, fabric, ib, eth, switch, tiers, rail_optimized, oversubscription, node_cable,
                        torus_dims, nodes_per_switch, planes, dragonfly_routing, nvlink_domain)
    network = storage_network_spec(storage_network, storage, storage_bw, storage_server, storage_servers,
                                   storage_switch, node_cable)
    if network is not None:
        spec = spec.model_copy(update={"storage": network})
    topo = build_topology(spec, load_catalog(*calibration))
    bom = topo.bom()
    if plot is not None:
        from fabricsim.topology import sketch

        sketch(topo, plot)
    data = topo_json(topo, bom)
    if emit(form, data, inputs, data["items"]):
        return
    summary, items = topo_tables(topo, bom)
    console.print(summary)
    console.print(items)
    for note in bom.notes:
        console.print(f"[yellow]{note}[/]" if note.startswith("warning:") else f"[dim]{note}[/]")
    if plot is not None:
        console.print(f"[dim]sketch written to {plot}[/]")
