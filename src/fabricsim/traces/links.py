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


@dataclass(frozen=True)
class GemmOps:
    """The GEMM operators whose shapes were recorded, in the order of ``cpu_args``: CPU row, FLOPs, and element
    type (an index into ``dtypes``)."""

    rows: np.ndarray
    flops: np.ndarray
    dtype: np.ndarray
    dtypes: list[str | None]

    def __len__(self) -> int:
        return len(self.rows)


def _lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray, missing: int = -1) -> np.ndarray:
    """``values`` of ``wanted`` in the sorted unique ``keys`` (``missing`` where absent)."""
    at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
    found = keys[at] == wanted if len(keys) else np.zeros(len(wanted), dtype=bool)
    return np.where(found, values[at] if len(keys) else missing, missing)


class Linker:
    """Looks up the arguments of CPU operators by External id and by nesting on a thread (built once a trace), as
    arrays: each distinct argument set (the readers share equal ones) is a number, each row's set found by
    ``searchsorted``, so a collective or GEMM is worked out once per name and argument set, not once per row."""

    def __init__(self, events: TraceEvents) -> None:
        self.events = events
        cpu = events.cpu
        self.arg_sets: list[dict[str, Any]] = []
        self._set_of: dict[int, int] = {}  # id of an argument set -> its number
        self.calls: dict[tuple[str, int], CollectiveCall] = {}  # by name and argument set
        self.cpu_rows = np.fromiter(events.cpu_args, dtype=np.int64, count=len(events.cpu_args))
        self.cpu_sets = self._sets(list(events.cpu_args.values()))
        self._cpu_keys, self._cpu_values = _sorted(self.cpu_rows, self.cpu_sets)
        kernel_rows = np.fromiter(events.kernel_args, dtype=np.int64, count=len(events.kernel_args))
        self._kernel_keys, self._kernel_values = _sorted(kernel_rows, self._sets(list(events.kernel_args.values())))
        # by External id, the last operator carrying it (in ``cpu_args`` order)
        ext = cpu.ext_id[self.cpu_rows]
        linked = ext >= 0
        backwards_ext, backwards_rows = ext[linked][::-1], self.cpu_rows[linked][::-1]
        self._ext_keys, first = np.unique(backwards_ext, return_index=True)
        self._ext_rows = backwards_rows[first]
        self._rpc = [i for i, n in enumerate(events.names) if n == RECORD_PARAM_COMMS]
        self._comms_rows: dict[int, list[int]] | None = None

    def _sets(self, values: list[dict[str, Any]]) -> np.ndarray:
        """The number of each argument set (new ones appended to ``arg_sets``), in C-level loops."""
        ids = list(map(id, values))
        for key, value in dict(zip(ids, values, strict=True)).items():
            if key not in self._set_of:
                self._set_of[key] = len(self.arg_sets)
                self.arg_sets.append(value)
        return np.fromiter(map(self._set_of.__getitem__, ids), dtype=np.int64, count=len(ids))

    def _set_id(self, args: dict[str, Any] | None) -> int:
        if args is None:
            return -1
        return int(self._sets([args])[0])

    @property
    def comms_rows(self) -> dict[int, list[int]]:
        """thread -> rows of record_param_comms (``cpu_args`` order), built on first use"""
        if self._comms_rows is None:
            cpu = self.events.cpu
            rows = self.cpu_rows[np.isin(cpu.name[self.cpu_rows], self._rpc)]
            self._comms_rows = {}
            for row, stream in zip(rows.tolist(), cpu.stream[rows].tolist(), strict=True):
                self._comms_rows.setdefault(stream, []).append(row)
        return self._comms_rows

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

    def kernel_calls(self, rows: np.ndarray) -> tuple[np.ndarray, list[CollectiveCall]]:
        """The collectives communication kernels ran: ``calls[inverse[i]]`` is that of ``rows[i]``. A kernel's own
        arguments, else those of the operator that launched it (External id), else of the record_param_comms
        nesting with that operator on its thread."""
        kernels = self.events.kernels
        sets = _lookup(self._kernel_keys, self._kernel_values, rows)
        rest = np.flatnonzero(sets < 0)
        if len(rest):
            cpu_row = _lookup(self._ext_keys, self._ext_rows, kernels.ext_id[rows[rest]])
            linked = cpu_row >= 0
            own = linked.copy()
            own[linked] = np.isin(self.events.cpu.name[cpu_row[linked]], self._rpc)
            sets[rest[own]] = _lookup(self._cpu_keys, self._cpu_values, cpu_row[own])
            nested = linked & ~own
            if nested.any():
                found = {r: self._set_id(self._comms_args(r)) for r in np.unique(cpu_row[nested]).tolist()}
                sets[rest[nested]] = np.fromiter(map(found.__getitem__, cpu_row[nested].tolist()), dtype=np.int64,
                                                 count=int(nested.sum()))
        width = len(self.arg_sets) + 1
        keys, inverse = np.unique(kernels.name[rows] * width + (sets + 1), return_inverse=True)
        names = self.events.names
        calls = []
        for key in keys.tolist():
            name, found = names[key // width], key % width - 1
            args = (self.arg_sets[found] if found >= 0 else None) or NO_ARGS
            call = self.calls.get((name, id(args)))
            if call is None:
                call = self.calls[(name, id(args))] = self._from_args(name, args)
            calls.append(call)
        return inverse.reshape(-1), calls

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

    def gemm_ops(self) -> GemmOps:
        """Each GEMM operator whose shapes were recorded (worked out once per name and argument set)."""
        cpu, flop_ops, names = self.events.cpu, patterns().flop_ops, self.events.names
        width = len(self.arg_sets) + 1
        keys, inverse = np.unique(cpu.name[self.cpu_rows] * width + self.cpu_sets, return_inverse=True)
        flops = np.zeros(len(keys))
        dtype = np.full(len(keys), -1, dtype=np.int64)
        dtypes: dict[str | None, int] = {}
        for k, key in enumerate(keys.tolist()):
            found = _gemm_op(flop_ops.get(names[key // width]), self.arg_sets[key % width])
            if found is not None:
                flops[k], dtype[k] = found[0], dtypes.setdefault(found[1], len(dtypes))
        inverse = inverse.reshape(-1)
        kept = dtype[inverse] >= 0
        return GemmOps(self.cpu_rows[kept], flops[inverse][kept], dtype[inverse][kept], list(dtypes))


def _sorted(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``keys`` (unique rows) sorted, with their values."""
    if len(keys) and not (np.diff(keys) > 0).all():
        order = np.argsort(keys, kind="stable")
        return keys[order], values[order]
    return keys, values


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
