"""The benchmark body one rank runs: join the process group, time every step, check it, send it to rank 0.

Imports torch (the launcher imports this module only inside a run). Timing follows nccl-tests: ``warmup``
untimed operations, a barrier, then ``iters`` back-to-back operations between two host timestamps (after a
device synchronize on GPUs); the time of one operation is that span / ``iters``, averaged over ranks. With
``check``, one more operation runs on known data and every element of each rank's result is compared with what
it must be; ``wrong`` is the count summed over ranks (nccl-tests ``-c 1`` reports the same). Each step's figures
reach rank 0 right after the step (outside the timed region), so rank 0 can report each row as nccl-tests prints
it, while the sweep goes on.
"""

from __future__ import annotations

import os
import platform
import socket
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from fabricsim.bench.config import CollectiveConfig, Step, plan
from fabricsim.bench.faults import Fault, fault_from_env
from fabricsim.bench.torchops import NOTES, TORCH_DTYPES, Buffers, count_wrong, make_step
from fabricsim.collectives import busbw_factor
from fabricsim.nccltests import BenchListener, BenchResult, BenchRow, DeviceInfo, average_busbw

Mark = Callable[[int], None]

TIME_NOTE = ("time: mean over ranks of (host time of iters back-to-back operations after warmup and a "
             "barrier) / iters, as nccl-tests")


def _device(backend: str, local_rank: int) -> torch.device:
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def _describe_device(device: torch.device) -> dict[str, Any]:
    """What nccl-tests prints under '# Using devices' for this rank."""
    info: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        domain, bus, dev = (getattr(props, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id"))
        bus_id = f"{domain:04x}:{bus:02x}:{dev:02x}" if None not in (domain, bus, dev) else f"cuda:{device.index}"
        info.update(device=device.index, bus_id=bus_id, name=props.name)
    else:
        info.update(device=-1, bus_id="cpu", name=platform.processor() or platform.machine() or "CPU")
    return info


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _measure(step: Any, config: CollectiveConfig, device: torch.device, world_size: int,
             corrupt: bool) -> tuple[float, int | None]:
    for _ in range(config.warmup):
        step.run()
    _sync(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(config.iters):
        step.run()
    _sync(device)
    elapsed = (time.perf_counter() - start) / config.iters
    if not config.check:
        return elapsed, None
    dist.barrier()  # every rank is done with the timed buffers before they are refilled
    step.fill()
    _sync(device)
    step.run()
    _sync(device)
    result = step.result()
    if result is None:
        return elapsed, 0
    if corrupt:
        result.view(-1)[0] += 1
    return elapsed, count_wrong(result, step.expected(), world_size)


def run_rank(config: CollectiveConfig, rank: int, world_size: int, local_rank: int, mark: Mark,
             store: Any | None = None, pg_timeout_s: float | None = None,
             listener: BenchListener | None = None) -> list[BenchResult] | None:
    """Run every step of ``config`` on this rank; rank 0 returns the aggregated results, the others None.

    ``store`` is a torch.distributed Store to rendezvous on (spawned ranks); None uses ``env://`` (torchrun).
    ``mark`` publishes progress so a watchdog can name a rank that stops. After each step every rank's
    (time, wrong) goes to rank 0 (outside the timed region), which hands the row to ``listener`` at once.
    """
    fault: Fault | None = fault_from_env()
    device = _device(config.backend, local_rank)
    mark(1)
    kwargs: dict[str, Any] = {"timeout": timedelta(seconds=pg_timeout_s or config.timeout_s)}
    if store is not None:
        kwargs["store"] = store
    if device.type == "cuda":
        kwargs["device_id"] = device
    dist.init_process_group(config.backend, rank=rank, world_size=world_size, **kwargs)
    infos: list[Any] | None = [None] * world_size if rank == 0 else None
    dist.gather_object(_describe_device(device), infos, dst=0)
    dtype = TORCH_DTYPES[config.dtype]
    steps = plan(config, world_size)
    table = None if infos is None else _Table(config, world_size, infos)
    corrupt = fault is not None and fault.kind == "corrupt" and fault.rank == rank
    k = 0
    for op in config.ops:
        op_steps = [s for s in steps if s[0] == op]
        if table is not None and listener is not None:
            listener.begin(table.result(op, []), *_layout(op_steps))
        buffers = Buffers(op, max(s[2] for s in op_steps), world_size, dtype, device)
        rows: list[BenchRow] = []
        for _, _, count, in_place in op_steps:
            mark(2 + 2 * k)
            if k == 0 and fault is not None and fault.rank == rank:
                fault.strike_before_first_step()
            step = make_step(op, count, in_place, rank, world_size, config.root, buffers)
            mark(3 + 2 * k)
            record = _measure(step, config, device, world_size, corrupt)
            gathered: list[Any] | None = [None] * world_size if rank == 0 else None
            dist.gather_object(record, gathered, dst=0)
            if table is not None and gathered is not None:
                row = table.row(steps[k], [r[0] for r in gathered], [r[1] for r in gathered])
                rows.append(row)
                if listener is not None:
                    listener.row(row)
            k += 1
        del buffers
        if table is not None:
            table.results.append(table.result(op, rows))
            if listener is not None:
                listener.end(table.results[-1])
    mark(2 + 2 * len(steps))
    dist.barrier()
    mark(3 + 2 * len(steps))
    dist.destroy_process_group()
    return None if table is None else table.results


def _layout(op_steps: list[Step]) -> tuple[list[int], list[bool]]:
    """The sizes and buffer placements the rows of these steps will have."""
    return list(dict.fromkeys(s[1] for s in op_steps)), [p for p in (False, True) if any(s[3] is p for s in op_steps)]


class _Table:
    """Rank 0's view: rows (time averaged over ranks, wrong elements summed) and one result per operation."""

    def __init__(self, config: CollectiveConfig, world_size: int, infos: list[dict[str, Any]]) -> None:
        self.config, self.world_size = config, world_size
        self.devices = [DeviceInfo(rank=r, group=0, pid=info["pid"], host=info["host"], device=info["device"],
                                   bus_id=info["bus_id"], name=info["name"]) for r, info in enumerate(infos)]
        self.hosts = list(dict.fromkeys(d.host for d in self.devices))
        self.results: list[BenchResult] = []

    def row(self, step: Step, times: list[float], wrongs: list[int | None]) -> BenchRow:
        config = self.config
        op, size, count, in_place = step
        time_s = max(sum(times) / len(times), 1e-12)
        algbw = size / time_s / 1e9
        return BenchRow(
            op=op,
            size_bytes=size,
            count=count,
            dtype=config.dtype,
            redop="sum" if op in ("all_reduce", "reduce_scatter", "reduce", "send_recv") else "none",
            root=config.root if op in ("broadcast", "reduce") else -1,
            in_place=in_place,
            time_s=time_s,
            algbw_GBps=algbw,
            busbw_GBps=algbw * busbw_factor(op, self.world_size),
            wrong=None if any(w is None for w in wrongs) else sum(w for w in wrongs if w is not None),
        )

    def result(self, op: str, rows: list[BenchRow]) -> BenchResult:
        """``op``'s result; with no rows (yet), no average and no out-of-bounds count."""
        config = self.config
        notes = [TIME_NOTE] + ([NOTES[op]] if op in NOTES else [])
        return BenchResult(
            tool="fabricsim",
            op=op,
            backend=config.backend,
            world_size=self.world_size,
            hosts=self.hosts,
            devices=self.devices,
            dtype=config.dtype,
            warmup_iters=config.warmup,
            iters=config.iters,
            check=config.check,
            rows=rows,
            avg_busbw_GBps=average_busbw(rows) if rows else None,
            out_of_bounds=sum(1 for row in rows if row.wrong) if config.check and rows else None,
            source="fabricsim bench collective",
            notes=notes,
        )
