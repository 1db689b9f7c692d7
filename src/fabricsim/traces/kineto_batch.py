"""Kineto events a batch at a time: a run of whole ``traceEvents`` items (their JSON text, a chunk's worth) decoded
by one msgspec call into small structs that hold only the fields a summary reads (the rest is skipped in C), then
reduced to the reader's columns with list comprehensions and numpy, not a Python dict and an ``add`` call an event.

The result is the reference reader's (``KinetoReader.add`` fed by ijson) exactly: text msgspec reads differently
from ijson's yajl (integers past 64 bits, floats past the double range, bytes that are not UTF-8: yajl refuses them
and msgspec does not when it skips a field) is screened out first, and a batch with anything unusual (an item
that is not an object, args that are not an object, a ts that is a string, an id that is a float) raises
``Slow``: the caller then reads that batch with ijson and ``KinetoReader.add``, before anything here changed the
reader."""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Any

import msgspec
import numpy as np
from msgspec import UNSET, UnsetType

from fabricsim.traces.classify import LAUNCH, step_number
from fabricsim.traces.events import KEPT_ARGS, as_int, kept_args
from fabricsim.traces.kineto import KERNEL_CATS, KinetoReader, unreadable


class Slow(Exception):
    """This batch needs the per-event reader (nothing was changed)."""


class Args(msgspec.Struct, gc=False):
    """The ``args`` fields a summary reads; any other is skipped by the decoder."""

    device: Any = UNSET
    stream: Any = UNSET
    external_id: Any = msgspec.field(name="External id", default=UNSET)
    collective_name: Any = msgspec.field(name="Collective name", default=UNSET)
    in_nelems: Any = msgspec.field(name="In msg nelems", default=UNSET)
    out_nelems: Any = msgspec.field(name="Out msg nelems", default=UNSET)
    group_size: Any = msgspec.field(name="Group size", default=UNSET)
    dtype: Any = UNSET
    input_dims: msgspec.Raw | UnsetType = msgspec.field(name="Input Dims", default=UNSET)
    input_type: msgspec.Raw | UnsetType = msgspec.field(name="Input type", default=UNSET)
    group_name: Any = msgspec.field(name="Process Group Name", default=UNSET)

    def kept(self, reader: KinetoReader) -> dict[str, Any]:
        """``kept_args(args, reader.shared_args)``: the ``KEPT_ARGS`` present, equal sets one object. Looked up
        first by the values, the shapes by their JSON text (equal keys are equal values: the same shared object)."""
        dims, types = self.input_dims, self.input_type
        key: tuple[Any, ...] | None = (
            self.collective_name, self.in_nelems, self.out_nelems, self.group_size, self.dtype,
            dims if dims is UNSET else bytes(dims), types if types is UNSET else bytes(types), self.group_name)
        try:
            found = reader.args_by_key.get(key)
        except TypeError:  # a list or mapping where a scalar belongs
            key, found = None, None
        if found is None:
            values = (self.collective_name, self.in_nelems, self.out_nelems, self.group_size, self.dtype, _json(dims),
                      _json(types), self.group_name)
            kept = {k: v for k, v in zip(KEPT_ARGS, values, strict=True) if v is not UNSET}
            found = kept_args(kept, reader.shared_args)
            if key is not None:
                reader.args_by_key[key] = found
        return found


def _json(raw: msgspec.Raw | UnsetType) -> Any:
    return raw if raw is UNSET else msgspec.json.decode(raw)


class Event(msgspec.Struct, gc=False):
    """An item of ``traceEvents``, with the defaults ``KinetoReader.add`` reads for a missing key."""

    ph: Any = None
    cat: Any = ""
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = 0.0
    args: Args | None = None


DECODER = msgspec.json.Decoder(list[Event])
FOLD = bytes(0x30 if 0x30 <= b <= 0x39 else 0x65 if b in b"eE" else 0x2E for b in range(256))
"""digits to ``0``, ``e`` and ``E`` to ``e``, any other byte to ``.``: a number's shape in one C pass"""
LONG_NUMBER = b"0" * 19
"""19 digits in a row: maybe an integer past 64 bits, which yajl refuses (and msgspec reads)"""
EXPONENT = b"0e"
BIG_EXPONENT = re.compile(rb"[0-9][eE]\+?[0-9]{3}")
"""a float that may be past the double range (yajl refuses it; msgspec skips it unread)"""
WHITESPACE = b" \t\r\n"
KERNEL, CPU_OP, USER, GPU_USER, OTHER = range(5)
CODES = {**dict.fromkeys(KERNEL_CATS, KERNEL), "cpu_op": CPU_OP, "user_annotation": USER,
         "gpu_user_annotation": GPU_USER}


def decode(array: bytes | bytearray, shape: bytes | bytearray | None = None) -> list[Event]:
    """The items of a JSON array of events, or Slow when msgspec could read it otherwise than yajl would. ``shape``:
    the array's bytes with digits as ``0``, ``e``/``E`` as ``e`` and no other byte either (``DepthScan.shape``; by
    default ``FOLD``'s)."""
    if not array.isascii():
        try:
            array.decode("utf-8")
        except UnicodeDecodeError:
            raise Slow from None
    folded = array.translate(FOLD) if shape is None else shape
    if LONG_NUMBER in folded or (_exponent(folded) and BIG_EXPONENT.search(array)):
        raise Slow
    try:
        return DECODER.decode(array)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise Slow from None


def _exponent(folded: bytes | bytearray) -> bool:
    """A digit then ``e`` (``EXPONENT``) in the folded text: two numpy compares (``in`` walks the text a byte at a
    time, its digits being everywhere)."""
    shape = np.frombuffer(folded, dtype=np.uint8)
    return bool(np.any((shape[1:] == EXPONENT[1]) & (shape[:-1] == EXPONENT[0])))


def _ints(values: list[Any], default: int) -> np.ndarray:
    """``as_int(v, default)`` of each value as int64, or Slow where the reference reader would differ (a value
    past int64 makes it raise)."""
    kinds = set(map(type, values))
    if not kinds <= {int}:
        if not kinds <= {int, type(None), UnsetType}:
            raise Slow  # floats, strings, bools: rare enough for the per-event reader
        values = [v if type(v) is int else default for v in values]
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        raise Slow from None


def _floats(values: list[Any]) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):
        raise Slow from None


def add_batch(reader: KinetoReader, events: list[Event]) -> None:
    """What ``reader.add`` does for each event in turn (the max-events refusal included), or Slow before any change."""
    xs = [e for e in events if e.ph == "X"]
    ts = [e.ts for e in xs]
    dur = [e.dur for e in xs]
    names = [e.name for e in xs]
    cats = [e.cat for e in xs]
    try:
        codes_of = {c: CODES.get(str(c).lower(), OTHER) for c in set(cats)}
    except TypeError:  # an unhashable category
        raise Slow from None
    code = np.fromiter(map(codes_of.__getitem__, cats), dtype=np.int8, count=len(cats))
    numeric = set(map(type, ts)) | set(map(type, dur))
    if numeric <= {int, float} and set(map(type, names)) <= {str}:
        start, length = _floats(ts), _floats(dur)
        if len(start) and max(np.abs(start).max(), np.abs(length).max()) >= 1e299:
            raise Slow  # near the 1e300 bound a float conversion could move an integer across it
        valid = length >= 0
    else:
        valid = np.array([type(t) in (int, float) and type(d) in (int, float) and -1e300 < t < 1e300
                          and 0 <= d < 1e300 and isinstance(n, str) for t, d, n in zip(ts, dur, names, strict=True)],
                         dtype=bool)
        start = _floats([t if ok else 0.0 for t, ok in zip(ts, valid.tolist(), strict=True)])
        length = _floats([d if ok else 0.0 for d, ok in zip(dur, valid.tolist(), strict=True)])
    end = start + length
    kernel = np.flatnonzero(valid & (code == KERNEL))
    marks = np.flatnonzero(valid & (code >= CPU_OP) & (code <= GPU_USER))
    mark_names = _pick(names, marks)
    steps_of = {n: step_number(n) for n in set(mark_names)}
    is_step = np.fromiter((steps_of[n] is not None for n in mark_names), dtype=bool, count=len(marks))
    steps = marks[is_step].tolist()
    cpu = marks[~is_step & (code[marks] != GPU_USER)]
    k_ev, c_ev = _pick(xs, kernel), _pick(xs, cpu)
    k_names, c_names = _pick(names, kernel), _pick(names, cpu)
    k_dev = _ints([e.pid if (a := e.args) is None or a.device is UNSET else a.device for e in k_ev], 0)
    k_stream = _ints([e.tid if (a := e.args) is None or a.stream is UNSET else a.stream for e in k_ev], 0)
    k_ext = _ints([None if (a := e.args) is None else a.external_id for e in k_ev], -1)
    c_dev = _ints([e.pid for e in c_ev], 0)
    c_stream = _ints([e.tid for e in c_ev], 0)
    c_ext = _ints([None if (a := e.args) is None else a.external_id for e in c_ev], -1)
    step_dev = [as_int(xs[i].pid, 0) if code[i] == GPU_USER else None for i in steps]
    # nothing above changed the reader: from here on the batch is committed
    reader.seen += len(events)
    _drop(reader, xs, valid, code)
    first = np.flatnonzero(valid)
    if reader.origin is None and len(first):
        reader.origin = float(start[first[0]])
    index = reader.kernels.index
    if not all(n in index for n in set(k_names) | set(c_names)):
        # names are interned in event order, kernels and operators alike
        for name in dict.fromkeys(_pick(names, np.sort(np.concatenate([kernel, cpu])))):
            reader.kernels.name_id(name)
    k_ids = np.fromiter(map(index.__getitem__, k_names), dtype=np.int64, count=len(k_names))
    c_ids = np.fromiter(map(index.__getitem__, c_names), dtype=np.int64, count=len(c_names))
    _commit_kernels(reader, kernel, k_ev, k_ids, start, end, k_dev, k_stream, k_ext)
    _commit_cpu(reader, cpu, c_ev, c_ids, code, start, end, c_dev, c_stream, c_ext)
    if steps:
        reader.step_number.extend([n for i in steps if (n := steps_of[names[i]]) is not None])
        reader.step_start.frombytes(start[steps].tobytes())
        reader.step_end.frombytes(end[steps].tobytes())
        reader.step_device.extend([0 if d is None else d for d in step_dev])
        reader.step_on_gpu.frombytes(np.array([d is not None for d in step_dev], dtype=np.int8).tobytes())
    reader.check()


def _drop(reader: KinetoReader, xs: list[Event], valid: np.ndarray, code: np.ndarray) -> None:
    for i in np.flatnonzero(~valid & (code != OTHER)).tolist():
        e = xs[i]
        reader.dropped.add(unreadable(e.name, e.ts, e.dur) or "an unreadable ts or dur", e.name)


def _pick(values: list[Any], rows: np.ndarray) -> list[Any]:
    """``[values[i] for i in rows]`` in C."""
    if len(rows) > 1:
        return list(itemgetter(*rows.tolist())(values))
    return [values[i] for i in rows.tolist()]


def _commit_kernels(reader: KinetoReader, rows: np.ndarray, evs: list[Event], ids: np.ndarray, start: np.ndarray,
                    end: np.ndarray, device: np.ndarray, stream: np.ndarray, ext: np.ndarray) -> None:
    if not len(rows):
        return
    base = reader.kernels.add_columns(ids, start[rows], end[rows], device, stream, ext)
    for k in [k for k, e in enumerate(evs) if (a := e.args) is not None and a.collective_name is not UNSET]:
        reader.kernel_args[base + k] = evs[k].args.kept(reader)  # type: ignore[union-attr]


def _commit_cpu(reader: KinetoReader, rows: np.ndarray, evs: list[Event], ids: np.ndarray, code: np.ndarray,
                start: np.ndarray, end: np.ndarray, device: np.ndarray, stream: np.ndarray, ext: np.ndarray) -> None:
    if not len(rows):
        return
    cls = _pick(reader.classes, ids)
    comms = np.fromiter((c in ("communication", LAUNCH) for c in cls), dtype=bool, count=len(cls))
    keep = (code[rows] != USER) | comms  # user ranges (forward, optimizer) are not work of their own
    if not keep.all():
        take = np.flatnonzero(keep)
        rows, ids, device, stream, ext, comms = rows[take], ids[take], device[take], stream[take], ext[take], \
            comms[take]
        evs, cls = _pick(evs, take), _pick(cls, take)
        if not len(rows):
            return
    base = reader.cpu.add_columns(ids, start[rows], end[rows], device, stream, ext)
    for k, (e, c, comm) in enumerate(zip(evs, cls, comms.tolist(), strict=True)):
        if comm or (c == "gemm" and e.args is not None and e.args.input_dims is not UNSET):
            reader.cpu_args[base + k] = e.args.kept(reader) if e.args is not None else kept_args({}, reader.shared_args)
