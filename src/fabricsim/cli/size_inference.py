"""`fabricsim size --inference`: the cheapest system, serving plan and replica count that meet TTFT and TPOT SLOs at
a request rate; a ranked table (or JSON) with the screen and the simulated figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.cli.launch_view import launch_lines


def _ms(value: float | None) -> str:
    return "-" if value is None else units.format_duration(value, digits=3)



def inference_table(rows: list[dict[str, Any]], title: str, percentile: int, ties: bool = True) -> Table:
    """One row per candidate: cluster, replicas, plan, batch, latencies at the SLO percentile, cost, bound; below
    120 columns the secondary columns (fabric, GPUs per replica, KV format, $/h, capex, bound) are dropped."""
    table = ui.new_table(f"{title} (latencies at p{percentile}, $ per million output tokens)", title_justify="left")
    p = percentile
    wide = not ui.narrow()
    columns = [("#", True, wide), ("system", False, True), ("fabric", False, wide), ("gpus/rep", True, wide),
               ("replicas", True, True), ("GPUs", True, wide), ("tp/pp/ep", False, True), ("weights/kv", False, True),
               ("batch", True, wide), ("ttft", True, True), ("tpot", True, True),
               ("$/M", True, True), ("$/h", True, wide), ("capex", True, wide), ("bound", False, wide),
               ("checked", False, wide)]
    shown = [(header, numeric) for header, numeric, keep in columns if keep]
    for header, numeric in shown:
        if numeric:
            ui.num_column(table, header)
        else:  # names stay whole (system ids are up to 11 characters)
            ui.text_column(table, header, min_width=11 if header == "system" else len(header), no_wrap=not wide)
    for i, e in enumerate(rows, 1):
        plan = e["plan"]
        sim = e["simulation"]
        ttft = e[f"ttft_s_p{p}"] if sim else e["screen"]["ttft_s"]
        tpot = e[f"tpot_s_p{p}"] if sim else e["screen"]["tpot_s"]
        per = e["usd_per_million_output_tokens"]
        checked = "sim" if e["simulated"] else "screen"
        if sim and sim["replicas"] != e["screen"]["replicas"]:
            checked += f" (+{sim['replicas'] - e['screen']['replicas']} rep)"
        cells = {"#": "tie" if ties and e.get("tie") else str(i), "system": e["system"], "fabric": e["fabric"],
                 "gpus/rep": str(e["gpus_per_replica"]),
                 "replicas": str(e["replicas"]), "GPUs": str(e["gpus"]),
                 "tp/pp/ep": f"{plan['tp']}/{plan['pp']}/{plan['ep']}", "weights/kv": f"{plan['weights']}/{plan['kv']}",
                 "batch": str(e["max_batch"]), "ttft": _ms(ttft), "tpot": _ms(tpot),
                 "$/M": "?" if per is None else f"{per:.3f}",
                 "$/h": "?" if e["cost_usd_per_hour"] is None else f"{e['cost_usd_per_hour']:.2f}",
                 "capex": units.format_usd(e["capex_usd"]), "bound": e["bottleneck"], "checked": checked}
        table.add_row(*(cells[header] for header, _ in shown))
    return table


def show_inference(arguments: dict[str, Any], inputs: dict[str, Any], form: str = "table",
                   report: Path | None = None) -> None:
    """The --inference branch of `fabricsim size` (``arguments``: the API's; ``inputs``: the command's; ``form``:
    table, json or csv)."""
    from fabricsim.api import progress_bar, size

    bar = progress_bar("items") if form == "table" else None  # on stderr, once the search passes 2 s
    try:
        answer = size(**arguments, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    result, spec = answer.serving, answer.serving_spec
    assert result is not None and spec is not None
    ui.write_command_report(report, answer, answer.inputs)
    ui.model_import_note(answer)
    data = answer.data
    if form != "table":
        ui.emit(form, answer.data, answer.inputs, answer.rows)
        if result.best is None and result.note is not None:
            ui.fail(result.note)
        return
    if result.best is None and result.note is not None:
        ui.fail(result.note)
    ui.console.print(f"[bold]size --inference[/]: {spec.model} at {spec.rate_per_s:g} req/s, prompt "
                     f"{spec.prompt_tokens}"
                  f" / output {spec.output_tokens} tokens, SLO ttft {_ms(spec.slo_ttft_s)} tpot "
                  f"{_ms(spec.slo_tpot_s)} at p{spec.slo_percentile}; {result.plans_evaluated:,} plans timed, "
                  f"{result.plans_pruned:,} pruned, {result.simulations} simulations ({result.wall_s:.1f} s)")
    ui.console.print(inference_table(data["results"], "cheapest per million output tokens", spec.slo_percentile))
    if data.get("ties"):
        ui.console.print(inference_tie_line(data["ties"]), soft_wrap=True)
    ui.console.print(inference_table(data["best_by_system"], "best per system", spec.slo_percentile, ties=False))
    if result.best is not None:
        for line in launch_lines(result.best["launch"]):
            ui.console.print(line, soft_wrap=True)
        if result.best.get("kv_tier") is not None:
            ui.console.print(kv_tier_line(result.best["kv_tier"]), soft_wrap=True)
    for line in disaggregated_lines(result.disaggregated, spec.slo_percentile):
        ui.console.print(line, soft_wrap=True)
    if result.rejected:
        ui.console.print(f"[yellow]{len(result.rejected)} candidate(s) failed the simulation, e.g. "
                      f"{result.rejected[0]['system']}: {result.rejected[0]['simulation']['reason']}[/]")
    ui.console.print(f"cost: {data['assumptions']['cost']} ({data['assumptions']['billing']}); "
                  f"screen at {spec.target_utilization:g} utilisation; {data['assumptions']['simulation']}")


def kv_tier_line(tier: dict[str, Any]) -> str:
    """The cheapest result's networked KV tier: its servers and what they cost, and what a request loads."""
    from fabricsim import units

    cost = "price not known" if tier["capex_usd"] is None else f"${tier['capex_usd']:,.0f}"
    if tier["chosen"] != "load":
        return (f"KV tier: {tier['servers']} x {tier['server']} ({cost}) priced in; the engine recomputes the "
                "tier's share on this plan (faster than loading it)")
    return (f"KV tier: {tier['servers']} x {tier['server']} ({cost}, {tier['power_w']:,.0f} W) priced in; "
            f"{tier['tokens_per_request']:,} tokens a request loaded in {units.format_duration(tier['load_s'])}, "
            f"{units.format_rate(tier['fabric_bytes_per_s'])} over the fabric at the offered rate")


def inference_tie_line(ties: dict[str, Any]) -> str:
    """How many confirmed plans cost within the model's error of the cheapest, and which one the tie-break picks."""
    band = ties["comparison_band"]
    pick = ties["recommended"]
    plan = pick["plan"]
    within = (f"{ties['count']} confirmed plan(s) cost as little as the cheapest: ties, marked 'tie' (no bound on "
              f"comparing two plans: {band.get('reason')})" if band.get("low") is None else
              f"{ties['count']} confirmed plan(s) cost within the model's error on comparing two plans "
              f"({band['low']:.2f}-{band['high']:.2f}x at {band['level']:.0%}, {band['pairs']} pairs: "
              f"{band['comparable']}) of the cheapest: ties, marked 'tie'")
    return (f"ties: {within}; recommended by {ties['secondary']}: {pick['replicas']} x tp={plan['tp']} "
            f"pp={plan['pp']} {plan['weights']} on {pick['system']}, {pick['gpus']} GPUs, "
            f"${pick['usd_per_million_output_tokens']:.3f}/M output tokens")


def disaggregated_lines(layouts: list[dict[str, Any]], percentile: int) -> list[str]:
    """--disagg: the cheapest prefill and decode pools of each pair of systems, simulated, and the first one's
    launch commands."""
    def plan(pool: dict[str, Any]) -> str:
        x = pool["plan"]
        return f"tp={x['tp']} pp={x['pp']} ep={x['ep']} {x['weights']}/{x['kv']}"

    lines = []
    for e in layouts:
        pre, dec = e["prefill"], e["decode"]
        cost = "?" if e["usd_per_million_output_tokens"] is None else f"${e['usd_per_million_output_tokens']:.3f}"
        verdict = "[green]meets the SLOs[/]" if e["simulated"] else f"[yellow]{e['simulation']['reason']}[/]"
        where = e["system"] if e["decode_system"] == e["system"] else f"{e['system']} + {e['decode_system']}"
        lines.append(f"disaggregated on {where} ({e['fabric']}): {e['disagg']} (prefill {plan(pre)} x"
                     f"{pre['replicas']}, decode {plan(dec)} x{dec['replicas']}), {e['gpus']} GPUs, {cost} per "
                     f"million output tokens, ttft p{percentile} {_ms(e[f'ttft_s_p{percentile}'])}, tpot "
                     f"p{percentile} {_ms(e[f'tpot_s_p{percentile}'])}: {verdict}")
    if layouts and layouts[0]["simulated"]:
        lines += launch_lines(layouts[0]["launch"])
    return lines
