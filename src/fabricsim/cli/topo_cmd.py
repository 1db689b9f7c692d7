"""`fabricsim topo`: build a cluster topology and print its bill of materials (table or JSON), optionally a sketch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from fabricsim import units
from fabricsim.catalog import load_catalog
from fabricsim.cli.output import console, print_json, spec_errors
from fabricsim.cli.topo_options import (
    Eth,
    Fabric,
    Ib,
    NodeCable,
    Nodes,
    NodesPerSwitch,
    Oversubscription,
    RailOptimized,
    Switch,
    System,
    Tiers,
    TorusDims,
    cluster_spec,
)
from fabricsim.inputs import PLOT_SUFFIXES, check_output_path
from fabricsim.topology import LINK_KINDS, BillOfMaterials, Topology, build_topology


def topo_json(topo: Topology, bom: BillOfMaterials) -> dict[str, Any]:
    """The BOM plus the topology's size: gpus, links (directed), switches by tier and bisection first."""
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


def topo_tables(topo: Topology, bom: BillOfMaterials) -> tuple[Table, Table]:
    """A summary table and a line-item table."""
    summary = Table(title=f"topology: {bom.nodes} x {bom.system}", header_style="bold", show_header=False)
    summary.add_column("what")
    summary.add_column("value")
    switches = ", ".join(f"{n} {t}" for t, n in bom.switches.items()) or "none"
    cables = ", ".join(f"{n} {seg}" for seg, n in bom.cables.items()) or "none"
    rows = [
        ("fabric", bom.fabric),
        ("GPUs / nodes / NICs", f"{bom.gpus} / {bom.nodes} / {bom.nics} x {bom.nic}"),
        ("NVLink domain", f"{bom.nvlink_domain_size} GPUs ({bom.nvswitch_chips} NVSwitch chips)"),
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
    for key, value in rows:
        summary.add_row(key, value)
    items = Table(title="bill of materials", header_style="bold")
    for col in ("item", "role", "count", "unit price", "date", "unit power", "verified"):
        items.add_column(col)
    for i in bom.items:
        items.add_row(i.item, i.role, f"{i.count:,}", _usd(i.unit_price_usd), i.price_date or "-",
                      _watts(i.unit_power_w), "yes" if i.verified else "[yellow]no[/]")
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
    as_json: bool = typer.Option(False, "--json", help="print JSON (SI units) instead of tables"),
    plot: Path | None = typer.Option(None, "--plot", help="draw a sketch of the cluster to this image file"),
    calibration: list[str] = typer.Option([], "--calibration", help="overlay YAML applied on top of the catalog"),
) -> None:
    """Build a cluster topology: switches by tier, cables, cost, power and bisection bandwidth."""
    plot = check_output_path(plot, "--plot", PLOT_SUFFIXES)
    spec = cluster_spec(system, nodes, fabric, ib, eth, switch, tiers, rail_optimized, oversubscription, node_cable,
                        torus_dims, nodes_per_switch)
    topo = build_topology(spec, load_catalog(*calibration))
    bom = topo.bom()
    if plot is not None:
        from fabricsim.topology.sketch import sketch

        sketch(topo, plot)
    if as_json:
        print_json(topo_json(topo, bom))
        return
    summary, items = topo_tables(topo, bom)
    console.print(summary)
    console.print(items)
    for note in bom.notes:
        console.print(f"[yellow]{note}[/]" if note.startswith("warning:") else f"[dim]{note}[/]")
    if plot is not None:
        console.print(f"[dim]sketch written to {plot}[/]")
