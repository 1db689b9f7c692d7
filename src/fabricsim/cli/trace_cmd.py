"""`fabricsim trace`: import a profiler trace (PyTorch/Kineto JSON, .json.gz, Nsight Systems SQLite) and show
where a step's time went, optionally against fabricsim's prediction of the same plan; calibrate on its
collectives."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.cli.calibrate_cmd import OverlayOut, StartOverlay, calibration_tables, stderr_warnings
from fabricsim.cli.options import (
    TRACE_MERGE,
    Calibration,
    Cp,
    Dp,
    Ep,
    Fabric,
    Gbs,
    Gpus,
    Mbs,
    Pp,
    Precision,
    Recompute,
    Seq,
    StragglerThreshold,
    Tp,
    Workers,
    Zero,
)
from fabricsim.cli.topo_options import Ib

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.analysis import CompareRow
    from fabricsim.calibration import GemmEfficiency
    from fabricsim.catalog import Catalog
    from fabricsim.traces import DeviceSummary, TraceSummary

trace_app = typer.Typer(
    name="trace",
    help="Profiler traces (PyTorch/Kineto JSON, Nsight Systems SQLite): where a step's time went, measured against "
         "the model, and calibration on their collectives.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

TraceFile = Annotated[Path, typer.Argument(help="PyTorch profiler / Kineto trace (.json, .json.gz) or Nsight "
                                                "Systems SQLite export (nsys export --type sqlite)")]
TraceFiles = Annotated[list[Path], typer.Argument(
    help="PyTorch profiler / Kineto trace (.json, .json.gz) or Nsight Systems SQLite export (nsys export --type "
         "sqlite); or one file per rank of a job (several files, a directory or a glob), aligned by step and merged")]
GLOB = re.compile(r"[*?\[]")
"""a path that does not exist and holds these is a glob of rank files"""
Rank = Annotated[int | None, typer.Option("--rank", help="the device to report: GPU index in the trace (a CPU "
                                                         "profile: process id), or the trace's distributed rank "
                                                         "when it holds one GPU; default the first")]
MaxEvents = Annotated[int | None, typer.Option("--max-events", help="refuse traces with more kernels and operators "
                                                                    "than this (default 8,000,000: 2 GB at peak)")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="preset name or model spec file: compare the trace "
                                                              "with fabricsim's prediction of this plan")]
SystemOpt = Annotated[str | None, typer.Option("--system", help="system preset the trace ran on (default with "
                                                                "--model: dgx-h100)")]


def _progress() -> tuple[Any, Any]:
    """A reading progress bar (percent of the file, or of an export's kernels) on stderr for traces that take more
    than 2 s, and its closer."""
    from fabricsim.api import progress_bar

    bar = progress_bar(unit="%")
    if bar is None:
        return None, lambda: None
    return (lambda done, total: bar("reading trace", 100 * done // max(total, 1), 100)), bar.close


def _file_progress() -> tuple[Any, Any]:
    """A progress bar of rank files read, on stderr for merges that take more than 2 s, and its closer."""
    from fabricsim.api import progress_bar

    bar = progress_bar(unit="files")
    if bar is None:
        return None, lambda: None
    return (lambda done, total: bar("reading rank files", done, total)), bar.close


def load_summary(path: Path, rank: int | None, max_events: int | None) -> TraceSummary:
    """Read and summarise a trace with a progress bar on a terminal."""
    from fabricsim.traces import MAX_EVENTS, import_trace

    if max_events is not None and max_events < 1:
        from fabricsim.errors import SpecError

        raise SpecError(f"must be at least 1, got {max_events}", field="--max-events")
    progress, close = _progress()
    try:
        return import_trace(path, device=rank, max_events=max_events or MAX_EVENTS, progress=progress)
    finally:
        close()


def _gpu_for(summary: TraceSummary, device: DeviceSummary, catalog: Catalog, system: str | None) -> Any:
    """The catalog GPU the GEMMs ran on: the system's, else the one the trace's device name matches."""
    from fabricsim.calibration import device_matches

    if system is not None:
        return catalog.gpu(catalog.system(system).gpu)
    if device.kind != "gpu" or not device.name:
        return None
    found = [g for g in catalog.gpus.values() if device_matches(device.name, g.id)]
    return found[0] if len(found) == 1 else None


def _efficiency(summary: TraceSummary, device: DeviceSummary, catalog: Catalog,
                system: str | None) -> GemmEfficiency | None:
    from fabricsim.calibration import gemm_efficiency

    gpu = _gpu_for(summary, device, catalog, system)
    if device.gemm is None or gpu is None or device.kind != "gpu":
        return None
    return gemm_efficiency(device.gemm, gpu)


def _gemm_note(device: DeviceSummary, eff: GemmEfficiency | None) -> str | None:
    """Why no GEMM efficiency is reported (None: one is)."""
    if eff is not None:
        return eff.note
    if device.gemm_note is not None:
        return device.gemm_note
    if device.gemm is None:
        return None
    return (f"no GEMM efficiency: the trace's GPU {device.name or '(unnamed)'!r} matches no single catalog GPU; "
            "name the system it ran on with --system")


def check_system(summary: TraceSummary, device: DeviceSummary, system: str, catalog: Catalog) -> list[str]:
    """Refuse a GPU trace that cannot have run on ``--system`` (another GPU), with or without --model; a profile
    without GPU kernels has nothing to check here (--model checks it, since the plan is priced on the system)."""
    from fabricsim.calibration import check_trace

    if device.kind != "gpu":
        return []
    return check_trace(summary, device, catalog.system(system), catalog)


def check_world(summary: TraceSummary, gpus: int | None, how: str = "") -> None:
    """Refuse comparing a trace with a plan of another world size (distributedInfo.world_size vs the plan's GPUs,
    ``how`` saying where the plan's number comes from)."""
    from fabricsim.errors import SpecError

    world = summary.world_size
    if world is not None and gpus is not None and gpus != world:
        raise SpecError(f"the plan has {gpus} GPUs{how} but the trace is of a run on {world} ranks "
                        f"(distributedInfo.world_size); compare it with the plan it ran (--gpus {world})",
                        field="--gpus")


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:6.1%}" if whole > 0 else "-"


def device_tables(device: DeviceSummary) -> list[Table]:
    """Kernel time by class, the step's overlap figures, and the collectives by operation and size."""
    step = device.step_time_s
    classes = ui.new_table(title=f"device {device.device} {device.name}: kernel time by class per step "
                              f"({device.steps} step{'s' if device.steps != 1 else ''}, {device.step_source})")
    ui.text_column(classes, "class")
    for header in ("kernels", "kernel time", "busy", "share of step"):
        ui.num_column(classes, header)
    for c in device.classes:
        classes.add_row(c.kind, f"{c.count:g}", units.format_duration(c.kernel_time_s),
                        units.format_duration(c.busy_s), _pct(c.busy_s, step))
    overlap = ui.new_table(title="compute and communication per step")
    ui.text_column(overlap, "quantity")
    ui.num_column(overlap, "time")
    ui.num_column(overlap, "share of step")
    for label, value in (("step time", step), ("compute (union)", device.compute_s),
                         ("communication (union)", device.communication_s),
                         ("overlapped communication", device.overlap_s),
                         ("exposed communication", device.exposed_comm_s), ("idle", device.idle_s)):
        overlap.add_row(label, units.format_duration(value), _pct(value, step))
    colls = ui.new_table(title="collectives per step by operation and size")
    ui.text_column(colls, "op")
    for header in ("size", "ranks", "calls", "time", "per call", "busbw GB/s"):
        ui.num_column(colls, header)
    for call in device.collectives:
        bw = call.busbw_bytes_per_s
        colls.add_row(call.op, units.format_size(call.size_bytes) if call.size_bytes else "?",
                      str(call.nranks or "?"), f"{call.count:g}", units.format_duration(call.time_s),
                      units.format_duration(call.mean_time_s), f"{bw / 1e9:.1f}" if bw else "-")
    return [classes, overlap, colls] if device.collectives else [classes, overlap]


def compare_table(rows: list[CompareRow], title: str) -> Table:
    """Measured against predicted, per quantity."""
    table = ui.new_table(title=title)
    ui.text_column(table, "quantity")
    for header in ("measured", "predicted", "error"):
        ui.num_column(table, header)
    ui.text_column(table, "note")
    for r in rows:
        table.add_row(r.quantity, units.format_duration(r.measured_s), units.format_duration(r.predicted_s),
                      f"{r.error:+.1%}" if r.error is not None else "-", r.note)
    return table


def _gemm_line(device: DeviceSummary, eff: GemmEfficiency | None) -> str | None:
    """The GEMMs' rate and efficiency, or why there is none (a rate above the GPU's peak is not printed)."""
    note = _gemm_note(device, eff)
    if device.gemm is None:
        return note
    g = device.gemm
    text = f"GEMMs with recorded shapes: {g.ops:g} per step, {g.flops / 1e12:.3g} TFLOP"
    if eff is not None and not eff.plausible:
        return f"{text}; {note}"
    text += (f" in {units.format_duration(g.time_s)}: {g.achieved_flops_per_s / 1e12:.3g} TFLOP/s "
             f"({g.dtype or '?'})")
    if eff is not None and eff.fraction is not None and eff.peak_flops_per_s is not None:
        text += f", {eff.fraction:.1%} of the {eff.gpu} dense peak {eff.peak_flops_per_s / 1e12:.0f} TFLOP/s"
    elif note:
        text += f"; {note}"
    return text


def _efficiency_json(eff: GemmEfficiency | None, **extra: Any) -> dict[str, Any] | None:
    return None if eff is None else {**eff.to_json(), **extra}


@trace_app.command("import")
@ui.spec_errors
def import_command(
    files: TraceFiles,
    model: ModelOpt = None,
    system: SystemOpt = None,
    gpus: Gpus = None,
    tp: Tp = 1,
    pp: Pp = 1,
    dp: Dp = None,
    cp: Cp = 1,
    ep: Ep = 1,
    seq: Seq = 4096,
    gbs: Gbs = 512,
    mbs: Mbs = None,
    recompute: Recompute = None,
    zero: Zero = None,
    precision: Precision = "bf16",
    fabric: Fabric = None,
    calibration: Calibration = None,
    rank: Rank = None,
    max_events: MaxEvents = None,
    straggler_threshold: StragglerThreshold = TRACE_MERGE["straggler_threshold"][1],
    workers: Workers = TRACE_MERGE["workers"][1],
    fmt: ui.FormatOpt = None,
    as_json: ui.JsonOpt = False,
) -> None:
    """Where a profiled step's time went: kernel time by class (GEMM, attention, element-wise, memory,
    communication), collectives by operation and size, overlapped and exposed communication; with --model, the
    same quantities against fabricsim's prediction of that plan. Given one file per rank (several files, a
    directory or a glob): the ranks aligned by step, each step's slowest rank and spread, and the stragglers."""
    from fabricsim.catalog import load_catalog

    form = ui.output_format(fmt, as_json)
    if len(files) != 1 or files[0].is_dir() or (not files[0].exists() and GLOB.search(str(files[0]))):
        from fabricsim.cli.trace_merge_cmd import merge_command

        if max_events is not None and max_events < 1:
            from fabricsim.errors import SpecError

            raise SpecError(f"must be at least 1, got {max_events}", field="--max-events")
        merge_command(files, locals(), form, *_file_progress())
        return
    file = files[0]
    inputs = {"file": file, **ui.command_inputs(locals(), drop=("as_json", "fmt", "files", "file",
                                                               "straggler_threshold", "workers", "form"))}
    summary = load_summary(file, rank, max_events)
    device = summary.device(rank)
    catalog = load_catalog(*(calibration or []))
    if system is not None and model is None:
        summary.warnings.extend(check_system(summary, device, system, catalog))
    eff = _efficiency(summary, device, catalog, system)
    rows: list[CompareRow] | None = None
    title = ""
    if model is not None:
        from fabricsim.analysis import compare_step
        from fabricsim.api import PlanOptions, prepare_run
        from fabricsim.calibration import check_trace
        from fabricsim.cli.train_cmd import run_title

        summary.warnings.extend(check_trace(summary, device, catalog.system(system or "dgx-h100"), catalog))
        check_world(summary, gpus)
        plan_options = PlanOptions.model_validate({  # the other plan options at their defaults
            "model": model, "system": system or "dgx-h100", "gpus": gpus, "tp": tp, "pp": pp, "dp": dp, "cp": cp,
            "ep": ep, "seq": seq, "gbs": gbs, "mbs": mbs, "recompute": recompute, "zero": zero,
            "precision": precision, "ib": fabric})
        run = prepare_run(plan_options, calibration or [])
        plan = run.plan
        check_world(summary, plan.world_size, f" (tp {plan.tp} x pp {plan.pp} x dp {plan.dp} x cp {plan.cp})")
        rows = compare_step(device, run.prediction, run.cluster)
        title = f"measured (device {device.device}) vs predicted: {run_title(run)}"
    data = {"summary": summary.to_json(), "device": device.device,
            "gemm_efficiency": _efficiency_json(eff), "gemm_note": _gemm_note(device, eff),
            "comparison": None if rows is None else [r.to_json() for r in rows]}
    csv_rows = [r.to_json() for r in rows] if rows is not None else [
        {"device": device.device, **{k: v for k, v in vars(c).items()}} for c in device.classes]
    if ui.emit(form, data, inputs, csv_rows):
        return
    ui.console.print(f"{file}: {summary.format} trace, backend {summary.backend or '?'}, rank "
                  f"{summary.rank if summary.rank is not None else '?'} of {summary.world_size or '?'}, "
                  f"{len(summary.devices)} device(s)")
    for table in device_tables(device):
        ui.console.print(table)
    line = _gemm_line(device, eff)
    if line:
        ui.console.print(line)
    if rows is not None:
        ui.console.print(compare_table(rows, title))
    stderr_warnings(summary.warnings)


@trace_app.command("calibrate")
@ui.spec_errors
def calibrate_command(
    file: TraceFile,
    system: Annotated[str, typer.Option("--system", help="system preset the trace ran on")],
    fabric: Ib = None,
    rank: Rank = None,
    out: OverlayOut = None,
    calibration: StartOverlay = [],  # noqa: B006
    max_events: MaxEvents = None,
    fmt: ui.FormatOpt = None,
    as_json: ui.JsonOpt = False,
) -> None:
    """Fit link efficiencies and latencies to the trace's collectives, with the checks nccl-tests logs get (a CPU or
    gloo run, devices that are not the system's GPU, bus bandwidth above its links are refused); GEMM efficiency
    is reported, not written (the overlay holds link and latency parameters only)."""
    from fabricsim.calibration import calibrate_trace
    from fabricsim.catalog import load_catalog
    from fabricsim.inputs import check_output_path

    inputs = ui.command_inputs(locals())
    form = ui.output_format(fmt, as_json)
    out = check_output_path(out, "--out")
    catalog = load_catalog(*calibration)
    summary = load_summary(file, rank, max_events)
    result, warnings = calibrate_trace(summary, system, catalog, device=rank, fabric=fabric)
    result = result.model_copy(update={"warnings": warnings + result.warnings})
    written = out if out is not None and not result.kept_catalog else None
    if written is not None:
        result.write(written)
    device = summary.device(rank)
    eff = _efficiency(summary, device, catalog, system)
    data = result.model_dump(mode="json") | {
        "overlay_file": str(written) if written else None,
        "gemm_efficiency": _efficiency_json(eff, written=False), "gemm_note": _gemm_note(device, eff)}
    if ui.emit(form, data, inputs, data["rows"]):
        return
    for table in calibration_tables(result, len(result.rows)):
        for column in table.columns:  # a long trace path folds at 80 columns rather than being cut
            column.overflow = "fold"
            if column.header == "log":
                column.justify = "left"
        ui.console.print(table)
    line = _gemm_line(device, eff)
    if line:
        ui.console.print(line + " (reported only: the overlay holds link and latency parameters)")
    stderr_warnings(result.warnings)
    if written is not None:
        ui.console.print(f"overlay written to {written}; use it with --calibration {written}")
    elif out is not None:
        ui.console.print(f"no overlay written to {out}: the fit does not beat the catalog on these measurements")
