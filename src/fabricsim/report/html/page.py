"""The HTML report's page: escaping, number formatting by SI key, tables, sections, the chart registry (fixed div
ids) and the one self-contained page (CSS and plotly.js inlined, a Content-Security-Policy that forbids every
network fetch at view time)."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabricsim import units

MISSING = "—"
MAX_ROWS = 400  # rows of one generic table; the rest are counted, not drawn
FRACTION_KEYS = frozenset({"mfu", "hfu", "goodput", "slo_attainment", "checkpoint_overhead", "level", "bias",
                           "base_goodput", "memory_fraction", "utilization", "target_utilization", "prefix_hit",
                           "prefix_host", "prefix_network"})
CHART_CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": False,
                "modeBarButtonsToRemove": ["sendDataToCloud", "lasso2d", "select2d"]}
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:; "
       "connect-src 'none'; base-uri 'none'; form-action 'none'")


def esc(text: object) -> str:
    """Any value as HTML text (quotes escaped too, so it is safe in an attribute)."""
    return html.escape(str(text), quote=True)


def title_case(key: str) -> str:
    """A JSON key as a table label: ``step_time_s`` -> ``step time s`` kept recognisable (underscores to spaces)."""
    return key.replace("_", " ")


# ---- numbers by SI key -------------------------------------------------------------------------------------------

def _g(value: float, digits: int = 4) -> str:
    return f"{value:.{digits}g}"


def fmt_usd(value: float) -> str:
    """Dollars: ``$24.96M``, ``$29,468``, ``$0.0295``; a sign before the dollar."""
    sign, v = ("-", -value) if value < 0 else ("", value)
    if v >= 1e9:
        return f"{sign}${v / 1e9:,.2f}B"
    if v >= 1e6:
        return f"{sign}${v / 1e6:,.2f}M"
    if v >= 10:
        return f"{sign}${v:,.0f}"
    return f"{sign}${v:.3g}"


def fmt_watts(value: float) -> str:
    for unit, scale in (("MW", 1e6), ("kW", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value:.4g} W"


def fmt_bytes(value: float) -> str:
    """Binary units, as the memory summaries print them (GiB)."""
    for unit, scale in (("PiB", 2.0**50), ("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value:.4g} B"


def fmt_seconds(value: float) -> str:
    if value == 0:
        return "0 s"
    text = units.format_duration(value, digits=4) if value > 0 else f"{value:.4g}s"
    number = text.rstrip("numsdh")
    return f"{number} {text[len(number):]}"


def fmt_count(value: float, unit: str = "") -> str:
    """Large rates in K/M/G: ``1003640`` -> ``1.004M``."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.4g}{prefix}{unit}"
    return f"{value:.4g}{unit}"


def unit_of(key: str) -> str:
    """The unit family of a JSON key from its SI suffix: seconds, bytes, rate, flops, usd, watts, fraction, per_s."""
    k = key.lower()
    for suffix in ("_p50", "_p90", "_p99"):  # ttft_s_p90: a percentile of a time
        k = k.removesuffix(suffix)
    if "bytes_per_s" in k:
        return "rate"
    if "flops_per_s" in k:
        return "flops"
    if k == "level":
        return "level"
    if k.startswith("speedup"):
        return "times"
    if k.startswith("percent"):
        return "percent"
    if k.endswith("_usd") or k.startswith("usd_") or "_usd_" in k:
        return "usd"
    if k.endswith("_bytes") or k == "bytes":
        return "bytes"
    if k.endswith("_w"):
        return "watts"
    if k.endswith("_mwh"):
        return "mwh"
    if k.endswith("per_s") or "_per_s_" in k or k.endswith("_rps"):
        return "per_s"
    if k.endswith("_s") or k == "s":
        return "seconds"
    if k in FRACTION_KEYS or k.endswith("_fraction") or k.endswith("_share") or k.startswith("share_"):
        return "fraction"
    return ""


def fmt(key: str, value: Any) -> str:
    """A value for a table cell (plain text, not escaped): its unit from its key."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        kind = unit_of(key)
        v = float(value)
        formatters: dict[str, Callable[[float], str]] = {
            "rate": lambda x: units.format_rate(x), "flops": lambda x: units.format_flops(x), "usd": fmt_usd,
            "bytes": fmt_bytes, "watts": fmt_watts, "mwh": lambda x: f"{x:.4g} MWh",
            "per_s": lambda x: fmt_count(x, " tokens/s" if "tokens" in key else "/s"), "seconds": fmt_seconds,
            "fraction": lambda x: f"{x:.1%}", "level": lambda x: f"{x:.0%}", "times": lambda x: f"{x:.4g}x",
            "percent": lambda x: f"{x:.3g}%"}
        if kind in formatters:
            return formatters[kind](v)
        if isinstance(value, int):
            return f"{value:,}"
        return _g(v)
    if isinstance(value, list | tuple):
        if all(not isinstance(v, Mapping | list | tuple) for v in value):
            return ", ".join(fmt(key, v) for v in value) if value else MISSING
        return json.dumps(value, default=str)
    if isinstance(value, Mapping):
        return json.dumps(value, default=str)
    return str(value)


def cell(key: str, value: Any) -> str:
    """A value as escaped table-cell HTML; numbers right-aligned."""
    text = esc(fmt(key, value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f'<td class="num" title="{esc(value)}">{text}</td>'
    if value is None:
        return f'<td class="dim">{text}</td>'
    return f"<td>{text}</td>"


# ---- tables ------------------------------------------------------------------------------------------------------

def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested mappings and lists as (dotted path, scalar) pairs; lists of scalars stay one value."""
    out: list[tuple[str, Any]] = []
    if isinstance(value, Mapping):
        if not value and prefix:
            out.append((prefix, None))
        for k, v in value.items():
            out += flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list | tuple) and any(isinstance(v, Mapping | list | tuple) for v in value):
        for i, v in enumerate(value):
            out += flatten(v, f"{prefix}[{i}]")
    else:
        out.append((prefix, value))
    return out


def unit_key(path: str) -> str:
    """The key whose suffix gives a dotted path's unit: its last part, or the figure a band's low/high belong to."""
    parts = [p.split("[", 1)[0] for p in path.split(".")]
    if parts[-1] in ("low", "high", "estimate") and len(parts) > 1:
        return parts[-2].removesuffix("_band")
    return parts[-1]


def kv_table(pairs: Iterable[tuple[str, Any]], *, css: str = "kv") -> str:
    """A two-column table of (key, value); the key's last part picks the unit."""
    rows = []
    items = list(pairs)
    for path, value in items[:MAX_ROWS]:
        last = unit_key(path)
        rows.append(f"<tr><th>{esc(title_case(path))}</th>{cell(last, value)}</tr>")
    if len(items) > MAX_ROWS:
        rows.append(f'<tr><td colspan="2" class="dim">… {len(items) - MAX_ROWS} more rows</td></tr>')
    return f'<table class="{css}"><tbody>{"".join(rows)}</tbody></table>' if rows else ""


def kv_grid(pairs: Iterable[tuple[str, Any]]) -> str:
    """Short (key, value) pairs as a compact grid of cells, several to a row (inputs, plans)."""
    cells = []
    for path, value in pairs:
        last = unit_key(path)
        css = "v dim" if value is None else "v"
        cells.append(f'<div><span class="k">{esc(title_case(path))}</span><span class="{css}">'
                     f"{esc(fmt(last, value))}</span></div>")
    return f'<div class="kvgrid">{"".join(cells)}</div>' if cells else ""


def rows_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]] | None = None, *,
               highlight: Callable[[Mapping[str, Any]], str] | None = None) -> str:
    """Rows of dicts as a table; ``columns`` are (dotted key, header), default every scalar key of the rows.
    ``highlight(row)`` gives a CSS class for the row ('' for none)."""
    flat = [dict(flatten(r)) for r in rows[:MAX_ROWS]]
    if columns is None:
        keys = list(dict.fromkeys(k for r in flat for k in r))
        columns = [(k, title_case(k)) for k in keys]
    head = "".join(f"<th>{esc(h)}</th>" for _, h in columns)
    body = []
    for row, original in zip(flat, rows, strict=False):
        cls = highlight(original) if highlight else ""
        cells = "".join(cell(unit_key(k), row.get(k)) for k, _ in columns)
        body.append(f'<tr class="{esc(cls)}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    more = (f'<tr><td colspan="{len(columns)}" class="dim">… {len(rows) - MAX_ROWS} more rows</td></tr>'
            if len(rows) > MAX_ROWS else "")
    return (f'<div class="scroll"><table class="rows"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}{more}</tbody></table></div>')


def details(summary: str, body: str, *, open_: bool = False) -> str:
    return f'<details{" open" if open_ else ""}><summary>{esc(summary)}</summary>{body}</details>'


def paragraph(text: object, css: str = "") -> str:
    return f'<p class="{css}">{esc(text)}</p>' if css else f"<p>{esc(text)}</p>"


def bullet_list(items: Iterable[object]) -> str:
    lis = "".join(f"<li>{esc(i)}</li>" for i in items)
    return f"<ul>{lis}</ul>" if lis else ""


# ---- sections and charts -----------------------------------------------------------------------------------------

@dataclass
class Section:
    """One titled part of the report, linked from the table of contents."""

    anchor: str
    title: str
    body: str


@dataclass
class Charts:
    """The page's plotly charts, numbered in order: div ids ``fabricsim-chart-N`` (same document, same bytes)."""

    count: int = 0
    ids: list[str] = field(default_factory=list)

    def add(self, figure: Any, *, height: int = 360) -> str:
        """The chart's HTML (a div and the script that draws it; plotly.js is on the page once)."""
        self.count += 1
        div_id = f"fabricsim-chart-{self.count}"
        self.ids.append(div_id)
        figure.update_layout(height=height, template="plotly_white",
                             margin={"l": 10, "r": 10, "t": 48, "b": 10},
                             font={"family": "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif",
                                   "size": 12})
        figure.update_xaxes(automargin=True)
        figure.update_yaxes(automargin=True)
        body: str = figure.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=CHART_CONFIG,
                                   default_height=f"{height}px", default_width="100%")
        return f'<figure class="chart" data-chart="{div_id}">{body}</figure>'


def plotly_js() -> str:
    """plotly.js, minified, from the installed plotly package (no CDN)."""
    from plotly.offline import get_plotlyjs

    js: str = get_plotlyjs()
    return js.replace("</script", "<\\/script")


CSS = """
:root{--ink:#1d2733;--dim:#66737f;--line:#dfe4ea;--bg:#f6f8fa;--accent:#1f5fa8;--hot:#c0392b;--ok:#2e7d32}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:var(--ink);
background:#fff}
header{background:#17324d;color:#fff;padding:22px 32px 18px}
header h1{margin:0 0 4px;font-size:24px;font-weight:650}
header .sub{color:#c9d6e3;font-size:13px}
.layout{display:flex;gap:28px;max-width:1320px;margin:0 auto;padding:20px 32px 48px}
nav.toc{flex:0 0 190px;position:sticky;top:12px;align-self:flex-start;font-size:13px}
nav.toc ol{list-style:none;margin:0;padding:0;border-left:2px solid var(--line)}
nav.toc a{display:block;padding:3px 10px;color:var(--dim);text-decoration:none}
nav.toc a:hover{color:var(--accent)}
main{flex:1;min-width:0}
section{margin:0 0 30px}
h2{font-size:19px;margin:0 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:16px 0 6px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(230px,1fr));gap:12px;margin:6px 0 14px}
.card{border:1px solid var(--line);border-radius:8px;padding:12px 14px;background:var(--bg)}
.card.main{background:#eaf2fb;border-color:#b9d1ec;grid-column:span 2}
.card .label{color:var(--dim);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.card .value{font-size:26px;font-weight:650;line-height:1.25}
.card.main .value{font-size:38px}
.card .band{color:var(--dim);font-size:12px}
.pill{display:inline-block;padding:1px 9px;border-radius:10px;background:var(--hot);color:#fff;font-size:12px;
font-weight:600}
.pill.ok{background:var(--ok)}.pill.warn{background:#b7791f}
.verdict{font-size:15px;border-left:4px solid var(--accent);padding:6px 12px;background:var(--bg);margin:8px 0}
table{border-collapse:collapse;font-size:13px;margin:4px 0 10px}
th,td{padding:3px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
.kvgrid{display:grid;grid-template-columns:repeat(auto-fill,minmax(210px,1fr));gap:0 18px;margin:4px 0 10px}
.kvgrid>div{display:flex;justify-content:space-between;gap:10px;border-bottom:1px solid var(--line);padding:3px 2px;
font-size:13px}
.kvgrid .k{color:var(--dim)}.kvgrid .v{text-align:right;overflow-wrap:anywhere}
.card.hot{background:#fbeae8;border-color:#eab3ad}.card.hot .value{color:var(--hot)}
table.kv th{font-weight:500;color:var(--dim);white-space:nowrap}
table.rows thead th{background:var(--bg);position:sticky;top:0;white-space:nowrap}
table.rows td{white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.dim,.dim{color:var(--dim)}
tr.best td{background:#e8f5e9;font-weight:600}tr.tie td{background:#fff8e1}
.scroll{overflow-x:auto;max-width:100%}
.grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(380px,1fr));gap:6px 24px}
figure{margin:6px 0 14px}
figure.chart{border:1px solid var(--line);border-radius:8px;padding:4px}
figure.drawing img{max-width:100%;height:auto;border:1px solid var(--line);border-radius:8px}
details{margin:6px 0}summary{cursor:pointer;color:var(--accent)}
pre{background:var(--bg);border:1px solid var(--line);padding:8px 10px;overflow-x:auto;font-size:12px}
code{font-family:ui-monospace,'DejaVu Sans Mono',monospace}
footer{color:var(--dim);font-size:12px;max-width:1320px;margin:0 auto;padding:0 32px 30px}
@media print{nav.toc{display:none}.layout{display:block}}
"""


def page(*, title: str, subtitle: str, generated: str, sections: Sequence[Section], charts: Charts,
         command: str) -> str:
    """The whole HTML document: head (CSP, CSS, plotly.js once when there is a chart), header, contents, sections."""
    toc = "".join(f'<li><a href="#{esc(s.anchor)}">{esc(s.title)}</a></li>' for s in sections)
    body = "".join(f'<section id="{esc(s.anchor)}"><h2>{esc(s.title)}</h2>{s.body}</section>' for s in sections)
    script = f"<script>{plotly_js()}</script>" if charts.count else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="{esc(generated)}">'
        f'<meta name="fabricsim-command" content="{esc(command)}">'
        f'<meta name="fabricsim-charts" content="{charts.count}">'
        f"<title>{esc(title)}</title><style>{CSS}</style>{script}</head>\n"
        f'<body><header><h1>{esc(title)}</h1><div class="sub">{esc(subtitle)}</div>'
        f'<div class="sub">{esc(generated)}</div></header>\n'
        f'<div class="layout"><nav class="toc" aria-label="contents"><ol>{toc}</ol></nav>\n<main>{body}</main></div>\n'
        f"<footer>Self-contained report: every chart is drawn by the plotly.js inlined in this file; it fetches "
        f"nothing over the network. Hover a chart for values, drag to zoom, double-click to reset.</footer>"
        "</body></html>\n")
