"""`fabricsim topo`: build a cluster topology and print its bill of materials (table or JSON), optionally a sketch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.cli.options import (
    CALIBRATION_LIST,
    CLUSTER,
    PRINT,
    REPORT,
    TOPO_STORAGE_OPTIONS,
    Decl,
    declared,
    run_options,
)

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.topology import BillOfMaterials, Topology

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


def _facility_text(block: dict[str, Any]) -> str:
    """Facility power, compute racks and floor in one cell (the JSON's ``facility`` block)."""
    if not block:
        return "-"
    if "error" in block or block["facility_power_w"] is None:
        return block.get("error") or "unknown (a power is missing)"
    racks = "racks not counted" if block["racks"] is None else \
        f"{block['racks']} compute racks, {block['floor_m2']:.0f} m2"
    return f"{block['facility_power_w'] / 1e6:.2f} MW at PUE {block['pue']:g} ({block['cooling']}-cooled); {racks}"


def topo_tables(topo: Topology, bom: BillOfMaterials, facility: dict[str, Any] | None = None) -> tuple[Table, Table]:
    """A summary table and a line-item table."""
    summary = ui.new_table(title=f"topology: {bom.nodes} x {bom.system}", header_style="bold", show_header=False)
    ui.text_column(summary, "what")
    ui.text_column(summary, "value")
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
        ("facility", _facility_text(facility or {})),
        ("links / endpoints", f"{topo.num_links} directed links, {topo.num_endpoints} endpoints"),
    ]
    if bom.storage is not None:
        rows.insert(-4, ("storage", _storage_text(bom)))
    for key, value in rows:
        summary.add_row(key, value)
    items = ui.new_table(title="bill of materials", header_style="bold")
    cols = [c for c in ("item", "role", "count", "unit price", "date", "unit power", "verified")
            if not (ui.narrow() and c in ("date", "verified"))]
    for col in cols:
        if col in ("count", "unit price", "unit power"):
            ui.num_column(items, col)
        else:
            ui.text_column(items, col)
    for i in bom.items:
        cells = {"item": i.item, "role": i.role, "count": f"{i.count:,}", "unit price": _usd(i.unit_price_usd),
                 "date": i.price_date or "-", "unit power": _watts(i.unit_power_w),
                 "verified": "yes" if i.verified else "[yellow]no[/]"}
        items.add_row(*(cells[c] for c in cols))
    return summary, items


TOPO_STORAGE: dict[str, Decl] = {
    **TOPO_STORAGE_OPTIONS,
    "plot": (Annotated[Path | None, typer.Option("--plot", help="draw a sketch of the cluster to this image file")],
             None),
    "calibration": CALIBRATION_LIST,
}
TOPO = (CLUSTER, PRINT, TOPO_STORAGE, REPORT)


@declared(*TOPO)
@ui.spec_errors
def topo_command(**options: Any) -> None:
    """Build a cluster topology: switches by tier, cables, cost, power and bisection bandwidth."""
    inputs, form, plot, report = run_options(TOPO, options)
    from fabricsim.api import topology

    result = topology(**ui.api_arguments(topology, inputs))
    topo, bom = result.topology, result.bom
    assert topo is not None and bom is not None
    if plot is not None:
        from fabricsim.topology import sketch

        sketch(topo, plot)
    ui.write_command_report(report, result, inputs)
    if ui.emit(form, result.data, inputs, result.rows):
        return
    summary, items = topo_tables(topo, bom, result.data.get("facility"))
    ui.console.print(summary)
    ui.console.print(items)
    for note in bom.notes:
        ui.console.print(f"[yellow]{note}[/]" if note.startswith("warning:") else f"[dim]{note}[/]")
    if plot is not None:
        ui.console.print(f"[dim]sketch written to {plot}[/]")
