"""The HTML report's command-specific sections: what-if and swaps, the sizing search (Pareto front, ties, ranked
clusters), serving percentiles and launch commands, the topology drawing and its bill, training goodput."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import fabricsim.report.html.charts as hc
from fabricsim.report.html.page import (
    Charts,
    Section,
    bullet_list,
    details,
    esc,
    flatten,
    kv_grid,
    kv_table,
    paragraph,
    rows_table,
)
from fabricsim.report.html.sections import Doc, bom_body, is_num

PERCENTILES = ("p50", "p90", "p99")


def whatif_section(doc: Doc, charts: Charts) -> Section | None:
    layers, swaps = doc.rows("layers"), doc.rows("swaps")
    if not layers and not swaps:
        return None
    factor, base = doc.get("factor"), doc.num("base_step_s")
    body = ""
    if layers:
        body += charts.add(hc.whatif_chart(layers, base, factor), height=380)
        body += rows_table(layers, [("layer", "layer made faster"), ("step_time_s", "step"),
                                    ("speedup", "speed-up"), ("step_time_s_band.low", "band low"),
                                    ("step_time_s_band.high", "band high")])
    if swaps:
        body += "<h3>Cluster swaps</h3>"
        body += charts.add(hc.swaps_chart(swaps), height=400)
        body += rows_table(swaps, [("swap", "swap"), ("kind", "kind"), ("step_time_s", "step"),
                                   ("speedup", "speed-up"), ("speedup_band.low", "low"), ("speedup_band.high", "high"),
                                   ("goodput", "goodput"), ("cost_delta_usd", "capex added"),
                                   ("percent_per_million_usd", "% per $1M"), ("worth_it", "worth it"),
                                   ("pays_as_predicted", "pays as predicted"), ("fits", "fits"),
                                   ("missing_prices", "missing prices")])
    elif doc.data.get("swaps") is not None:
        body += paragraph("No cluster swap was asked for (--swap KEY=VALUE prices one).", "dim")
    return Section("whatif", "What-if and swaps", body)


def recommended_row(doc: Doc) -> Mapping[str, Any] | None:
    ties = doc.map("ties")
    rec = ties.get("recommended")
    if isinstance(rec, Mapping):
        return rec
    results = doc.rows("results")
    return results[0] if results else None


def plan_text(row: Mapping[str, Any]) -> str:
    """A plan in one line: tp, pp and dp always, other knobs when set and not 1."""
    plan = row.get("plan")
    if not isinstance(plan, Mapping):
        return ""
    shown = [(k, v) for k, v in plan.items() if not isinstance(v, Mapping | list)
             and (k in ("tp", "pp", "dp") or (v is not None and v is not True and v != 1))]
    return " ".join(f"{k}={v}" for k, v in shown)


def size_section(doc: Doc, charts: Charts) -> Section | None:
    """The search: time against cost (ties, Pareto front, recommended), the ranked table, best per system."""
    results, pareto = doc.rows("results"), doc.rows("pareto")
    rec = recommended_row(doc)
    ties = doc.map("ties")
    inference = any("usd_per_million_output_tokens" in r for r in results)
    body = ""
    if results:
        if inference:
            timed = any(is_num(r.get("tpot_s_p90")) for r in results)
            x_key, x_scale, x_title = ("tpot_s_p90", 1e-3, "TPOT p90 (ms)") if timed else ("gpus", 1.0, "GPUs")
            body += charts.add(hc.pareto_chart(results, pareto, rec, x_key=x_key, x_scale=x_scale, x_title=x_title,
                                               y_key="usd_per_million_output_tokens",
                                               y_title="$ per million output tokens",
                                               title="Serving plans: latency against cost"), height=440)
            columns = [("system", "system"), ("fabric", "fabric"), ("gpus", "GPUs"), ("replicas", "replicas"),
                       ("plan.tp", "tp"), ("plan.pp", "pp"), ("plan.weights", "weights"), ("plan.kv", "kv"),
                       ("ttft_s_p90", "TTFT p90"), ("tpot_s_p90", "TPOT p90"), ("slo_attainment", "SLO met"),
                       ("usd_per_million_output_tokens", "$ / M tokens"), ("cost_usd_per_hour", "$ / hour"),
                       ("capex_usd", "capex"), ("tie", "tie")]
        else:
            body += charts.add(hc.pareto_chart(results, pareto, rec, x_key="time_to_train_s", y_key="cost_usd",
                                               x_scale=86400.0, x_title="days to train", y_title="cost ($)"),
                               height=440)
            columns = [("system", "system"), ("fabric", "fabric"), ("gpus", "GPUs"), ("plan.tp", "tp"),
                       ("plan.pp", "pp"), ("plan.dp", "dp"), ("plan.precision", "precision"),
                       ("time_to_train_s", "time to train"), ("cost_usd", "cost"), ("tokens_per_s", "tokens/s"),
                       ("mfu", "MFU"), ("goodput", "goodput"), ("energy_mwh", "energy"), ("capex_usd", "capex"),
                       ("power_w", "power"), ("bottleneck", "bottleneck"), ("tie", "tie")]
        body += "<h3>Ranked clusters</h3>" + rows_table(
            results, columns, highlight=lambda r: "best" if r is results[0] else ("tie" if r.get("tie") else ""))
    if ties:
        count = ties.get("count")
        lines = [f"{count} plan(s) tie with the best within the model's error." if count is not None else "",
                 f"Among ties: {ties.get('secondary')}." if ties.get("secondary") else "",
                 str(ties.get("rule") or "")]
        body += "<h3>Tie set</h3>" + bullet_list(line for line in lines if line)
        if isinstance(rec, Mapping):
            body += details("the recommended cluster (all figures)", kv_table(flatten(dict(rec))))
    if pareto:
        body += "<h3>Pareto front</h3>" + rows_table(pareto, [c for c in columns if c[0] != "tie"] if results
                                                     else None)
    for key, name in (("best_by_system_fabric", "Best per system and fabric"), ("best_by_system", "Best per system"),
                      ("disaggregated", "Disaggregated pools")):
        rows = doc.rows(key)
        if rows:
            body += f"<h3>{esc(name)}</h3>" + rows_table(rows, columns if results else None)
    body += _decision(doc)
    body += _search_facts(doc)
    return Section("search", "Sizing search", body) if body else None


def _decision(doc: Doc) -> str:
    """The decision table: the best plan on each system, and the roadmap parts and estimates each rests on."""
    rows = doc.rows("decision")
    if len(rows) < 2:
        return ""
    columns = [("system", "system"), ("status", "status"), ("gpus", "GPUs"), ("time_to_train_s", "time to train"),
               ("cost_usd", "cost"), ("energy_mwh", "energy"), ("capex_usd", "capex"),
               ("facility_power_w", "facility power"), ("racks", "racks")]
    lines = [f"{r.get('system')} rests on {len(r.get('roadmap') or [])} roadmap parts and estimated "
             f"{', '.join(str(x) for x in r.get('estimated') or [])}" for r in rows if r.get("estimated")]
    return ("<h3>Decision: the best plan on each system</h3>" + rows_table(rows, columns)
            + (bullet_list(lines) if lines else ""))


def _search_facts(doc: Doc) -> str:
    body = ""
    facts = {k: doc.get(k) for k in ("model", "tokens", "objective", "plans_evaluated", "plans_pruned",
                                      "plans_feasible", "plans_meeting_slo_screen", "simulations", "wall_s",
                                      "screen_wall_s") if doc.data.get(k) is not None}
    constraints = doc.map("constraints")
    if facts or constraints:
        body += "<h3>The search</h3>" + kv_table([*facts.items(), *flatten(dict(constraints))])
    candidates = doc.rows("candidates")
    if candidates:
        body += details("candidate clusters searched", rows_table(
            candidates, [("system", "system"), ("fabric", "fabric"), ("searched", "searched"),
                         ("best.gpus", "best GPUs"), ("best.cost_usd", "best cost"), ("reasons", "why not")]))
    for key in ("unbuildable_clusters", "pruned_reasons"):
        value = doc.map(key)
        if value:
            body += details(key.replace("_", " "), kv_table(flatten(dict(value))))
    rejected = doc.rows("rejected")
    if rejected:
        body += details("rejected", rows_table(rejected))
    return body


def serving_section(doc: Doc, charts: Charts) -> Section | None:
    """A simulated request stream: latency percentiles with bands, requests served, the serving options."""
    groups: dict[str, dict[str, tuple[float, Mapping[str, Any] | None]]] = {}
    for metric, name in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "end to end")):
        points = {}
        for p in PERCENTILES:
            key = f"{metric}_{p}"
            value = doc.get(key)
            if is_num(value):
                band = doc.data.get(f"{key}_band")
                points[p] = (float(value), band if isinstance(band, Mapping) else None)
        if points:
            groups[name] = points
    if not groups:
        return None
    body = charts.add(hc.percentile_chart(groups), height=360)
    facts = {k: doc.get(k) for k in ("requests_arrived", "requests_completed", "requests_unfinished",
                                     "served_output_tokens_per_s", "goodput", "slo_attainment", "preemptions",
                                     "mean_batch_size", "overloaded", "overload_reason") if k in doc.data}
    body += kv_grid(facts.items())
    options = doc.map("serving_options")
    if options:
        body += "<h3>Serving options</h3>" + kv_grid(flatten(dict(options)))
    return Section("serving", "Serving simulation", body)


def launch_section(doc: Doc) -> Section | None:
    launch = doc.map("launch")
    if not launch:
        return None
    body = ""
    for role, spec in launch.items():
        if not isinstance(spec, Mapping):
            continue
        body += f"<h3>{esc(role)} ({esc(spec.get('engine', ''))})</h3>"
        if spec.get("command"):
            body += f"<pre><code>{esc(spec['command'])}</code></pre>"
        files = spec.get("config_files")
        if isinstance(files, Mapping):
            for name, text in files.items():
                body += details(f"config file {name}", f"<pre><code>{esc(text)}</code></pre>")
        notes = spec.get("notes")
        if isinstance(notes, list):
            body += bullet_list(notes)
    return Section("launch", "Engine launch", body) if body else None


def svg_figure(svg: str, caption: str) -> str:
    """An SVG drawing as an image (a data: URL: it cannot run script or fetch anything)."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return (f'<figure class="drawing"><img alt="{esc(caption)}" src="data:image/svg+xml;base64,{data}">'
            f"<figcaption class=\"dim\">{esc(caption)}</figcaption></figure>")


def topology_section(doc: Doc, svg: str | None) -> Section | None:
    """The cluster: its drawing (when given) and its structure: tiers, switches, cables, links."""
    keys = ("system", "nodes", "gpus", "fabric", "switch", "link", "nic", "nics", "tiers", "oversubscription",
            "nvlink_domain_size", "nvswitch_chips", "switches_total", "cables_total", "cables_copper",
            "cables_optical", "transceivers", "links", "endpoints", "bisection_bytes_per_s",
            "nic_bytes_per_s_per_gpu", "sharp")
    facts = [(k, doc.get(k)) for k in keys if k in doc.data]
    groups = [(k, doc.map(k)) for k in ("switches", "cables", "links_by_kind")]
    if not facts and not svg:
        return None
    body = svg_figure(svg, "The cluster: nodes along the bottom, switch tiers above, cables as lines") if svg else ""
    body += kv_grid(facts)
    for name, mapping in groups:
        if mapping:
            body += f"<h3>{esc(name.replace('_', ' '))}</h3>" + kv_grid(mapping.items())
    spec = doc.map("spec")
    if spec:
        body += details("cluster spec", kv_table(flatten(dict(spec))))
    return Section("topology", "Topology", body)


def topo_bom_section(doc: Doc, charts: Charts) -> Section | None:
    items = doc.rows("items")
    totals = {k: doc.get(k) for k in ("capex_usd", "capex_known_usd", "total_price_usd", "power_w",
                                      "power_known_w", "total_power_w") if k in doc.data}
    missing = doc.get("missing")
    notes = [*(doc.get("notes") or []), *([f"unpriced: {', '.join(map(str, missing))}"] if missing else [])]
    if not items and not totals:
        return None
    body = bom_body(items, charts, title="Capital cost by line item", totals=totals, notes=notes)
    storage = doc.map("storage")
    if storage:
        body += "<h3>Storage</h3>" + storage_body(storage, charts)
    return Section("bom", "Bill of materials", body)


def storage_body(bill: Mapping[str, Any], charts: Charts) -> str:
    items = [i for i in bill.get("items") or [] if isinstance(i, Mapping)]
    facts = {k: v for k, v in bill.items() if k not in ("items", "notes") and not isinstance(v, Mapping | list)}
    nested = {k: v for k, v in bill.items() if isinstance(v, Mapping)}
    body = kv_grid([*facts.items(), *flatten(nested)])
    return body + bom_body(items, charts, title="Storage bill by line item", notes=bill.get("notes") or [])


def goodput_section(doc: Doc, charts: Charts) -> Section | None:
    """Training on the wall clock: goodput, failures by component, checkpoints, and the storage bill."""
    good = doc.map("goodput")
    if not good:
        return None
    body = ""
    failures = good.get("unplanned_by_component_per_day")
    if isinstance(failures, Mapping) and any(is_num(v) and v for v in failures.values()):
        body += charts.add(hc.bars_chart({k: float(v) for k, v in failures.items() if is_num(v)},
                                         title="Unplanned interruptions per day by component",
                                         axis_title="interruptions per day"), height=120 + 34 * len(failures))
    facts = {k: v for k, v in good.items() if not isinstance(v, Mapping | list)}
    body += kv_grid(facts.items())
    bill = good.get("storage_bill")
    if isinstance(bill, Mapping):
        body += "<h3>Storage for checkpoints (billed with the cluster)</h3>" + storage_body(bill, charts)
    return Section("goodput", "Goodput, checkpoints and storage", body)


def collective_section(doc: Doc, charts: Charts) -> Section | None:
    """What nccl-tests would measure: bus bandwidth by size with its bands, and the rows."""
    rows = [r for r in doc.rows("rows") if is_num(r.get("size_bytes")) and is_num(r.get("busbw_bytes_per_s"))]
    if not rows:
        return None
    body = charts.add(hc.busbw_chart(rows, title=f"{doc.get('op') or 'collective'} on {doc.get('ranks')} GPUs: "
                                                 "bus bandwidth by message size"), height=420)
    columns = ("size_bytes", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "algorithm", "protocol", "bound")
    body += rows_table([{k: r.get(k) for k in columns} for r in rows])
    return Section("sweep", "Size sweep", body)
