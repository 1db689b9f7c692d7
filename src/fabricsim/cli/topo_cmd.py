"""`fabricsim topo`: build a cluster topology and print its bill of materials (table or JSON), optionally a sketch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fabricsim import units
from fabricsim.cli.goodput_options import StorageBw, StorageServer, StorageServers
from fabricsim.cli.output import (
    REPORT_SUFFIXES,
    FormatOpt,
    JsonOpt,
    ReportOpt,
    api_arguments,
    command_inputs,
    console,
    emit,
    narrow,
    new_table,
    num_column,
    output_format,
    spec_errors,
    text_column,
    write_command_report,
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
)

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.topology import BillOfMaterials, Topology

DEFAULT_STORAGE_TIER = "superpod-better"


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
    storage: Annotated[str | None, typer.Option(
        "--storage", help="storage tier the servers are sized to (fabricsim catalog storage), with --storage-network "
        f"separate or converged [default: {DEFAULT_STORAGE_TIER}]")] = None,
    storage_bw: StorageBw = None,
    storage_server: StorageServer = None,
    storage_servers: StorageServers = None,
    storage_switch: Annotated[str | None, typer.Option(
        "--storage-switch", help="separate storage fabric: switch id or link [default: the compute fabric's]")] = None,
    plot: Path | None = typer.Option(None, "--plot", help="draw a sketch of the cluster to this image file"),
    calibration: list[str] = typer.Option([], "--calibration", help="overlay YAML applied on top of the catalog"),
    report: ReportOpt = None,
) -> None:
    """Build a cluster topology: switches by tier, cables, cost, power and bisection bandwidth."""
    inputs = command_inputs(locals())
    form = output_format(fmt, as_json)
    from fabricsim.api import topology
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    report = check_output_path(report, "--report", REPORT_SUFFIXES)
    result = topology(**api_arguments(topology, inputs))
    topo, bom = result.topology, result.bom
    assert topo is not None and bom is not None
    if plot is not None:
        from fabricsim.topology import sketch

        sketch(topo, plot)
    write_command_report(report, result, inputs)
    if emit(form, result.data, inputs, result.rows):
        return
    summary, items = topo_tables(topo, bom)
    console.print(summary)
    console.print(items)
    for note in bom.notes:
        console.print(f"[yellow]{note}[/]" if note.startswith("warning:") else f"[dim]{note}[/]")
    if plot is not None:
        console.print(f"[dim]sketch written to {plot}[/]")
