"""Start a collective benchmark: spawn local ranks under a watchdog, or join a torchrun job.

- Under torchrun (``RANK`` and ``WORLD_SIZE`` set, rendezvous via ``MASTER_ADDR``/``MASTER_PORT``) this
  process is one rank: the same command measures a multi-node cluster; rank 0 returns the results.
- Otherwise ``nprocs`` ranks are spawned here (multiprocessing ``spawn``). This process hosts the rendezvous
  store, so a port already in use is found before any rank starts, and watches the ranks: each publishes a
  progress mark (see :func:`fabricsim.bench.config.phase_name`) into shared memory. A rank that exits
  non-zero fails the run at once ("rank 1 died (exit code 17)"); when no mark moves for ``timeout_s`` the run
  fails naming the rank(s) furthest behind ("rank 1 did not finish all_reduce 1K out-of-place within 10 s").
  Stragglers are killed; nothing is left running and nothing hangs. Rank 0 sends each row, as soon as every
  rank has measured it, through a pipe that the watchdog loop relays to the caller's listener (so the table
  streams as nccl-tests prints it); under torchrun rank 0 calls the listener itself.

This module does not import torch at import time; the spawned ranks import it.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from fabricsim.bench._torch import require_torch
from fabricsim.bench.config import CollectiveConfig, phase_name, plan
from fabricsim.bench.errors import BenchError
from fabricsim.bench.faults import fault_from_env
from fabricsim.errors import SpecError
from fabricsim.nccltests import BenchListener, BenchResult, BenchRow

_PEER_ERRORS = ("closed by peer", "reset by peer", "broken pipe", "connection refused", "timed out")
_GRACE_S = 1.0  # after a rank fails, how long to wait for the others to report what they saw
_POLL_S = 0.2


def torchrun_env(environ: Mapping[str, str] | None = None) -> tuple[int, int, int] | None:
    """``(rank, world_size, local_rank)`` when launched by torchrun (or any launcher setting RANK/WORLD_SIZE)."""
    env = os.environ if environ is None else environ
    if "RANK" not in env or "WORLD_SIZE" not in env:
        return None
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local = int(env.get("LOCAL_RANK", "0"))
    except ValueError:
        raise SpecError(f"RANK={env['RANK']!r}, WORLD_SIZE={env['WORLD_SIZE']!r} are not whole numbers",
                        field="RANK") from None
    if not 0 <= rank < world:
        raise SpecError(f"RANK {rank} is outside WORLD_SIZE {world}", field="RANK")
    for var in ("MASTER_ADDR", "MASTER_PORT"):
        if var not in env:
            raise SpecError(f"RANK and WORLD_SIZE are set but {var} is not (launch with torchrun)", field=var)
    return rank, world, local


def run_collective_bench(config: CollectiveConfig,
                         listener: BenchListener | None = None) -> list[BenchResult] | None:
    """Measure ``config``: one :class:`BenchResult` per operation, or None on torchrun ranks other than 0.

    ``listener`` (rank 0 under torchrun; this process when ranks are spawned) receives each operation's start,
    each row as soon as it is measured, and each operation's result, while the run goes on.
    """
    torch = require_torch()
    fault_from_env()  # a malformed fault is an input error, reported before anything starts
    joined = torchrun_env()
    if joined is not None:
        if config.nprocs is not None:
            raise SpecError("under torchrun (RANK/WORLD_SIZE set) the launcher starts the ranks; drop --nprocs",
                            field="nprocs")
        return _run_joined(config, *joined, listener=listener)
    world = config.nprocs or _default_nprocs(torch, config.backend)
    _check_backend(torch, config.backend, world)
    config.check_world(world)
    check_launch(config, world)
    return _run_spawned(config, world, listener)


MAX_RANKS_PER_CORE = 4  # spawned ranks beyond this many per CPU core are refused (each is a Python process)


def check_launch(config: CollectiveConfig, world: int) -> None:
    """Before spawning: the rank count suits this machine's cores (refused above 4 per core, a warning above 1
    per core) and the rendezvous address resolves (at once, not after the whole timeout)."""
    cores = os.cpu_count() or 1
    if world > MAX_RANKS_PER_CORE * cores:
        raise SpecError(f"{world} ranks on {cores} CPU cores (at most {MAX_RANKS_PER_CORE * cores} here); "
                        "run fewer ranks, or use torchrun across machines", field="nprocs")
    if world > cores and config.backend == "gloo":
        sys.stderr.write(f"warning: {world} ranks share {cores} CPU cores; the run will be slow and the timings "
                         "pessimistic\n")
    check_master_addr(config.master_addr, config.master_port)


def check_master_addr(addr: str, port: int) -> None:
    """The rendezvous host must resolve (one line naming it and the port, not C++ frames after the timeout)."""
    if not addr.strip():
        raise SpecError("empty; give a host name or address (default 127.0.0.1)", field="master_addr")
    try:
        socket.getaddrinfo(addr, port or None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        where = f"{addr}:{port}" if port else f"{addr} (port chosen at start)"
        raise SpecError(f"cannot resolve {where}: {reason}", field="master_addr") from None


def _default_nprocs(torch: Any, backend: str) -> int:
    if backend == "nccl" and torch.cuda.is_available():
        return int(torch.cuda.device_count())
    return 2


def _check_backend(torch: Any, backend: str, world: int) -> None:
    dist = torch.distributed
    if backend == "gloo" and not dist.is_gloo_available():
        raise SpecError("this torch build has no gloo backend", field="backend")
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise SpecError("backend nccl needs CUDA GPUs and this machine has none (use --backend gloo)",
                            field="backend")
        if not dist.is_nccl_available():
            raise SpecError("this torch build has no NCCL backend", field="backend")
        if world > torch.cuda.device_count():
            raise SpecError(f"{world} ranks need {world} GPUs; this machine has {torch.cuda.device_count()}",
                            field="nprocs")


def _run_joined(config: CollectiveConfig, rank: int, world: int, local_rank: int,
                listener: BenchListener | None = None) -> list[BenchResult] | None:
    torch = require_torch()
    _check_backend(torch, config.backend, 1)
    config.check_world(world)
    from fabricsim.bench.harness import run_rank

    try:
        return run_rank(config, rank, world, local_rank, mark=lambda _: None, listener=listener)
    except (SpecError, BenchError):
        raise
    except Exception as exc:
        raise BenchError(f"rank {rank} failed: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _start_store(config: CollectiveConfig, world: int) -> Any:
    dist = require_torch().distributed
    try:
        return dist.TCPStore(config.master_addr, config.master_port, world, is_master=True,
                             wait_for_workers=False, timeout=timedelta(seconds=config.timeout_s))
    except Exception as exc:
        text = str(exc)
        if "EADDRINUSE" in text or "address already in use" in text.lower():
            raise SpecError(f"port {config.master_port} is already in use; pass --master-port with a free port "
                            "(0 picks one)", field="master_port") from None
        raise BenchError(f"cannot open the rendezvous store on port {config.master_port}: {_first_line(exc)}") \
            from None


def _run_spawned(config: CollectiveConfig, world: int, listener: BenchListener | None = None) -> list[BenchResult]:
    store = _start_store(config, world)
    ctx = mp.get_context("spawn")
    progress = ctx.RawArray("q", world)
    steps = plan(config, world)
    # rank 0 sends the listener's calls here as they happen; the watchdog loop relays them
    events, sender = ctx.Pipe(duplex=False) if listener is not None else (None, None)
    with tempfile.TemporaryDirectory(prefix="fabricsim-bench-") as tmp:
        workdir = Path(tmp)
        procs = [ctx.Process(target=_spawned_rank, name=f"fabricsim-bench-rank{rank}", daemon=True,
                             args=(config, rank, world, int(store.port), str(workdir), progress,
                                   sender if rank == 0 else None))
                 for rank in range(world)]
        relay = _Relay(events, listener)
        try:
            for proc in procs:
                proc.start()
            if sender is not None:
                sender.close()  # rank 0 holds the only write end now: its exit ends the stream
            _watch(procs, progress, config.timeout_s, steps, workdir, relay)
        finally:
            relay.close()
            if sender is not None:
                sender.close()
            started = [proc for proc in procs if proc.pid is not None]
            for proc in started:
                if proc.exitcode is None:
                    proc.kill()
            for proc in started:
                proc.join(timeout=5)
        result_file = workdir / "result.json"
        if not result_file.exists():
            raise BenchError("rank 0 finished without writing results")
        data = json.loads(result_file.read_text())
    del store
    return [BenchResult.model_validate(item) for item in data]


class _Relay:
    """The parent's end of rank 0's event pipe: each ``(method, args)`` received is a call on the listener."""

    def __init__(self, conn: Connection | None, listener: BenchListener | None) -> None:
        self.conn, self.listener = conn, listener

    def waitables(self) -> list[Any]:
        return [self.conn] if self.conn is not None else []

    def pump(self) -> None:
        """Relay every event that has arrived (waits for none); the pipe's end (rank 0 gone) closes it."""
        while self.conn is not None and self.conn.poll():
            try:
                method, args = self.conn.recv()
            except (EOFError, OSError):
                self.close()
                return
            if self.listener is not None:
                getattr(self.listener, method)(*args)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class _PipeListener:
    """Rank 0's listener when spawned: each call goes through the pipe to the launching process."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def begin(self, result: BenchResult, sizes: list[int], placements: list[bool]) -> None:
        self.conn.send(("begin", (result, sizes, placements)))

    def row(self, row: BenchRow) -> None:
        self.conn.send(("row", (row,)))

    def end(self, result: BenchResult) -> None:
        self.conn.send(("end", (result,)))


def _watch(procs: Sequence[BaseProcess], progress: Any, timeout_s: float, steps: list[Any], workdir: Path,
           relay: _Relay | None = None) -> None:
    relay = relay or _Relay(None, None)
    last = list(progress)
    last_change = time.monotonic()
    while True:
        relay.pump()
        running = [p for p in procs if p.exitcode is None]
        failed = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
        if failed:
            deadline = time.monotonic() + _GRACE_S
            while time.monotonic() < deadline and any(p.exitcode is None for p in procs):
                wait([p.sentinel for p in procs if p.exitcode is None], timeout=_POLL_S)
            relay.pump()  # rows measured before the failure are still reported
            raise BenchError(_failure_message(procs, workdir))
        if not running:
            relay.pump()
            return
        wait([p.sentinel for p in running] + relay.waitables(), timeout=_POLL_S)
        now = list(progress)
        if now != last:
            last, last_change = now, time.monotonic()
        elif time.monotonic() - last_change > timeout_s and any(p.exitcode is None for p in procs):
            raise BenchError(_stall_message(now, procs, timeout_s, steps))


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _last_output(workdir: Path, rank: int) -> str:
    try:
        lines = [ln.strip() for ln in (workdir / f"rank{rank}.log").read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    return lines[-1][:200] if lines else ""


def _failure_message(procs: Sequence[BaseProcess], workdir: Path) -> str:
    """Name the rank that caused the failure: one that died without a word before one that reported an error,
    and a reported error of its own before one that only says a peer went away."""
    died: list[str] = []
    reported: list[tuple[bool, str]] = []
    for rank, proc in enumerate(procs):
        code = proc.exitcode
        if code in (None, 0):
            continue
        error_file = workdir / f"rank{rank}.error"
        if error_file.exists():
            error = error_file.read_text().strip()
            peer = any(marker in error.lower() for marker in _PEER_ERRORS)
            reported.append((peer, f"rank {rank} failed: {error}"))
        else:
            text = f"rank {rank} died ({_exit_text(code)})"
            output = _last_output(workdir, rank)
            died.append(f"{text}; its last output: {output}" if output else text)
    if died:
        return "; ".join(died)
    reported.sort(key=lambda item: item[0])
    return reported[0][1]


def _stall_message(marks: list[int], procs: Sequence[BaseProcess], timeout_s: float, steps: list[Any]) -> str:
    alive = [r for r, p in enumerate(procs) if p.exitcode is None]
    low = min(marks[r] for r in alive)
    behind = [r for r in alive if marks[r] == low]
    others = [r for r in alive if r not in behind]
    who = f"rank {behind[0]}" if len(behind) == 1 else "ranks " + ", ".join(map(str, behind))
    text = f"{who} did not finish {phase_name(low, steps)} within {timeout_s:g} s"
    if others:
        waiting = "rank " + str(others[0]) if len(others) == 1 else "ranks " + ", ".join(map(str, others))
        text += f" ({waiting} waiting)"
    return text


def _spawned_rank(config: CollectiveConfig, rank: int, world: int, port: int, workdir: str, progress: Any,
                  events: Connection | None = None) -> None:
    """Entry point of a spawned rank: output to its log file, result (rank 0) or error to files, hard exit;
    rank 0 sends the listener's calls through ``events`` as they happen."""
    work = Path(workdir)
    log = os.open(work / f"rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    code = 0
    try:
        torch = require_torch()
        if config.backend == "gloo":
            torch.set_num_threads(1)  # several ranks share this machine's cores
        from fabricsim.bench.harness import run_rank

        def mark(value: int) -> None:
            progress[rank] = value

        store = torch.distributed.TCPStore(config.master_addr, port, world, is_master=False,
                                           timeout=timedelta(seconds=_pg_timeout(config)))
        results = run_rank(config, rank, world, rank, mark, store=store, pg_timeout_s=_pg_timeout(config),
                           listener=None if events is None else _PipeListener(events))
        if results is not None:
            tmp = work / "result.json.tmp"
            tmp.write_text(json.dumps([r.model_dump(mode="json") for r in results]))
            tmp.replace(work / "result.json")
    except BaseException as exc:
        (work / f"rank{rank}.error").write_text(_first_line(exc))
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)


def _pg_timeout(config: CollectiveConfig) -> float:
    """The ranks' own collective timeout: longer than the watchdog's, so the watchdog names the culprit."""
    return 2 * config.timeout_s + 30
