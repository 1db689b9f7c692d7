"""`fabricsim catalog`: the hardware catalog as tables or JSON."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

import typer
from rich.table import Table

from fabricsim import units
from fabricsim.catalog import Catalog, load_catalog
from fabricsim.cli.output import console, print_json, spec_errors


class Category(StrEnum):
    gpus = "gpus"
    links = "links"
    switches = "switches"
    nics = "nics"
    cables = "cables"
    systems = "systems"


def _opt(value: Any, fmt: Callable[[Any], str]) -> str:
    return "-" if value is None else fmt(value)


def _usd(value: float | None) -> str:
    return _opt(value, lambda v: f"${v:,.0f}")


def _watts(value: float | None) -> str:
    return _opt(value, lambda v: f"{v / 1000:.3g} kW" if v >= 1000 else f"{v:.0f} W")


def _verified(entry: Any) -> str:
    return "yes" if entry.verified else "[yellow]no[/]"


Column = tuple[str, Callable[[Any, Catalog], str]]

COLUMNS: dict[Category, list[Column]] = {
    Category.gpus: [
        ("id", lambda e, c: e.id),
        ("BF16 dense", lambda e, c: units.format_flops(e.bf16_flops_per_s)),
        ("FP8 dense", lambda e, c: _opt(e.fp8_flops_per_s, units.format_flops)),
        ("HBM", lambda e, c: f"{e.hbm_bytes / 2**30:.0f} GiB"),
        ("HBM BW", lambda e, c: units.format_rate(e.hbm_bytes_per_s)),
        ("matmul eff.", lambda e, c: _opt(e.matmul_efficiency, lambda m: f"{m.value:.1%}"
                                           + ("" if m.verified else " [yellow](unverified)[/]"))),
        ("TDP", lambda e, c: _watts(e.tdp_w)),
        ("NVLink", lambda e, c: f"{e.nvlink} x{e.nvlink_links}" if e.nvlink else "-"),
        ("NVLink/GPU (both dirs)", lambda e, c: _opt(c.nvlink_bytes_per_s(e), units.format_rate)),
        ("price", lambda e, c: _usd(e.price_usd)),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.links: [
        ("id", lambda e, c: e.id),
        ("kind", lambda e, c: e.kind),
        ("unit", lambda e, c: e.unit),
        ("per direction", lambda e, c: units.format_rate(e.bytes_per_s)),
        ("bits/s", lambda e, c: units.format_rate(e.bytes_per_s, bits=True)),
        ("latency", lambda e, c: units.format_duration(e.latency_s)),
        ("max domain", lambda e, c: _opt(e.max_domain_gpus, str)),
        ("status", lambda e, c: e.status),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.switches: [
        ("id", lambda e, c: e.id),
        ("kind", lambda e, c: e.kind),
        ("radix", lambda e, c: str(e.radix)),
        ("port rate", lambda e, c: units.format_rate(e.port_bytes_per_s, bits=e.kind in ("infiniband", "ethernet"))),
        ("latency", lambda e, c: units.format_duration(e.latency_s)),
        ("SHARP", lambda e, c: e.sharp_version or ("yes" if e.sharp else "no")),
        ("price", lambda e, c: _usd(e.price_usd)),
        ("power", lambda e, c: _watts(e.power_w)),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.nics: [
        ("id", lambda e, c: e.id),
        ("link", lambda e, c: e.link),
        ("ports", lambda e, c: str(e.ports)),
        ("port rate", lambda e, c: units.format_rate(e.port_bytes_per_s, bits=True)),
        ("host", lambda e, c: e.host_pcie),
        ("price", lambda e, c: _usd(e.price_usd)),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.cables: [
        ("id", lambda e, c: e.id),
        ("medium", lambda e, c: e.medium),
        ("max length", lambda e, c: f"{e.max_length_m:g} m"),
        ("transceivers", lambda e, c: str(e.transceivers)),
        ("price", lambda e, c: _usd(e.price_usd)),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.systems: [
        ("id", lambda e, c: e.id),
        ("GPU", lambda e, c: e.gpu),
        ("GPUs/node", lambda e, c: str(e.gpus_per_node)),
        ("intra-node", lambda e, c: e.intra),
        ("NVLink domain", lambda e, c: str(e.nvlink_domain_gpus)
            + (f" (bridged {e.nvlink_bridge_gpus}s)" if e.nvlink_bridge_gpus else "")),
        ("NICs", lambda e, c: f"{e.nics_per_node} x {e.nic} "
            f"({units.format_rate(c.nic(e.nic).port_bytes_per_s, bits=True)})"),
        ("PCIe", lambda e, c: e.pcie),
        ("node price", lambda e, c: _usd(e.price_usd) + (f" ({e.price_date})" if e.price_date else "")),
        ("node power", lambda e, c: _watts(e.power_w)),
        ("verified", lambda e, c: _verified(e)),
    ],
}


def catalog_table(catalog: Catalog, category: Category) -> Table:
    """A rich table of one catalog category."""
    table = Table(title=f"catalog: {category.value}", header_style="bold")
    columns = COLUMNS[category]
    for header, _ in columns:
        table.add_column(header)
    entries: dict[str, Any] = getattr(catalog, category.value)
    for entry in entries.values():
        table.add_row(*(fmt(entry, catalog) for _, fmt in columns))
    return table


def _entry_json(catalog: Catalog, category: Category, entry: Any) -> dict[str, Any]:
    """One entry as JSON (SI units), with the derived figures the table prints: per-GPU NVLink both directions."""
    data: dict[str, Any] = entry.model_dump(mode="json")
    if category is Category.gpus:
        data["nvlink_bytes_per_s"] = catalog.nvlink_bytes_per_s(entry)
    return data


@spec_errors
def catalog_command(
    category: Category | None = typer.Argument(None, help="gpus, links, switches, nics, cables or systems"),
    as_json: bool = typer.Option(False, "--json", help="print JSON (SI units) instead of tables"),
    calibration: list[str] = typer.Option([], "--calibration", help="overlay YAML applied on top of the catalog"),
) -> None:
    """Show the hardware catalog: every figure with its source."""
    catalog = load_catalog(*calibration)
    categories = [category] if category else list(Category)
    if as_json:
        data = {c.value: [_entry_json(catalog, c, e) for e in getattr(catalog, c.value).values()]
                for c in categories}
        print_json(data[category.value] if category else data)
        return
    for c in categories:
        console.print(catalog_table(catalog, c))
    console.print("[dim]Sources: `fabricsim catalog CATEGORY --json` lists each entry's source.[/]")
