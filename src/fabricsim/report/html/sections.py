"""The HTML report's sections shared by several commands: the inputs, the answer (big figures with their bands),
the plan, time by layer, memory, a bill of materials, assumptions and sources, and every key no section showed.
Each builder reads what it needs from the command's JSON document and returns None when the data is not there."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fabricsim.report.html.charts as hc
from fabricsim.report.html.page import (
    Charts,
    Section,
    bullet_list,
    details,
    esc,
    flatten,
    fmt,
    kv_grid,
    kv_table,
    paragraph,
    rows_table,
    title_case,
)

LAYER_ORDER = ("compute", "hbm", "nvlink", "pcie", "infiniband", "ethernet", "pipeline_bubble", "other")


def is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass
class Doc:
    """A command's JSON document, read tolerantly: absent or ill-typed keys read as None or empty, and every
    top-level key a section reads is remembered (the rest go to 'All results')."""

    data: Mapping[str, Any]
    used: set[str] = field(default_factory=lambda: {"inputs"})

    def get(self, key: str) -> Any:
        self.used.add(key)
        return self.data.get(key)

    def num(self, key: str) -> float | None:
        value = self.get(key)
        return float(value) if is_num(value) else None

    def map(self, key: str) -> Mapping[str, Any]:
        value = self.get(key)
        return value if isinstance(value, Mapping) else {}

    def rows(self, key: str) -> list[Mapping[str, Any]]:
        value = self.get(key)
        return [r for r in value if isinstance(r, Mapping)] if isinstance(value, list) else []

    def text(self, key: str) -> str | None:
        value = self.get(key)
        return str(value) if isinstance(value, str) and value else None


def band_of(source: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    band = source.get(f"{key}_band")
    return band if isinstance(band, Mapping) and is_num(band.get("low")) and is_num(band.get("high")) else None


def band_text(key: str, band: Mapping[str, Any] | None) -> str:
    if band is None:
        return ""
    level = band.get("level")
    cases = band.get("cases", band.get("pairs"))
    where = f" · {cases} published cases" if cases is not None else ""
    return (f"{level:.0%} band" if is_num(level) else "band") + (f" {fmt(key, band['low'])} – "
            f"{fmt(key, band['high'])}{where}")


@dataclass(frozen=True)
class Card:
    label: str
    value: str
    note: str = ""
    main: bool = False
    hot: bool = False


def card_html(card: Card) -> str:
    note = f'<div class="band">{esc(card.note)}</div>' if card.note else ""
    css = "card" + (" main" if card.main else "") + (" hot" if card.hot else "")
    return (f'<div class="{css}"><div class="label">{esc(card.label)}</div>'
            f'<div class="value">{esc(card.value)}</div>{note}</div>')


def figure_card(source: Mapping[str, Any], key: str, name: str, *, main: bool = False) -> Card | None:
    """A card for a number of ``source`` with its band, or None when absent."""
    value = source.get(key)
    if not is_num(value):
        return None
    from fabricsim.validation import shown_figure

    band = band_of(source, key)
    assert isinstance(value, int | float)
    return Card(name, fmt(key, shown_figure(float(value), band)), band_text(key, band), main)


def answer_section(cards: Sequence[Card | None], *, bottleneck: object = None, verdicts: Sequence[str] = (),
                   fits: object = None, notes: Sequence[str] = (), bands: Sequence[tuple[str, str, float,
                   Mapping[str, Any]]] = (), charts: Charts | None = None) -> Section:
    """The answer first: the big figures, the bottleneck, the verdict sentences, then the bands chart."""
    shown = [c for c in cards if c is not None]
    if bottleneck:
        shown.insert(1 if shown and shown[0].main else 0,
                     Card("bottleneck", str(bottleneck), "the layer that bounds the answer", hot=True))
    body = f'<div class="cards">{"".join(card_html(c) for c in shown)}</div>'
    if isinstance(fits, bool):
        body += (f'<p>memory <span class="pill {"ok" if fits else ""}">{"fits" if fits else "does not fit"}'
                 "</span></p>")
    body += "".join(f'<div class="verdict">{esc(v)}</div>' for v in verdicts if v)
    body += bullet_list(notes)
    if bands and charts is not None:
        body += charts.add(hc.band_chart(bands), height=max(200, 70 + 44 * len(bands)))
        body += paragraph("Bands: the interval the model's error on comparable published measurements allows "
                          "around each prediction (hover for the figures).", "dim")
    return Section("answer", "Answer", body)


def top_bands(source: Mapping[str, Any], names: Mapping[str, str] | None = None) -> list[tuple[str, str, float,
                                                                                             Mapping[str, Any]]]:
    """(label, key, value, band) of every number of ``source`` that carries a ``*_band``."""
    out = []
    for key, value in source.items():
        band = band_of(source, key) if is_num(value) and value else None
        if band is not None:
            out.append(((names or {}).get(key, title_case(key)), key, float(value), band))
    return out


def inputs_section(doc: Doc) -> Section | None:
    """The options as given: the ones set first, then those left to their default or to the search."""
    inputs = doc.data.get("inputs")
    if not isinstance(inputs, Mapping) or not inputs:
        return None
    given = [(k, v) for k, v in inputs.items() if v is not None and v != [] and v != {}]
    unset = [k for k, v in inputs.items() if v is None or v == [] or v == {}]
    body = kv_grid(flatten(dict(given)))
    if unset:
        body += paragraph("Left unset (defaults, or chosen by the search): " + ", ".join(unset), "dim")
    return Section("inputs", "Inputs", body)


def plan_section(doc: Doc) -> Section | None:
    plan, chosen = doc.map("plan"), doc.map("chosen")
    if not plan and not chosen:
        return None
    body = kv_grid(flatten(dict(plan))) if plan else ""
    if chosen:
        note = chosen.get("note")
        if note:
            body += f'<div class="verdict">{esc(note)}</div>'
        rest = {k: v for k, v in chosen.items() if k != "note"}
        body += details("how the plan was chosen", kv_table(flatten(rest)))
    return Section("plan", "Parallel plan", body)


def _layers(*series: Mapping[str, Any]) -> list[str]:
    keys = list(dict.fromkeys(k for s in series for k in s))
    ordered = [k for k in LAYER_ORDER if k in keys] + [k for k in keys if k not in LAYER_ORDER]
    return [k for k in ordered if any(is_num(s.get(k)) and s.get(k) for s in series)]


def breakdown_section(doc: Doc, charts: Charts, command: str) -> Section | None:
    """Time by layer: a training step's exposed and overlapped seconds; an inference request's prefill and decode."""
    total, bottleneck = doc.map("breakdown_s"), doc.data.get("bottleneck")
    exposed, overlapped = doc.map("exposed_s"), doc.map("overlapped_s")
    prefill, decode, draft = doc.map("prefill_s"), doc.map("decode_step_s"), doc.map("draft_step_s")
    if not (total or exposed):
        return None
    body = ""
    if command == "infer" and prefill:
        layers = _layers(total, prefill)
        pre = [float(prefill.get(k) or 0.0) for k in layers]
        dec = [max(float(total.get(k) or 0.0) - p, 0.0) for k, p in zip(layers, pre, strict=True)]
        body += charts.add(hc.layer_chart(layers, {"prefill": pre, "decode (all steps)": dec},
                                          title="One request's time by layer", bottleneck=str(bottleneck)),
                           height=120 + 38 * len(layers))
        rows = [{"layer": k, "per_request_s": total.get(k), "prefill_s": prefill.get(k),
                 "decode_step_s": decode.get(k), **({"draft_step_s": draft.get(k)} if any(draft.values()) else {})}
                for k in layers]
    else:
        layers = _layers(exposed or total, overlapped)
        series = ({"exposed": [float(exposed.get(k) or 0.0) for k in layers],
                   "overlapped (hidden)": [float(overlapped.get(k) or 0.0) for k in layers]} if exposed
                  else {"time": [float(total.get(k) or 0.0) for k in layers]})
        body += charts.add(hc.layer_chart(layers, series, title="Step time by layer", bottleneck=str(bottleneck),
                                          colors={"exposed": hc.HOT, "overlapped (hidden)": hc.GREY}),
                           height=120 + 38 * len(layers))
        step = doc.data.get("step_time_s")
        rows = [{"layer": k, "total_s": total.get(k), "exposed_s": exposed.get(k), "overlapped_s": overlapped.get(k),
                 **({"share_of_step": float(exposed.get(k) or 0.0) / float(step)} if is_num(step) and step else {})}
                for k in layers]
    body += rows_table(rows)
    if bottleneck:
        what = "time" if command == "infer" else "exposed time"
        body += paragraph(f"Bottleneck: {bottleneck} (the layer with the most {what}).", "dim")
    doc.used.add("bottleneck")
    return Section("breakdown", "Breakdown by layer", body)


def memory_section(doc: Doc, charts: Charts) -> Section | None:
    memory = doc.map("memory")
    doc.get("memory_per_gpu_bytes")
    parts = {k.removesuffix("_bytes").replace("_", " "): float(v) for k, v in memory.items()
             if k.endswith("_bytes") and k not in {"capacity_bytes", "usable_bytes", "total_bytes"} and is_num(v)}
    if not parts:
        return None
    capacity: Any = memory.get("usable_bytes") or memory.get("capacity_bytes")
    body = charts.add(hc.memory_chart(parts, float(capacity) if is_num(capacity) else None,
                                      title="Memory per GPU"), height=230)
    if memory.get("summary"):
        body += paragraph(memory["summary"])
    body += kv_grid((k, v) for k, v in memory.items() if k != "summary")
    return Section("memory", "Memory", body)


def bom_body(items: Sequence[Mapping[str, Any]], charts: Charts, *, title: str,
             totals: Mapping[str, Any] | None = None, notes: Sequence[object] = ()) -> str:
    """A bill of materials: totals, the cost chart, the item table, the notes."""
    body = kv_grid((k, v) for k, v in (totals or {}).items() if v is not None) if totals else ""
    if items:
        body += charts.add(hc.bom_chart(items, title=title), height=110 + 30 * len(items))
        rows = [{**i, "cost_usd": float(i.get("count") or 0) * float(i.get("unit_price_usd") or 0.0),
                 "power_w": float(i.get("count") or 0) * float(i.get("unit_power_w") or 0.0)} for i in items]
        body += rows_table(rows, [("item", "item"), ("category", "category"), ("role", "role"), ("count", "count"),
                                  ("unit_price_usd", "unit price"), ("cost_usd", "cost"),
                                  ("unit_power_w", "unit power"), ("power_w", "power"),
                                  ("price_date", "price date"), ("verified", "verified")])
    body += bullet_list(str(n) for n in notes)
    return body


def band_rows(source: Mapping[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    rows = []
    for key, band in source.items():
        if key.endswith("_band") and isinstance(band, Mapping):
            rows.append({"figure": prefix + key.removesuffix("_band"), "level": band.get("level"),
                         "cases": band.get("cases", band.get("pairs")), "bias": band.get("bias"),
                         "comparable": band.get("comparable")})
    return rows


def assumptions_section(doc: Doc, extra: Sequence[tuple[str, str]] = (),
                        band_sources: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> Section | None:
    """Assumptions and sources: where each band comes from, the command's assumptions and defaults with their
    sources, the notes and warnings."""
    body = ""
    rows = band_rows(doc.data)
    for prefix, source in band_sources:
        rows += band_rows(source, prefix)
    doc.used.update(k for k in doc.data if k.endswith("_band"))
    if rows:
        body += "<h3>Error bands</h3>" + rows_table(rows) + paragraph(
            "Each band is the spread of the model's error on the published measurements comparable to this "
            "prediction (fabricsim validate lists them); bias is the median signed error.", "dim")
    for name, band in (("comparison_band", doc.data.get("comparison_band")),):
        if isinstance(band, Mapping):
            doc.used.add(name)
            body += paragraph(f"Comparing two predictions: ratios within {fmt('x', band.get('low'))} – "
                              f"{fmt('x', band.get('high'))} ({fmt('level', band.get('level'))}, "
                              f"{band.get('pairs', '?')} published pairs, {band.get('comparable', '')}) are within "
                              "the model's error.")
    assumptions = doc.map("assumptions")
    if assumptions:
        defaults = assumptions.get("defaults")
        plain = {k: v for k, v in assumptions.items() if k != "defaults"}
        body += "<h3>Assumptions</h3>" + kv_table(flatten(plain))
        if isinstance(defaults, Mapping) and defaults:
            body += "<h3>Defaults and their sources</h3>" + rows_table(
                [{"default": k, **(v if isinstance(v, Mapping) else {"value": v})} for k, v in defaults.items()])
    peak = doc.map("mfu_peak")
    if peak:
        body += "<h3>Utilisation</h3>" + kv_table(flatten(dict(peak)))
    lines = [f"{name}: {text}" for name, text in extra if text]
    for key in ("notes", "warnings", "note"):
        value = doc.get(key)
        if isinstance(value, list):
            lines += [f"{key.rstrip('s')}: {v}" for v in value if v]
        elif isinstance(value, str) and value:
            lines.append(f"note: {value}")
    if lines:
        body += "<h3>Notes</h3>" + bullet_list(lines)
    return Section("assumptions", "Assumptions and sources", body) if body else None


def all_results_section(doc: Doc) -> Section | None:
    """Every key no section showed (a generic table), and the whole document as JSON, both collapsed."""
    rest = {k: v for k, v in doc.data.items() if k not in doc.used}
    body = ""
    if rest:
        body += details(f"All results: {len(rest)} more key(s) — " + ", ".join(rest), kv_table(flatten(rest)),
                        open_=False)
    text = json.dumps(dict(doc.data), indent=2, default=str, allow_nan=True)
    body += details("The whole JSON document", f"<pre><code>{esc(text)}</code></pre>")
    return Section("all-results", "All results", body)
