"""`fabricsim topo`: build a cluster topology and print its bill of materials (table or JSON), optionally a sketch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from fabricsim import units
from fabricsim.catalog import load_catalog
from fabricsim.cli.output import console, print_json, spec_errors
from fabricsim.errors import SpecError
from fabricsim.topology import FABRICS, LINK_KINDS, BillOfMaterials, ClusterSpec, Topology, build_topology


def fabric_link(ib: str | None, eth: str | None, switch: str | None) -> str | None:
    """The spec's ``link`` from the CLI's alternatives: --ib ndr -> ib-ndr, --eth 400g -> eth-400g, --switch id;
    None when none is given (the system's own NIC generation)."""
    given = [v for v in (ib, eth, switch) if v]
    if len(given) > 1:
        raise SpecError("--ib, --eth and --switch are alternatives; give one", field="link")
    if switch:
        return switch
    if eth:
        rate = eth.strip().lower().removeprefix("eth-")
        return f"eth-{rate if rate.endswith('g') else rate + 'g'}"
    if ib:
        return f"ib-{ib.strip().lower().removeprefix('ib-')}"
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
    system: str = typer.Option("dgx-h100", "--system", help="catalog system id (fabricsim catalog systems)"),
    nodes: int = typer.Option(1, "--nodes", help="compute nodes (servers, or racks for NVL72)"),
    fabric: str = typer.Option("fat-tree", "--fabric", help=f"one of {', '.join(FABRICS)}"),
    ib: str | None = typer.Option(None, "--ib", help="InfiniBand: hdr, ndr, xdr (default: the system NIC's)"),
    eth: str | None = typer.Option(None, "--eth", help="Ethernet fabric instead: 400g or 800g"),
    switch: str | None = typer.Option(None, "--switch", help="fabric switch id instead (qm9700, sn5600, ...)"),
    tiers: int | None = typer.Option(None, "--tiers", help="fat-tree tiers 1-3 (default: fewest that fit)"),
    rail_optimized: bool = typer.Option(True, "--rail-optimized/--no-rail-optimized",
                                        help="NIC i of every node on rail leaf i (fat tree)"),
    oversubscription: float = typer.Option(1.0, "--oversubscription", help="leaf node ports : uplinks (>= 1)"),
    node_cable: str = typer.Option("optical", "--node-cable", help="optical or copper NIC-to-switch cables"),
    torus_dims: str | None = typer.Option(None, "--torus-dims", help="torus switches per dimension, e.g. 4x4x2"),
    nodes_per_switch: int = typer.Option(1, "--nodes-per-switch", help="torus: nodes per torus switch"),
    as_json: bool = typer.Option(False, "--json", help="print JSON (SI units) instead of tables"),
    plot: Path | None = typer.Option(None, "--plot", help="draw a sketch of the cluster to this image file"),
    calibration: list[str] = typer.Option([], "--calibration", help="overlay YAML applied on top of the catalog"),
) -> None:
    """Build a cluster topology: switches by tier, cables, cost, power and bisection bandwidth."""
    spec = ClusterSpec.parse({
        "system": system, "nodes": nodes, "fabric": fabric, "link": fabric_link(ib, eth, switch), "tiers": tiers,
        "rail_optimized": rail_optimized, "oversubscription": oversubscription, "node_cable": node_cable,
        "torus_dims": parse_dims(torus_dims), "nodes_per_switch": nodes_per_switch,
    })
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
