"""The benchmark body one rank runs: join the process group, time every step, check it, gather to rank 0.

Imports torch (the launcher imports this module only inside a run). Timing follows nccl-tests: ``warmup``
untimed operations, a barrier, then ``iters`` back-to-back operations between two host timestamps (after a
device synchronize on GPUs); the time of one operation is that span / ``iters``, averaged over ranks. With
``check``, one more operation runs on known data and every element of each rank's result is compared with what
it must be; ``wrong`` is the count summed over ranks (nccl-tests ``-c 1`` reports the same).
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
from fabricsim.bench.rows import BenchResult, BenchRow, DeviceInfo, average_busbw
from fabricsim.bench.torchops import NOTES, TORCH_DTYPES, Buffers, count_wrong, make_step
from fabricsim.collectives import busbw_factor

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
             store: Any | None = None, pg_timeout_s: float | None = None) -> list[BenchResult] | None:
    """Run every step of ``config`` on this rank; rank 0 returns the aggregated results, the others None.

    ``store`` is a torch.distributed Store to rendezvous on (spawned ranks); None uses ``env://`` (torchrun).
    ``mark`` publishes progress so a watchdog can name a rank that stops.
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
    dtype = TORCH_DTYPES[config.dtype]
    steps = plan(config, world_size)
    records: list[tuple[float, int | None]] = []
    corrupt = fault is not None and fault.kind == "corrupt" and fault.rank == rank
    for op in config.ops:
        op_steps = [s for s in steps if s[0] == op]
        buffers = Buffers(op, max(s[2] for s in op_steps), world_size, dtype, device)
        for _, _, count, in_place in op_steps:
            k = len(records)
            mark(2 + 2 * k)
            if k == 0 and fault is not None and fault.rank == rank:
                fault.strike_before_first_step()
            step = make_step(op, count, in_place, rank, world_size, config.root, buffers)
            mark(3 + 2 * k)
            records.append(_measure(step, config, device, world_size, corrupt))
        del buffers
    mark(2 + 2 * len(steps))
    local = {**_describe_device(device), "records": records}
    gathered: list[Any] | None = [None] * world_size if rank == 0 else None
    dist.gather_object(local, gathered, dst=0)
    mark(3 + 2 * len(steps))
    dist.destroy_process_group()
    if gathered is None:
        return None
    return aggregate(config, world_size, steps, gathered)


def aggregate(config: CollectiveConfig, world_size: int, steps: list[Step],
              per_rank: list[dict[str, Any]]) -> list[BenchResult]:
    """Rank 0's view: time averaged over ranks, wrong elements summed, one result per operation."""
    devices = [DeviceInfo(rank=r, group=0, pid=info["pid"], host=info["host"], device=info["device"],
                          bus_id=info["bus_id"], name=info["name"]) for r, info in enumerate(per_rank)]
    hosts = list(dict.fromkeys(d.host for d in devices))
    rows_by_op: dict[str, list[BenchRow]] = {op: [] for op in config.ops}
    for k, (op, size, count, in_place) in enumerate(steps):
        times = [info["records"][k][0] for info in per_rank]
        wrongs = [info["records"][k][1] for info in per_rank]
        time_s = max(sum(times) / len(times), 1e-12)
        algbw = size / time_s / 1e9
        rows_by_op[op].append(BenchRow(
            op=op,
            size_bytes=size,
            count=count,
            dtype=config.dtype,
            redop="sum" if op in ("all_reduce", "reduce_scatter", "reduce", "send_recv") else "none",
            root=config.root if op in ("broadcast", "reduce") else -1,
            in_place=in_place,
            time_s=time_s,
            algbw_GBps=algbw,
            busbw_GBps=algbw * busbw_factor(op, world_size),
            wrong=None if any(w is None for w in wrongs) else sum(w for w in wrongs if w is not None),
        ))
    results = []
    for op, rows in rows_by_op.items():
        notes = [TIME_NOTE] + ([NOTES[op]] if op in NOTES else [])
        results.append(BenchResult(
            tool="fabricsim",
            op=op,
            backend=config.backend,
            world_size=world_size,
            hosts=hosts,
            devices=devices,
            dtype=config.dtype,
            warmup_iters=config.warmup,
            iters=config.iters,
            check=config.check,
            rows=rows,
            avg_busbw_GBps=average_busbw(rows),
            out_of_bounds=sum(1 for row in rows if row.wrong) if config.check else None,
            source="fabricsim bench collective",
            notes=notes,
        ))
    return results
