"""`fabricsim size`: the cheapest (or fastest, or least-energy) cluster and parallel plan to train a model on a
token budget under a deadline, budget and power cap; ranked plans, the Pareto frontier and the best plan per
system x fabric."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.api import size as size_api
from fabricsim.cli.goodput_options import storage_fallback_notes
from fabricsim.cli.infer_cmd import INFER_PLAN
from fabricsim.cli.launch_view import Checkpoint
from fabricsim.cli.options import (
    CALIBRATION,
    CLUSTER,
    GOODPUT,
    GOODPUT_SWITCH,
    PLAN,
    PRINT,
    REPORT,
    declared,
    from_api,
    given,
)
from fabricsim.cli.serve_options import SERVE

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.sizing import SizingResult

DAY_S = 86400.0


def _opt(help_text: str, *names: str) -> Any:
    return typer.Option(*names, help=help_text)


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
    headers = [h for h in ("#", "cluster", "plan", "days (80% band)", "cost", "$/Mtok", "MFU", "bound")
               if not (ui.narrow() and h in ("$/Mtok", "MFU"))]
    for header in headers:
        if header in ("#", "days (80% band)", "cost", "$/Mtok", "MFU"):
            ui.num_column(table, header)
        else:
            ui.text_column(table, header)
    for i, e in enumerate(rows, 1):
        per = e["usd_per_million_tokens"]
        mark = "pick" if pick is not None and _same_plan(e, pick) else ("tie" if e.get("tie") else str(i))
        cells = {"#": mark, "cluster": _cluster(e), "plan": _plan(e["plan"]),
                 "days (80% band)": _days(e),
                 "cost": units.format_usd(e["cost_usd"]),
                 "$/Mtok": "?" if per is None else f"{per:.3f}", "MFU": f"{e['mfu']:.2f}", "bound": e["bottleneck"]}
        table.add_row(*(cells[h] for h in headers))
    return table


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


class _Bar:
    """A rich progress bar over chunks showing plans evaluated, plans/s and the ETA (stderr)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("sizing"), BarColumn(), TextColumn("{task.completed}/{task.total} "
                                 "clusters"), TextColumn("{task.fields[plans]:,} plans {task.fields[rate]:,.0f}/s"),
                                 TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                                 transient=True)
        self.task = self.progress.add_task("size", total=None, plans=0, rate=0.0)

    def __call__(self, done: int, total: int, plans: int) -> None:
        elapsed = self.progress.tasks[0].elapsed or 1e-9
        self.progress.update(self.task, completed=done, total=total, plans=plans, rate=plans / elapsed)


SIZE = from_api(size_api, {
    "model": PLAN["model"][0],
    "tokens": Annotated[str | None, _opt("training tokens, e.g. 2T [default: 15T]", "--tokens")],
    "deadline": Annotated[str | None, _opt("time to train at most, e.g. 60d", "--deadline")],
    "budget": Annotated[str | None, _opt("total cost at most (USD), e.g. 50M", "--budget")],
    "power_cap": Annotated[str | None, _opt("facility power (IT x PUE) at most, e.g. 5MW", "--power-cap")],
    "gpus": Annotated[str | None, _opt("GPU counts: 1024..16384 (powers of two), a list or one", "--gpus")],
    "nodes": Annotated[str | None, _opt("node counts instead of --gpus", "--nodes")],
    "systems": Annotated[str | None, _opt("candidate systems (default: every priced one)", "--systems")],
    "fabrics": Annotated[str | None, _opt("candidate networks [default: hdr,ndr,xdr,eth-400g]", "--fabrics")],
    "fabric_kinds": Annotated[str | None, _opt("scale-out designs to search: fat-tree, rail-only (a network per "
                                                "rail), 2-plane (a fat tree of 2 planes): the same step, each its own "
                                                "bill [default: fat-tree]",
                                             "--fabric-kinds")],
    "oversubscription": Annotated[str, _opt("fat-tree oversubscriptions", "--oversubscription")],
    "rail_optimized": CLUSTER["rail_optimized"][0],
    "seq": Annotated[int, _opt("sequence length", "--seq")],
    "gbs": Annotated[str, _opt("global batch: fixed, list or range (512..4096)", "--gbs")],
    "tp": Annotated[str | None, _opt("tensor parallel sizes to try", "--tp")],
    "pp": Annotated[str | None, _opt("pipeline sizes to try", "--pp")],
    "cp": Annotated[str | None, _opt("context parallel sizes to try", "--cp")],
    "ep": Annotated[str | None, _opt("expert parallel sizes to try", "--ep")],
    "etp": Annotated[str | None, _opt("expert tensor-parallel sizes to try (default tp and 1)", "--etp")],
    "vpp": Annotated[str | None, _opt("virtual stages to try", "--vpp")],
    "mbs": Annotated[str | None, _opt("micro-batch sizes to try", "--mbs")],
    "recompute": Annotated[str | None, _opt("recompute modes to try", "--recompute")],
    "zero": Annotated[str | None, _opt("ZeRO stages to try", "--zero")],
    "precision": Annotated[str | None, _opt("precisions to try (bf16,fp8)", "--precision")],
    "flash_attn": PLAN["flash_attn"][0],
    "overlap": Annotated[bool, _opt("overlap gradient reduce / param gather", "--overlap/--no-overlap")],
    "dropout": Annotated[bool | None, _opt("hidden dropout masks [default: on]", "--dropout/--no-dropout")],
    "ep_comm_overlap": Annotated[bool | None, _opt("overlap the MoE all-to-all with compute [default: off]",
                                                 "--ep-comm-overlap/--no-ep-comm-overlap")],
    "shared_expert_overlap": Annotated[bool | None, _opt("run shared experts beside the all-to-all [default: off]",
                                                       "--shared-expert-overlap/--no-shared-expert-overlap")],
    "moe_balance": Annotated[str | None, _opt("expert load: forced, random or skewed [default: random]",
                                            "--moe-balance")],
    "moe_dispatcher": Annotated[str | None, _opt("token dispatch: alltoall or deepep [default: alltoall]",
                                               "--moe-dispatcher")],
    "capacity_factor": PLAN["capacity_factor"][0],
    "objective": Annotated[str, _opt("rank by time, cost or energy", "--objective")],
    "amortize": Annotated[str | None, _opt("capex amortisation period [default: 4y]", "--amortize")],
    "gpu_hour": Annotated[str | None, _opt("rent at this USD per GPU-hour instead", "--gpu-hour")],
    "pue": Annotated[float | None, _opt("power usage effectiveness [default: 1.3]", "--pue")],
    "kwh": Annotated[float | None, _opt("electricity USD per kWh [default: 0.08]", "--kwh")],
    "top": Annotated[int, _opt("rows in the ranked table", "--top")],
    "executor": Annotated[str | None, _opt("where the training search runs: local (process pool), ray or serial "
                                         "[default: local]", "--executor")],
    "engine": Annotated[str | None, _opt("with --inference, the serving engine NAME[@VERSION]: trtllm, vllm or "
                                       "sglang [default: trtllm] (the training search's executor is --executor)",
                                       "--engine")],
    "workers": Annotated[int | None, _opt("processes [default: all cores]", "--workers")],
    "ray_address": Annotated[str | None, _opt("Ray cluster address [default: start a local one]",
                                            "--ray-address")],
    "out": Annotated[Path | None, _opt("stream results to this Parquet file", "--out")],
    "resume": Annotated[bool, _opt("continue an interrupted --out search", "--resume")],
    "exhaustive": Annotated[bool, _opt("time every plan that fits (for an --out file of all of them); by default "
                                     "each cluster times only the plans that can change the answer (same "
                                     "results)", "--exhaustive/--no-exhaustive")],
    "plot": (Annotated[Path | None, _opt("save the time-cost plot (PNG)", "--plot")], None),
    "inference": Annotated[bool, _opt("size serving instead of training (cheapest system, plan and replicas "
                                    "meeting TTFT/TPOT SLOs at --rate)", "--inference/--no-inference")],
    "rate": Annotated[str | None, _opt("inference: requests per second, e.g. 20", "--rate")],
    "slo_ttft": SERVE["slo_ttft"][0],
    "slo_tpot": SERVE["slo_tpot"][0],
    "prompt": INFER_PLAN["prompt"][0],
    "output": INFER_PLAN["output"][0],
    "weights": Annotated[str | None, _opt("inference: weight formats [default: bf16,fp8,int4]", "--weights")],
    "kv": Annotated[str | None, _opt("inference: KV-cache formats [default: bf16,fp8]", "--kv")],
    "duration": Annotated[str | None, _opt("inference: simulated arrival window [default: 120s]",
                                            "--duration")],
    "seed": Annotated[int, _opt("inference: seed of the simulated arrivals", "--seed")],
    "max_gpus": Annotated[int | None, _opt("inference: at most this many GPUs in all", "--max-gpus")],
    "slo_percentile": Annotated[int | None, _opt("inference: SLO percentile 50, 90 or 99 [default: 90]",
                                               "--slo-percentile")],
    "utilization": Annotated[float | None, _opt("inference: target utilisation of a replica's capacity "
                                              "[default: 0.8]", "--utilization")],
    "confirm": Annotated[int | None, _opt("inference: candidates confirmed by simulation [default: 5]",
                                        "--confirm")],
    "whole_nodes": Annotated[bool, _opt("inference: bill whole nodes, not the GPUs used",
                                      "--whole-nodes/--no-whole-nodes")],
    "disagg": Annotated[bool, _opt("inference: also search disaggregated prefill and decode pools (each pool's plan "
                                 "and the P:D ratio), simulated", "--disagg/--no-disagg")],
    "checkpoint": Checkpoint,
    "goodput": GOODPUT_SWITCH["goodput"][0],
    "storage": Annotated[str, _opt("storage tiers to search, comma-separated (fabricsim catalog storage); each "
                                 "cluster takes the cheapest per hour of kept training",
                                 "--storage")],
    "storage_bw": Annotated[str | None, _opt("aggregate storage write rates to search, comma-separated (e.g. "
                                           "500GB/s,2TB/s), servers sized to each [default: the tier's]",
                                           "--storage-bw")],
    "storage_network": GOODPUT["storage_network"][0],
    "storage_server": GOODPUT["storage_server"][0],
    "storage_servers": GOODPUT["storage_servers"][0],
    "spares": Annotated[str | None, _opt("hot spares to search, comma-separated counts of units (servers, or a "
                                       "rack's compute trays; 4) or shares of them (2%) [default: 5%, sourced]",
                                       "--spares")],
    "checkpoint_mode": GOODPUT["checkpoint_mode"][0],
    "checkpoint_interval": GOODPUT["checkpoint_interval"][0],
    "mtbf_scale": GOODPUT["mtbf_scale"][0],
    "restart": GOODPUT["restart"][0],
    "calibration": CALIBRATION["calibration"][0],
    "fmt": PRINT["fmt"],
    "as_json": PRINT["as_json"],
    "report": REPORT["report"],
})


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
    bar = None if form != "table" or not sys.stderr.isatty() else _Bar()
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
    from rich.markup import escape

    for line in no_plan_lines(result):
        ui.console.print(f"[yellow]{escape(line)}[/]")
    if result.errors:
        ui.console.print(f"[yellow]{len(result.errors)} cluster(s) cannot be built, e.g. "
                      f"{escape(next(iter(result.errors.values())))}[/]")
    ui.console.print(f"cost: {data['assumptions']['cost']}; PUE {spec.pue:g}, ${spec.kwh_usd:g}/kWh")
