"""`fabricsim size`: the cheapest (or fastest, or least-energy) cluster and parallel plan to train a model on a
token budget under a deadline, budget and power cap; ranked plans, the Pareto frontier and the best plan per
system x fabric."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.cli.goodput_options import storage_fallback_notes
from fabricsim.cli.options import PRINT, REPORT, Decl, declared, given
from fabricsim.cli.spec_options import PLAN_SPACE_OPTIONS, SIZE_SEARCH_OPTIONS, SIZE_SERVING_OPTIONS

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.sizing import SizingResult

DAY_S = 86400.0


def _plan(p: dict[str, Any]) -> str:
    rc = {"none": "", "selective": " rs", "full": " rf"}[p["recompute"]]
    extra = (f" c{p['cp']}" if p["cp"] > 1 else "") + (f" e{p['ep']}" if p["ep"] > 1 else "") + (
        f" et{p['etp']}" if p.get("etp", p["tp"]) != p["tp"] else "") + (
        f" v{p['vpp']}" if p["vpp"] > 1 else "")
    fp8 = " f8" if p["precision"] == "fp8" else ""
    return f"t{p['tp']} p{p['pp']} d{p['dp']}{extra} m{p['mbs']} z{p['zero']}{rc}{fp8}"


def _cluster(e: dict[str, Any]) -> str:
    return f"{e['gpus']} {e['system']} {e['fabric']} {e['oversubscription']:g}:1"


def _same_plan(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """One cluster and plan (with its storage and spares) in two result rows."""
    keys = ("gpus", "system", "fabric", "oversubscription", "plan", "storage", "spare_nodes")
    return all(a.get(k) == b.get(k) for k in keys)


def ranked_table(rows: list[dict[str, Any]], title: str, pick: dict[str, Any] | None = None) -> Table:
    """One row per plan: cluster, plan, days, cost, $/M tokens, MFU and the bounding layer; ``pick`` (the plan
    recommended among ties) is marked 'pick', and added as the last row when the top rows leave it out."""
    if pick is not None and not any(_same_plan(e, pick) for e in rows):
        rows = [*rows, {**pick, "tie": True}]
    table = ui.new_table(title=title, header_style="bold", title_justify="left")
    headers = [h for h in ("#", "cluster", "plan", "GPU W", "days (80% band)", "cost", "$/Mtok", "MFU", "MW", "racks",
                           "bound")
               if not (ui.narrow() and h in ("$/Mtok", "MFU", "GPU W", "MW", "racks"))]
    for header in headers:
        if header in ("#", "days (80% band)", "cost", "$/Mtok", "MFU", "GPU W", "MW", "racks"):
            ui.num_column(table, header)
        else:
            ui.text_column(table, header)
    for i, e in enumerate(rows, 1):
        per = e["usd_per_million_tokens"]
        mark = "pick" if pick is not None and _same_plan(e, pick) else ("tie" if e.get("tie") else str(i))
        cells = {"#": mark, "cluster": _cluster(e), "plan": _plan(e["plan"]),
                 "days (80% band)": _days(e),
                 "cost": units.format_usd(e["cost_usd"]),
                 "$/Mtok": "?" if per is None else f"{per:.3f}", "MFU": f"{e['mfu']:.2f}", "bound": e["bottleneck"],
                 "GPU W": "-" if e.get("gpu_power_w") is None else f"{e['gpu_power_w']:.0f}", **_facility_cells(e)}
        table.add_row(*(cells[h] for h in headers))
    return table


def _facility_cells(e: dict[str, Any]) -> dict[str, str]:
    """A row's facility power (MW, IT x PUE) and compute racks; '-' where unknown, 'no' where the hall cannot host
    the system."""
    block = e.get("facility") or {}
    power = block.get("facility_power_w")
    racks = block.get("racks")
    return {"MW": "-" if power is None else f"{power / 1e6:.2f}",
            "racks": ("no" if block.get("hostable") is False else "-") if racks is None else str(racks)}


def _days(e: dict[str, Any]) -> str:
    """'13.4 (11.2-16.8)': a row's days to train and its 80% band (the model's days where the band holds them, else
    the band's centre: `validation.shown_figure`), the days alone without a band."""
    from fabricsim.validation import shown_figure

    band = e.get("time_to_train_s_band") or {}
    days = f"{shown_figure(e['time_to_train_s'], band) / DAY_S:.1f}"
    if band.get("low") is None:
        return days
    return f"{days} ({band['low'] / DAY_S:.1f}-{band['high'] / DAY_S:.1f})"


def tie_line(ties: dict[str, Any]) -> str:
    """How many plans the model cannot tell from the best, the error that makes them ties, and the pick."""
    band = ties["comparison_band"]
    if band.get("low") is None:
        within = f"no bound on comparisons ({band.get('reason')}): only the best is listed as a tie"
    else:
        within = (f"{ties['count']} plan(s) within the model's error on comparing two plans ({band['low']:.2f}-"
                  f"{band['high']:.2f}x at {band['level']:.0%}, {band['pairs']} pairs of comparable published runs: "
                  f"{band['comparable']}) are ties, marked 'tie'")
    pick = ties["recommended"]
    return (f"ties: {within}; recommended by {ties['secondary']} (marked 'pick'): {_cluster(pick)} "
            f"{_plan(pick['plan'])}, {pick['time_to_train_s'] / DAY_S:.1f} days, {units.format_usd(pick['cost_usd'])}")


def matrix_table(result: SizingResult) -> Table:
    """The best plan of each system x fabric (one row each, with its cluster size: rows of different sizes are
    said to be so in the caption); candidates without a plan are listed apart (`no_plan_lines`)."""
    best = [c["best"] for c in result.candidates if c["best"] is not None]
    sizes = sorted({e["gpus"] for e in best})
    caption = (f"GPU counts differ between rows ({', '.join(f'{g:,}' for g in sizes)}): each row is its pair's "
               "best cluster size" if len(sizes) > 1 else None)
    table = ui.new_table(title="best per system x fabric", header_style="bold", title_justify="left",
                      caption=caption, caption_justify="left")
    goodput = result.spec.goodput is not None
    headers = ("system", "fabric", "GPUs", "days", "cost", "plan") + (("goodput", "storage / spares") if goodput
                                                                       else ())
    for header in headers:
        if header in ("GPUs", "days", "cost", "goodput"):
            ui.num_column(table, header)
        else:
            ui.text_column(table, header)
    for e in best:
        cost = units.format_usd(e["cost_usd"]) if e["cost_usd"] is not None else "? (unpriced)"
        extra = (f"{e['goodput']:.1%}", f"{e.get('storage', '-')} x{e.get('storage_servers', 0)} / "
                 f"{e.get('spare_gpus', 0)} GPUs") if goodput else ()
        table.add_row(e["system"], f"{e['fabric']} {e['oversubscription']:g}:1", f"{e['gpus']:,}",
                      f"{e['time_to_train_s'] / DAY_S:.1f}", cost, _plan(e["plan"]), *extra)
    return table


def no_plan_lines(result: SizingResult) -> list[str]:
    """One line per candidate system x fabric without a plan, with its reasons; one per unpriced part set."""
    lines = [f"no plan on {c['system']} {c['fabric']}: " + "; ".join(c["reasons"])
             for c in result.candidates if c["best"] is None]
    if result.spec.gpus_range is not None:  # a best plan at a size outside the asked range says so
        lo, hi = result.spec.gpus_range
        lines += [f"{c['system']} {c['fabric']}: {c['searched']}" for c in result.candidates
                  if c["best"] is not None and not lo <= c["best"]["gpus"] <= hi]
    unpriced: dict[tuple[str, ...], list[str]] = {}
    for c in result.candidates:
        if c["unpriced"]:
            unpriced.setdefault(tuple(c["unpriced"]), []).append(f"{c['system']} {c['fabric']}")
    from fabricsim.sizing import unpriced_note

    lines += [f"unpriced ({', '.join(names)}): {unpriced_note(parts)}" for parts, names in unpriced.items()]
    return lines


class ClusterBar:
    """A rich progress bar over the clusters of a search (`size`, `sweep`) showing plans so far, plans/s and the
    ETA (stderr); ``label`` heads it."""

    def __init__(self, label: str = "sizing") -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn(label), BarColumn(), TextColumn("{task.completed}/{task.total} "
                                 "clusters"), TextColumn("{task.fields[plans]:,} plans {task.fields[rate]:,.0f}/s"),
                                 TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                                 transient=True)
        self.task = self.progress.add_task(label, total=None, plans=0, rate=0.0)

    def __call__(self, done: int, total: int, plans: int) -> None:
        elapsed = self.progress.tasks[0].elapsed or 1e-9
        self.progress.update(self.task, completed=done, total=total, plans=plans, rate=plans / elapsed)


SIZE: dict[str, Decl] = {
    **PLAN_SPACE_OPTIONS,
    **SIZE_SEARCH_OPTIONS,
    "plot": (Annotated[Path | None, typer.Option("--plot", help="save the time-cost plot (PNG)")], None),
    **SIZE_SERVING_OPTIONS,
    "fmt": PRINT["fmt"],
    "as_json": PRINT["as_json"],
    "report": REPORT["report"],
}


def congestion_table(rows: list[dict[str, Any]]) -> Table:
    """`--congestion`: each best plan's step on the flow simulator under the behaviours of its network's kind."""
    table = ui.new_table(title="under congestion: the best plan of each system x network on the flow simulator",
                         header_style="bold")
    for col in ("system", "network", "behaviour"):
        ui.text_column(table, col)
    for col in ("analytical step", "flow, ideal", "flow, behaviour", "slowdown", "time to train", "cost"):
        ui.num_column(table, col)
    for r in rows:
        table.add_row(r["system"], f"{r['fabric']} {r['oversubscription']:g}:1", r["congestion_control"],
                      units.format_duration(r["analytical_step_s"]), units.format_duration(r["flow_ideal_step_s"]),
                      units.format_duration(r["flow_step_s"]), f"{r['slowdown']:.3f}x",
                      units.format_duration(r["time_to_train_s"]),
                      "-" if r["cost_usd"] is None else f"${r['cost_usd']:,.0f}")
    return table


def _banded(value: float | None, band: dict[str, Any] | None, scale: float, fmt: str) -> str:
    """A figure and its 80% band in one cell ('-' where unknown)."""
    if value is None:
        return "-"
    text = format(value / scale, fmt)
    if band and band.get("low") is not None and band.get("high") is not None:
        text += f" ({format(band['low'] / scale, fmt)}-{format(band['high'] / scale, fmt)})"
    return text


def decision_table(rows: list[dict[str, Any]]) -> Table:
    """The decision: each system's best plan (today's generation against the next), its time, cost and energy with
    their bands, capex, facility power and racks, and how many roadmap parts and estimated figures it rests on."""
    table = ui.new_table(title="decision: the best plan on each system", header_style="bold", title_justify="left",
                         caption="* roadmap system: announced figures and estimates (rests on); bands are the "
                         "model's error on published runs of shipping hardware", caption_justify="left")
    ui.text_column(table, "system")
    for col in ("GPUs", "days", "cost", "energy MWh", "capex", "facility MW", "racks"):
        ui.num_column(table, col)
    ui.text_column(table, "rests on")
    for r in rows:
        mark = "*" if r["status"] == "roadmap" else ""
        rests = (f"{len(r['roadmap'])} roadmap parts, {len(r['estimated'])} estimated figures"
                 if r["roadmap"] or r["estimated"] else "shipping parts (sources: catalog)")
        table.add_row(f"{r['system']}{mark}", f"{r['gpus']:,}",
                      _banded(r["time_to_train_s"], r.get("time_to_train_s_band"), DAY_S, ".1f"),
                      _banded(r["cost_usd"], r.get("cost_usd_band"), 1e6, ".1f") + " M$",
                      _banded(r["energy_mwh"], r.get("energy_mwh_band"), 1.0, ",.0f"),
                      "-" if r["capex_usd"] is None else f"${r['capex_usd'] / 1e6:,.0f}M",
                      "-" if r["facility_power_w"] is None else f"{r['facility_power_w'] / 1e6:.1f}",
                      "-" if r["racks"] is None else f"{r['racks']:,}", rests)
    return table


@declared(SIZE)
@ui.spec_errors
def size_command(**options: Any) -> None:
    """Which cluster and plan trains a model on a token budget cheapest (or fastest) under the constraints; with
    --inference, which system, serving plan and replica count meets TTFT/TPOT SLOs at a request rate cheapest."""
    inputs = ui.command_inputs(given((SIZE,), options))
    form = ui.output_format(options["fmt"], options["as_json"])
    from fabricsim.api import size
    from fabricsim.inputs import PLOT_SUFFIXES, check_output_path

    out = check_output_path(options["out"], "--out")
    plot = check_output_path(options["plot"], "--plot", PLOT_SUFFIXES)
    report = check_output_path(options["report"], "--report", ui.REPORT_SUFFIXES)
    arguments = {**ui.api_arguments(size, inputs), "out": out}
    if options["inference"]:
        from fabricsim.cli.size_inference import show_inference

        show_inference(arguments, inputs, form, report)
        return
    import sys

    # the bar only on a terminal: rich's transient bar leaves a blank line on a redirected stderr
    bar = None if form != "table" or not sys.stderr.isatty() else ClusterBar()
    try:
        if bar is not None:
            with bar.progress:
                answer = size(**arguments, progress=bar)
        else:
            answer = size(**arguments)
    except KeyboardInterrupt:
        saved = f"; finished chunks are kept in {out}.parts: rerun with --resume" if out is not None else ""
        ui.fail(f"interrupted{saved}")
        raise
    result, spec = answer.sizing, answer.spec
    assert result is not None and spec is not None
    if plot is not None:
        from fabricsim.sizing import plot_pareto

        plot_pareto(result, plot)
    ui.write_command_report(report, answer, inputs)
    ui.model_import_note(answer)
    storage_fallback_notes(answer.data)
    data, rows = answer.data, answer.rows
    if result.note is not None and not len(result.ranked):
        ui.emit(form, data, inputs, rows)
        ui.fail(result.note)
    if ui.emit(form, data, inputs, rows):
        return
    ui.console.print(f"[bold]size[/]: {spec.model}, {spec.tokens / 1e12:g}T tokens, objective {spec.objective}; "
                  f"{result.plans_evaluated:,} plans timed, {result.plans_pruned:,} pruned, "
                  f"{len(result.ranked):,} qualify ({result.wall_s:.1f} s)")
    pick = data["ties"]["recommended"] if data.get("ties") else None
    ui.console.print(ranked_table(data["results"], f"top {len(data['results'])} by {spec.objective}", pick))
    if data.get("ties"):
        ui.console.print(tie_line(data["ties"]))
    ui.console.print(ranked_table(data["pareto"], "Pareto frontier: time vs cost"))
    ui.console.print(matrix_table(result))
    if data.get("congestion"):
        ui.console.print(congestion_table(data["congestion"]))
    if len(data.get("decision") or []) > 1:
        ui.console.print(decision_table(data["decision"]))
        for r in data["decision"]:
            if r["estimated"]:
                shown = ", ".join(r["estimated"][:6]) + (f" and {len(r['estimated']) - 6} more (--json)"
                                                         if len(r["estimated"]) > 6 else "")
                ui.console.print(f"[dim]{r['system']} rests on estimated {shown}[/]")
    from rich.markup import escape

    for line in no_plan_lines(result):
        ui.console.print(f"[yellow]{escape(line)}[/]")
    if result.errors:
        ui.console.print(f"[yellow]{len(result.errors)} cluster(s) cannot be built, e.g. "
                      f"{escape(next(iter(result.errors.values())))}[/]")
    hall = f", {spec.cooling}-cooled hall" if spec.cooling else ""
    ui.console.print(f"cost: {data['assumptions']['cost']}; PUE {spec.pue:g}{hall}, ${spec.kwh_usd:g}/kWh")
