"""What a communication kernel or a GEMM carried out: the collective, its size and group (from the kernel's own
arguments, from the record_param_comms operator that launched it, linked by External id and the operator nesting
on its thread, or from a gloo operator's shapes), and the FLOPs of GEMM operators."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fabricsim.traces.classify import collective_op, dtype_bytes, elements, gemm_flops, nccl_tests_size, patterns
from fabricsim.traces.events import TraceEvents, as_int

RECORD_PARAM_COMMS = "record_param_comms"
NO_ARGS: dict[str, Any] = {}


@dataclass(frozen=True)
class CollectiveCall:
    """One call: the operation, nccl-tests size (0: unknown), group size (0: unknown) and element type."""

    op: str
    size_bytes: int
    nranks: int
    dtype: str | None


class Linker:
    """Looks up the arguments of CPU operators by External id and by nesting on a thread (built once a trace)."""

    def __init__(self, events: TraceEvents) -> None:
        self.events = events
        cpu = events.cpu
        self.by_ext: dict[int, int] = {}
        self.comms_rows: dict[int, list[int]] = {}  # thread -> rows of record_param_comms
        self.calls: dict[tuple[str, int], CollectiveCall] = {}  # by name and argument set (readers share equal ones)
        rows = np.fromiter(events.cpu_args, dtype=np.int64, count=len(events.cpu_args))
        names = events.names
        for row, ext, name, stream in zip(rows.tolist(), cpu.ext_id[rows].tolist(), cpu.name[rows].tolist(),
                                          cpu.stream[rows].tolist(), strict=True):
            if ext >= 0:
                self.by_ext[ext] = row
            if names[name] == RECORD_PARAM_COMMS:
                self.comms_rows.setdefault(stream, []).append(row)
        self.kernel_names = events.kernels.name.tolist()  # rows as Python ints: read once a call below
        self.kernel_ext = events.kernels.ext_id.tolist()

    def _comms_args(self, row: int) -> dict[str, Any] | None:
        """record_param_comms' arguments for a CPU operator row: its own, or those of the record_param_comms on
        the same thread that overlaps it (enclosing or enclosed), the one starting nearest."""
        cpu, events = self.events.cpu, self.events
        if events.names[int(cpu.name[row])] == RECORD_PARAM_COMMS:
            return events.cpu_args.get(row)
        start, end = cpu.start_s[row], cpu.end_s[row]
        best, gap = None, np.inf
        for other in self.comms_rows.get(int(cpu.stream[row]), []):
            if cpu.start_s[other] <= end and cpu.end_s[other] >= start:
                d = abs(float(cpu.start_s[other] - start))
                if d < gap:
                    best, gap = other, d
        return events.cpu_args.get(best) if best is not None else None

    def kernel_call(self, row: int) -> CollectiveCall:
        """The collective a communication kernel ran."""
        events = self.events
        name = events.names[self.kernel_names[row]]
        args = events.kernel_args.get(row)
        if args is None:
            cpu_row = self.by_ext.get(self.kernel_ext[row])
            args = self._comms_args(cpu_row) if cpu_row is not None else None
        args = args or NO_ARGS
        key = (name, id(args))  # the argument sets live as long as the trace: an id names one
        found = self.calls.get(key)
        if found is None:
            found = self.calls[key] = self._from_args(name, args)
        return found

    def cpu_call(self, row: int) -> CollectiveCall:
        """The collective a CPU communication operator (gloo:all_reduce) ran, from its own shapes."""
        events = self.events
        name = events.names[int(events.cpu.name[row])]
        args = events.cpu_args.get(row, {})
        if "Collective name" in args:
            return self._from_args(name, args)
        op = collective_op(name) or "unknown"
        types = args.get("Input type")
        dtype = str(types[0]) if isinstance(types, list) and types else None
        nelems = elements(args.get("Input Dims"))
        width = dtype_bytes(dtype)
        nranks = events.world_size or 0
        if nelems is None or width is None:
            return CollectiveCall(op, 0, nranks, dtype)
        in_bytes = nelems * width
        out_bytes = in_bytes * max(nranks, 1) if op == "all_gather" else in_bytes
        return CollectiveCall(op, nccl_tests_size(op, in_bytes, out_bytes), nranks, dtype)

    def _from_args(self, name: str, args: dict[str, Any]) -> CollectiveCall:
        """From record_param_comms-style arguments, falling back on the kernel name for the operation."""
        op = collective_op(str(args.get("Collective name", ""))) or collective_op(name) or "unknown"
        dtype = args.get("dtype")
        width = dtype_bytes(dtype)
        nranks = as_int(args.get("Group size"), 0) or (self.events.world_size or 0)
        n_in, n_out = as_int(args.get("In msg nelems"), 0), as_int(args.get("Out msg nelems"), 0)
        if width is None or (n_in <= 0 and n_out <= 0):
            return CollectiveCall(op, 0, nranks, str(dtype) if dtype else None)
        return CollectiveCall(op, nccl_tests_size(op, n_in * width, n_out * width), nranks, str(dtype))

    def gemm_ops(self) -> list[tuple[int, float, str | None]]:
        """(CPU row, FLOPs, element type) of each GEMM operator whose shapes were recorded."""
        events, flop_ops = self.events, patterns().flop_ops
        rows = np.fromiter(events.cpu_args, dtype=np.int64, count=len(events.cpu_args))
        seen: dict[tuple[int, int], tuple[float, str | None] | None] = {}  # by name and argument set
        out = []
        for row, name, args in zip(rows.tolist(), events.cpu.name[rows].tolist(), events.cpu_args.values(),
                                   strict=True):
            key = (name, id(args))
            if key not in seen:
                seen[key] = _gemm_op(flop_ops.get(events.names[name]), args)
            found = seen[key]
            if found is not None:
                out.append((row, *found))
        return out


def _gemm_op(kind: str | None, args: dict[str, Any]) -> tuple[float, str | None] | None:
    """FLOPs and element type of a GEMM operator of this kind with these arguments (None: not one)."""
    if kind is None:
        return None
    flops = gemm_flops(kind, args.get("Input Dims") or [])
    if flops is None or flops <= 0:
        return None
    types = args.get("Input type") or []
    operand = 1 if kind in ("addmm", "baddbmm") else 0
    dtype = str(types[operand]) if isinstance(types, list) and len(types) > operand else None
    return flops, dtype
