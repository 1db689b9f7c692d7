"""`fabricsim bench`: real measurements (collectives over torch.distributed, GPU memory) and nccl-tests logs.

Bad input exits 2 with one line; a run that fails (a rank died or hung) exits 1 with one line naming the rank;
results that fail the correctness check are printed and then exit 1, as nccl-tests reports them.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.bench import MemoryResult
    from fabricsim.nccltests import BenchResult

bench_app = typer.Typer(
    name="bench",
    help="Real measurements: collective benchmarks (gloo on CPU, NCCL on GPUs), GPU memory, nccl-tests logs.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


class Backend(StrEnum):
    """The torch.distributed backend `bench collective` measures."""

    gloo = "gloo"
    nccl = "nccl"


def _run_failed(message: str) -> None:
    """A run-time failure (not bad input): one line on stderr, exit code 1."""
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(code=1)


def _write_now(text: str) -> None:
    """Streamed table text: on stdout at once, even when stdout is a pipe."""
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()


@bench_app.command("collective")
@ui.spec_errors
def collective_command(
    op: list[str] = typer.Option(["all_reduce"], "--op", help="operation(s): repeat, comma-separate, or 'all'"),
    backend: Backend = typer.Option(Backend.gloo, "--backend", help="gloo (CPU) or nccl (GPUs)"),
    min_size: str = typer.Option("1K", "--min", "--min-bytes", "-b",
                                 help="smallest size (nccl-tests 'size'), e.g. 8, 1K, 64M"),
    max_size: str = typer.Option("64M", "--max", "--max-bytes", "-e",
                                 help="largest size (under torchrun write --max-bytes: torchrun takes --max for "
                                 "its own --max-restarts)"),
    step_factor: int = typer.Option(2, "--step-factor", "-f", help="multiply the size by this each step"),
    warmup: int = typer.Option(5, "--warmup", "-w", help="untimed operations before each measurement"),
    iters: int = typer.Option(20, "--iters", "-n", help="timed operations per measurement"),
    dtype: str = typer.Option("float32", "--dtype", "-d", help="float32, float16, bfloat16, float64, int8, uint8, "
                              "int32, int64 (nccl-tests names such as float, half also work)"),
    nprocs: int | None = typer.Option(None, "--nprocs", help="spawn this many local ranks (default: 2 for gloo, "
                                      "every GPU for nccl); leave out under torchrun"),
    timeout: str = typer.Option("300", "--timeout", help="fail when no rank makes progress for this long "
                                "(seconds, or 90s, 5m); covers start-up and each measurement"),
    check: bool = typer.Option(True, "--check/--no-check", help="check every result element (nccl-tests -c)"),
    master_addr: str = typer.Option("127.0.0.1", "--master-addr", help="rendezvous address for spawned ranks"),
    master_port: int = typer.Option(0, "--master-port", "--port", help="rendezvous port (0 picks a free one)"),
    fmt: ui.FormatOpt = None,
    as_json: ui.JsonOpt = False,
) -> None:
    """Benchmark collectives over torch.distributed and print nccl-tests' table (or JSON).

    With --nprocs N the ranks are spawned here; under torchrun (RANK, WORLD_SIZE, MASTER_ADDR set) this process
    joins the job as one rank and rank 0 prints, so the same command measures a multi-node cluster. The table
    streams as nccl-tests': each operation's header first, each size's line as soon as it is measured, then the
    footer; JSON and CSV come as one document at the end. Exit code 1
    when a rank dies or stops, or when any result element is wrong (the table is printed first).
    JSON: {"inputs": ..., "results": [one object per operation]}, a list even for one --op.
    """
    inputs = ui.command_inputs(locals())
    form = ui.output_format(fmt, as_json)
    from fabricsim.bench import BenchError, CollectiveConfig, parse_ops, run_collective_bench
    from fabricsim.inputs import parse_buffer_size
    from fabricsim.nccltests import canonical_dtype

    config = CollectiveConfig(
        ops=parse_ops(op),
        backend=backend.value,
        min_bytes=parse_buffer_size(min_size, "min"),
        max_bytes=parse_buffer_size(max_size, "max"),
        step_factor=step_factor,
        warmup=warmup,
        iters=iters,
        dtype=canonical_dtype(dtype),
        check=check,
        timeout_s=units.parse_duration(timeout, field="timeout"),
        nprocs=nprocs,
        master_addr=master_addr,
        master_port=master_port,
    )
    stream = None
    if form == "table":  # the table streams: header first, each size's line once measured, then the footer
        from fabricsim.nccltests import TableStream

        stream = TableStream(_write_now)
    try:
        results = run_collective_bench(config, listener=stream)
    except BenchError as exc:
        _run_failed(str(exc))
        return
    if results is None:
        return  # a torchrun rank other than 0: rank 0 prints
    dumped = [r.model_dump(mode="json") for r in results]
    if stream is not None:
        from fabricsim.nccltests import format_many

        _write_now(stream.remainder(format_many(results)))
    else:
        ui.emit(form, {"results": dumped}, inputs, [row for r in dumped for row in r["rows"]])
    wrong = sum(r.wrong_total for r in results)
    if wrong:
        rows = sum(1 for r in results for row in r.rows if row.wrong)
        _run_failed(f"{wrong} wrong elements in {rows} results (correctness check failed)")


def _memory_table(result: MemoryResult) -> Table:
    """One row per copy kind and size: time, GB/s and the HBM traffic it implies."""
    table = ui.new_table(title=f"GPU memory bandwidth: {result.device} (GPU {result.device_index})",
                         header_style="bold")
    for header in ("copy", "size", "time", "GB/s", "HBM traffic GB/s"):
        table.add_column(header)
    for row in result.rows:
        traffic = "-" if row.hbm_traffic_GBps is None else f"{row.hbm_traffic_GBps:.1f}"
        table.add_row(row.kind, units.format_size(row.size_bytes), units.format_duration(row.time_s),
                      f"{row.GBps:.1f}", traffic)
    return table


@bench_app.command("memory")
@ui.spec_errors
def memory_command(
    device: int = typer.Option(0, "--device", help="CUDA device index"),
    min_size: str = typer.Option("1M", "--min", help="smallest copy"),
    max_size: str = typer.Option("256M", "--max", help="largest copy"),
    step_factor: int = typer.Option(4, "--step-factor", help="multiply the copy size by this each step"),
    warmup: int = typer.Option(3, "--warmup", help="untimed copies before each measurement"),
    iters: int = typer.Option(10, "--iters", help="timed copies per measurement"),
    fmt: ui.FormatOpt = None,
    as_json: ui.JsonOpt = False,
) -> None:
    """HBM copy and host<->device (pinned, pageable) bandwidth of one CUDA GPU; without CUDA: no rows, exit 0."""
    from fabricsim.bench import MemoryConfig, run_memory_bench

    inputs = ui.command_inputs(locals())
    form = ui.output_format(fmt, as_json)
    from fabricsim.inputs import parse_buffer_size

    config = MemoryConfig(device=device, min_bytes=parse_buffer_size(min_size, "min"),
                          max_bytes=parse_buffer_size(max_size, "max"), step_factor=step_factor,
                          warmup=warmup, iters=iters)
    result = run_memory_bench(config)
    data = result.model_dump(mode="json", exclude_none=result.reason is not None)
    if ui.emit(form, data, inputs, data.get("rows", [])):
        return
    if result.reason:
        ui.console.print(f"bench memory: {result.reason}")
        return
    ui.console.print(_memory_table(result))
    ui.console.print(f"HBM copy {result.hbm_copy_GBps:.1f} GB/s (traffic {result.hbm_traffic_GBps:.1f} GB/s); "
                  f"PCIe h2d {result.pcie_h2d_GBps:.1f} GB/s, d2h {result.pcie_d2h_GBps:.1f} GB/s; "
                  f"PCIe figure for the model: {result.pcie_GBps:.1f} GB/s per direction")


def _parsed_table(result: BenchResult) -> Table:
    """One parsed nccl-tests table: size, count, placement, time, algbw, busbw and wrong elements per row."""
    where = f"{result.world_size or '?'} ranks" + (f" on {', '.join(result.hosts)}" if result.hosts else "")
    table = ui.new_table(title=f"{result.op} ({result.tool}, {where})", header_style="bold")
    for header in ("size", "count", "type", "placement", "time", "algbw GB/s", "busbw GB/s", "#wrong"):
        if header in ("type", "placement"):
            ui.text_column(table, header)
        else:
            ui.num_column(table, header)
    for row in result.rows:
        table.add_row(units.format_size(row.size_bytes), str(row.count), row.dtype,
                      "in-place" if row.in_place else "out-of-place", units.format_duration(row.time_s),
                      f"{row.algbw_GBps:.2f}", f"{row.busbw_GBps:.2f}", "N/A" if row.wrong is None else str(row.wrong))
    return table


# `bench parse` and `compare` read one log: the collective when it does not say.
LogOp = Annotated[str | None, typer.Option("--op", help="the collective, when the log does not say")]


@bench_app.command("parse")
@ui.spec_errors
def parse_command(
    log: str = typer.Argument(..., help="nccl-tests output (any *_perf binary, any launcher)"),
    op: LogOp = None,
    fmt: ui.FormatOpt = None,
    as_json: ui.JsonOpt = False,
) -> None:
    """Read an nccl-tests log into fabricsim's row schema (rows, devices, hosts, average busbw); JSON:
    {"inputs": ..., "results": [one object per results table]}."""
    from fabricsim.bench import parse_ops
    from fabricsim.nccltests import parse_nccl_tests_file

    inputs = ui.command_inputs(locals())
    form = ui.output_format(fmt, as_json)
    ops = parse_ops([op]) if op else None
    if ops is not None and len(ops) != 1:
        raise SpecError("give one operation (every table of the log is taken to be that one)", field="op")
    results = parse_nccl_tests_file(log, op=ops[0] if ops else None)
    dumped = [r.model_dump(mode="json") for r in results]
    if ui.emit(form, {"results": dumped}, inputs, [row for r in dumped for row in r["rows"]]):
        return
    for result in results:
        ui.console.print(_parsed_table(result))
        if result.avg_busbw_GBps is not None:
            ui.console.print(f"Avg bus bandwidth: {result.avg_busbw_GBps:g} GB/s")
