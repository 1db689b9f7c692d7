"""`fabricsim catalog`: the hardware catalog, model presets and collective tunings as tables, JSON or CSV."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from fabricsim import units
from fabricsim.cli.output import (
    FormatOpt,
    JsonOpt,
    command_inputs,
    console,
    emit,
    new_table,
    output_format,
    spec_errors,
)

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.catalog import Catalog


class Category(StrEnum):
    """What `fabricsim catalog` can list: hardware categories, model presets and collective tunings."""

    gpus = "gpus"
    links = "links"
    switches = "switches"
    nics = "nics"
    cables = "cables"
    systems = "systems"
    models = "models"
    tunings = "tunings"
    engines = "engines"
    frameworks = "frameworks"
    failures = "failures"
    storage = "storage"
    storage_servers = "storage-servers"
    congestion = "congestion"
    cooling = "cooling"


HARDWARE = (Category.gpus, Category.links, Category.switches, Category.nics, Category.cables, Category.systems)


def _opt(value: Any, fmt: Callable[[Any], str]) -> str:
    return "-" if value is None else fmt(value)


def _usd(value: float | None) -> str:
    return _opt(value, lambda v: f"${v:,.0f}")


def _watts(value: float | None) -> str:
    return _opt(value, lambda v: f"{v / 1000:.3g} kW" if v >= 1000 else f"{v:.0f} W")


def _verified(entry: Any) -> str:
    return "yes" if entry.verified else "[yellow]no[/]"


Column = tuple[str, Callable[[Any, Any], str]]

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
        ("status", lambda e, c: e.status + (", co-packaged optics" if e.optics == "co-packaged" else "")),
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
        ("status", lambda e, c: e.status),
        ("cooling", lambda e, c: e.cooling),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.models: [
        ("id", lambda e, c: e.id),
        ("layers", lambda e, c: str(e.model.layers)),
        ("hidden", lambda e, c: str(e.model.hidden)),
        ("heads (kv)", lambda e, c: f"{e.model.heads} ({e.model.kv_heads})"),
        ("vocab", lambda e, c: str(e.model.vocab)),
        ("MoE", lambda e, c: f"{e.model.moe.experts} experts, top {e.model.moe.top_k}" if e.model.moe else "-"),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.tunings: [
        ("id", lambda e, c: e.id),
        ("name", lambda e, c: e.name),
        ("NVLS eff.", lambda e, c: f"{e.nvls_efficiency:.2f}"),
        ("tree eff.", lambda e, c: f"{e.tree_efficiency:.2f}"),
        ("p2p eff.", lambda e, c: f"{e.p2p_efficiency:.2f}"),
        ("launch", lambda e, c: units.format_duration(e.launch_s)),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.failures: [
        ("id", lambda e, c: e.id),
        ("name", lambda e, c: e.name),
        ("per", lambda e, c: e.per),
        ("interruptions/h", lambda e, c: f"{e.rate_per_hour:.4g}"),
        ("planned", lambda e, c: "yes" if e.planned else "no"),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.storage: [
        ("id", lambda e, c: e.id),
        ("unit", lambda e, c: f"{e.unit_gpus} GPUs"),
        ("read/unit", lambda e, c: units.format_rate(e.read_bytes_per_s)),
        ("write/unit", lambda e, c: units.format_rate(e.write_bytes_per_s)),
        ("read/GPU", lambda e, c: units.format_rate(e.gpu_read_bytes_per_s)),
        ("write/GPU", lambda e, c: units.format_rate(e.gpu_write_bytes_per_s)),
        ("price", lambda e, c: _usd(e.price_usd)),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.storage_servers: [
        ("id", lambda e, c: e.id),
        ("read", lambda e, c: units.format_rate(e.read_bytes_per_s)),
        ("write", lambda e, c: units.format_rate(e.write_bytes_per_s)),
        ("capacity", lambda e, c: units.format_bytes(e.capacity_bytes)),
        ("ports", lambda e, c: f"{e.ports} x {units.format_rate(e.port_bytes_per_s, bits=True)}"),
        ("min", lambda e, c: str(e.min_servers)),
        ("KV tier latency", lambda e, c: "-" if e.kv_latency_s is None else units.format_duration(e.kv_latency_s)),
        ("price", lambda e, c: _usd(e.price_usd)),
        ("power", lambda e, c: f"{e.power_w:,.0f} W" if e.power_w is not None else "-"),
        ("verified", lambda e, c: _verified(e)),
    ],
    Category.congestion: [
        ("id", lambda e, c: e.id),
        ("fabric", lambda e, c: e.fabric),
        ("flow control", lambda e, c: e.flow_control),
        ("reaction", lambda e, c: "none (no rate control)" if e.reaction_s is None
         else "at once" if e.reaction_s == 0 else units.format_duration(e.reaction_s)),
        ("verified", lambda e, c: _verified(e)),
        ("behaviour", lambda e, c: e.name),
    ],
    Category.cooling: [
        ("id", lambda e, c: e.id),
        ("rack power", lambda e, c: _watts(e.rack_power_w.value)),
        ("PUE", lambda e, c: f"{e.pue.value:g}"),
        ("floor/rack", lambda e, c: f"{e.floor_m2_per_rack.value:g} m2"),
        ("rack units", lambda e, c: f"{e.rack_units.value}U"),
        ("hosts", lambda e, c: ", ".join(e.hosts)),
        ("verified", lambda e, c: _verified(e)),
        ("hall", lambda e, c: e.name),
    ],
    Category.frameworks: [
        ("id", lambda e, c: e.id),
        ("settings", lambda e, c: ", ".join(f"{k}={_setting(v.value)}" for k, v in e.settings.items())
         or "fabricsim's defaults"),
        ("read from", lambda e, c: e.version),
        ("stack", lambda e, c: e.name),
    ],
    Category.engines: [
        ("id", lambda e, c: e.label),
        ("engine", lambda e, c: e.name + (f" ({e.settings.label})" if e.settings.label else "")),
        ("KV memory", lambda e, c: f"{e.settings.kv_memory.fraction:g} of {e.settings.kv_memory.of}"),
        ("batch", lambda e, c: _sized(e.settings.max_batch.sequences, e.settings.max_batch.small_gpu_sequences)),
        ("prefill chunk", lambda e, c: _sized(e.settings.max_batched_tokens.tokens,
                                              e.settings.max_batched_tokens.small_gpu_tokens)),
        ("host/step", lambda e, c: e.settings.host.step_s + (" (overlapped)" if e.settings.host.overlapped else "")),
        ("scheduler", lambda e, c: _scheduler(e.settings.scheduler)),
        ("kernels", lambda e, c: _kernels(e.settings.kernels)),
        ("verified", lambda e, c: "no" if not (e.settings.kv_memory.verified and e.settings.host.verified)
         else "yes"),
    ],
}


def _setting(value: Any) -> str:
    """A profile setting as a flag reads: on/off for a switch."""
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def _scheduler(s: Any) -> str:
    """An engine's scheduler in a few words: iteration policy, prompts, KV admission, prefix cache."""
    return (f"{s.policy.replace('_', ' ')}, {'chunked' if s.chunked_prefill else 'whole'} prompts, "
            f"{'reserve whole request' if s.admission == 'reserve_full' else 'preempt on demand'}"
            f"{', prefix cache' if s.prefix_cache else ''}")


KERNEL_WORDS = {"gqa_decode": ("GQA decode", "MHA decode"), "moe_sm80": ("SM80 MoE GEMMs", "native MoE GEMMs"),
                "fixed_gemm_tiles": ("fixed GEMM tiles", "tuned tiles"),
                "fused_gate_up": ("fused gate/up", "split gate/up"), "fp8_mla_decode": ("FP8 MLA decode", "BF16 MLA")}


def _kernels(k: Any) -> str:
    """Where a release's kernels differ from today's engines (``MODERN_KERNELS``), in a few words; 'current'."""
    from fabricsim.inference import MODERN_KERNELS

    words = [KERNEL_WORDS[name][0 if k.runs(name) else 1] for name, modern in MODERN_KERNELS.items()
             if k.runs(name) != modern]
    return ", ".join(words) or "current"


NUMERIC = {"BF16 dense", "FP8 dense", "HBM", "HBM BW", "TDP", "NVLink/GPU (both dirs)", "price", "per direction",
           "bits/s", "latency", "radix", "port rate", "power", "ports", "max length", "transceivers", "GPUs/node",
           "node price", "node power", "rack power", "PUE", "floor/rack", "rack units",
           "layers", "hidden", "vocab", "NVLS eff.", "tree eff.", "p2p eff.", "launch"}
# Dropped first on a console under 120 columns (never numbers cut).
SECONDARY = {"cooling", "matmul eff.", "NVLink", "verified", "status", "unit", "host", "PCIe", "intra-node", "SHARP",
             "date", "bits/s"}


def _sized(large: int, small: int | None) -> str:
    return f"{large:,}" if small is None else f"{large:,} ({small:,} on small GPUs)"


def _entries(catalog: Catalog, category: Category) -> dict[str, Any]:
    """The entries of one category by id (model presets come from the workload package, engine profiles, one per
    release range, from the inference package)."""
    if category is Category.engines:
        from fabricsim.inference import EngineProfile, serving_engines

        profiles = (EngineProfile(engine=e.id, name=e.name, version=v.since, settings=v)
                    for e in serving_engines().values() for v in e.versions)
        return {p.label: p for p in profiles}
    if category is Category.frameworks:
        from fabricsim.training import frameworks

        return dict(frameworks())
    if category is Category.congestion:
        return dict(catalog.congestion_controls)
    if category is Category.models:
        from fabricsim.model import list_presets, preset

        return {name: preset(name) for name in list_presets()}
    result: dict[str, Any] = getattr(catalog, category.value.replace("-", "_"))
    return result


def _is_roadmap(entry: Any) -> bool:
    """Whether a catalog entry is announced but not shipping (its ``status``)."""
    return getattr(entry, "status", None) == "roadmap"


def catalog_table(catalog: Catalog, category: Category, width: int | None = None, only_roadmap: bool = False) -> Table:
    """A rich table of one catalog category that fits the console: the id column is never folded, and columns
    are dropped (secondary ones first, then from the right) until the rest fit on one line each."""
    from fabricsim.cli.output import fit_columns, num_column, text_column

    entries = [e for e in _entries(catalog, category).values() if not only_roadmap or _is_roadmap(e)]
    cells = {header: [fmt(e, catalog) for e in entries] for header, fmt in COLUMNS[category]}
    headers = fit_columns(cells, console.width if width is None else width, keep=("id",),
                          drop_first=tuple(h for h in cells if h in SECONDARY))
    table = new_table(title=f"catalog: {category.value}", header_style="bold")
    for header in headers:
        if header == "id":
            table.add_column(header, no_wrap=True)
        elif header in NUMERIC:
            num_column(table, header)
        else:
            text_column(table, header)
    for i in range(len(entries)):
        table.add_row(*(cells[h][i] for h in headers))
    if len(headers) < len(cells):
        table.caption = f"columns left out at this width: {', '.join(h for h in cells if h not in headers)} (--json)"
    return table


def _entry_json(catalog: Catalog, category: Category, entry: Any) -> dict[str, Any]:
    """One entry as JSON (SI units), with the derived figures the table prints: per-GPU NVLink both directions."""
    data: dict[str, Any] = entry.model_dump(mode="json")
    if category is Category.engines:
        data = {"id": entry.label, **data}
    if category is Category.models:
        data["model"] = entry.model.model_dump(mode="json")
    if category is Category.gpus:
        data["nvlink_bytes_per_s"] = catalog.nvlink_bytes_per_s(entry)
    return data


def _hf_configs() -> list[dict[str, Any]]:
    """The Hugging Face configs shipped with fabricsim, each imported: architecture, our parameter count beside
    the published one, and what the import ignores (the ``hf_configs`` list of ``catalog models --json``)."""
    from fabricsim.model import import_hf_config, shipped_configs

    out = []
    for card in shipped_configs():
        imported = import_hf_config(card.path)
        out.append({"id": card.id, "file": str(card.path), "repo": card.repo, "card": card.card,
                    "architecture": imported.architecture, "params": imported.spec.parameters().total,
                    "published_params": card.params, "source": card.source, "notes": card.notes,
                    "ignored": list(imported.ignored)})
    return out


HF_USAGE = ("[dim]Hugging Face configs: --model takes a config.json, a folder holding one, a models--org--name "
            "hub cache entry, or hf:org/name from the local cache ($HF_HUB_CACHE, else $HF_HOME/hub, else "
            "~/.cache/huggingface/hub; never downloaded). Fields the spec cannot hold are named in an 'ignored:' "
            "line.[/]")


def hf_configs_table(configs: list[dict[str, Any]]) -> Table:
    """The shipped Hugging Face configs: id, architecture, our parameter count and the published one."""
    from fabricsim.cli.output import num_column, text_column

    table = new_table(title="Hugging Face configs shipped with fabricsim (--model FILE)", header_style="bold")
    table.add_column("id", no_wrap=True)
    text_column(table, "architecture")
    num_column(table, "params")
    num_column(table, "published")
    for c in configs:
        table.add_row(c["id"], c["architecture"], f"{c['params'] / 1e9:,.2f} B",
                      f"{c['published_params'] / 1e9:,.2f} B")
    if configs:
        table.caption = f"files: {Path(configs[0]['file']).parent}/ID.json"
    return table


@spec_errors
def catalog_command(
    category: Category | None = typer.Argument(None, help="gpus, links, switches, nics, cables, systems, models "
                                               "(model presets for --model), tunings (collective model "
                                               "parameters), engines (serving engines for infer --engine), "
                                               "frameworks (training stacks for train --framework), "
                                               "failures (interruption rates per part), storage (checkpoint "
                                               "tiers), storage-servers or congestion (fabric behaviours for "
                                               "--cc); default: the hardware categories"),
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
    calibration: list[str] = typer.Option([], "--calibration", help="overlay YAML applied on top of the catalog"),
    roadmap: bool = typer.Option(False, "--roadmap/--no-roadmap", help="only the roadmap entries (announced, not "
                                 "shipping: searched only when named), each with the figures that are estimates"),
) -> None:
    """Show the hardware catalog, model presets and collective tunings: every figure with its source."""
    from fabricsim.catalog import load_catalog

    inputs = command_inputs(locals())
    form = output_format(fmt, as_json)
    catalog = load_catalog(*calibration)
    categories = [category] if category else list(HARDWARE)
    if roadmap:
        categories = [c for c in categories if any(_is_roadmap(e) for e in _entries(catalog, c).values())]
    data = {c.value: [_entry_json(catalog, c, e) for e in _entries(catalog, c).values()
                      if not roadmap or _is_roadmap(e)] for c in categories}
    if not categories:
        data = {"roadmap": []}
    rows = [{"category": c, **e} for c, items in data.items() for e in items] if len(categories) > 1 else \
        data[categories[0].value]
    hf_configs = _hf_configs() if Category.models in categories else None
    if emit(form, data if hf_configs is None else {**data, "hf_configs": hf_configs}, inputs, rows):
        return
    for c in categories:
        console.print(catalog_table(catalog, c, only_roadmap=roadmap))
        if roadmap:
            for e in _entries(catalog, c).values():
                if _is_roadmap(e) and e.estimated:
                    console.print(f"[dim]{e.id}: estimated {', '.join(e.estimated)} (method: its notes, --json)[/]")
    if roadmap and not categories:
        console.print("no roadmap entries in this category")
    if hf_configs is not None:
        console.print(hf_configs_table(hf_configs))
        console.print(HF_USAGE)
    console.print("[dim]Sources: `fabricsim catalog CATEGORY --json` lists each entry's source; `fabricsim "
                  "catalog models`, `tunings`, `engines`, `frameworks`, `failures`, `storage`, `storage-servers`, "
                  "`congestion` and `cooling` list model presets, collective tunings, serving engines, training "
                  "stacks, failure rates, storage tiers and servers, fabric behaviours and data-hall cooling "
                  "classes.[/]")
    if Category.systems in categories:
        joinable = [sid for sid, s in catalog.systems.items() if catalog.why_not_joinable(s) is None]
        if joinable:
            console.print(f"[dim]Multi-rack NVLink domains (roadmap): racks of {', '.join(joinable)} join into one "
                          f"NVLink domain through a second switch tier as --system {joinable[0]}@144 (or @216 ... "
                          "@576), or topo --nvlink-domain 144.[/]")
