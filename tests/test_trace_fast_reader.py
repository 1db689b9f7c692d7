"""Issue 48 item 3: the fast Kineto reader (traces.kineto_fast: whole traceEvents items a batch at a time through
msgspec, columns by numpy) gives the reference reader's result exactly (traces.read._read_kineto: ijson one event
at a time, KinetoReader.add): every TraceEvents field, the dropped counts and reasons, the errors and their messages,
on random traces whose chunk boundaries fall anywhere; and it does not hand ordinary traces back to the reference."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricsim.errors import SpecError
from fabricsim.traces import TraceEvents, read_trace
from fabricsim.traces import read as reader_module
from fabricsim.traces.kineto_fast import Fallback
from test_trace_import import _x, gpu_trace

SPAN_FIELDS = ("start_s", "end_s", "device", "stream", "name", "ext_id")
FIELDS = ("source", "format", "names", "classes", "steps", "kernel_args", "cpu_args", "device_names", "backend",
          "rank", "world_size", "host", "warnings")


def reference(path: Path, max_events: int = reader_module.MAX_EVENTS) -> TraceEvents:
    """The reference reader alone (what read_trace gave before the fast reader)."""
    with open(path, "rb") as raw:
        gz = raw.read(2) == reader_module.GZIP_MAGIC
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw) if gz else raw
        return reader_module._read_kineto(stream, raw, path.stat().st_size, str(path), max_events, None)


def fast(path: Path, max_events: int = reader_module.MAX_EVENTS) -> TraceEvents:
    """The fast reader alone: raises Fallback where it hands the file to the reference reader."""
    with open(path, "rb") as raw:
        return reader_module._read_kineto_fast(raw, raw, path.stat().st_size, str(path), max_events, None)


def assert_same(a: TraceEvents, b: TraceEvents) -> None:
    for name in FIELDS:
        assert getattr(a, name) == getattr(b, name), name
    for name in ("kernel_args", "cpu_args"):  # values of one type too (1 and 1.0 are equal, their JSON is not)
        assert json.dumps(getattr(a, name), sort_keys=True) == json.dumps(getattr(b, name), sort_keys=True), name
    assert list(a.dropped.counts.items()) == list(b.dropped.counts.items())
    assert a.dropped.examples == b.dropped.examples
    for spans in ("kernels", "cpu"):
        for name in SPAN_FIELDS:
            x, y = getattr(getattr(a, spans), name), getattr(getattr(b, spans), name)
            assert x.dtype == y.dtype and np.array_equal(x, y), (spans, name)


def outcome(read: Any, *args: Any) -> TraceEvents | tuple[str, str]:
    try:
        result: TraceEvents = read(*args)
        return result
    except Exception as exc:  # the reference reader's own errors, SpecError or not, are what must match
        return type(exc).__name__, str(exc)


def assert_same_outcome(path: Path, max_events: int = reader_module.MAX_EVENTS) -> None:
    """read_trace (fast, falling back on the reference) and the reference alone: the same events or error."""
    got, want = outcome(lambda p: read_trace(p, max_events=max_events), path), outcome(reference, path, max_events)
    if isinstance(want, TraceEvents):
        assert isinstance(got, TraceEvents), got
        assert_same(got, want)
    else:
        assert got == want


# ---- random traces ---------------------------------------------------------------------------------------------
NAMES = ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "flash_fwd_kernel", "void elementwise_kernel<4>",
         "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "record_param_comms", "aten::mm", "aten::addmm",
         "c10d::allreduce_", "nccl:all_reduce", "ProfilerStep#3", "ProfilerStep#4", "forward", "Memcpy DtoD",
         "caf\u00e9 \u2192 kernel", "with \"quotes\" and [brackets] {braces} \\ backslash", "emoji \U0001f600"]
CATS = ["kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "user_annotation", "gpu_user_annotation", "python_function",
        "Kernel", "ac2g"]
scalars = st.one_of(st.integers(-5, 5), st.integers(-2**63, 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from(["", "x", "BFloat16", "5", "1e3"]), st.booleans(), st.none())
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                           max_size=2), max_leaves=6)
times = st.one_of(st.floats(-1e6, 1e7, allow_nan=False), st.integers(-10, 10**7), st.just(0), st.just(-0.0),
                  st.sampled_from([1e299, 9.9e299, -1e300, 2**70, 10**19, "5", None, True, [1]]))
ints = st.one_of(st.integers(-3, 20), st.sampled_from([None, "3", 2.5, True, "x", 2**63, -1, [0]]))
args_keys = ["device", "stream", "External id", "Collective name", "In msg nelems", "Out msg nelems", "Group size",
             "dtype", "Input Dims", "Input type", "Process Group Name", "correlation", "grid"]
arg_values = st.one_of(ints, values, st.sampled_from([[[4096, 4096], [4096, 4096]], ["c10::BFloat16", "float"],
                                                      "allreduce", "_allgather_base", 2**20]))


@st.composite
def events(draw: st.DrawFn) -> Any:
    event: dict[str, Any] = {}
    for key, strategy in (("ph", st.sampled_from(["X", "X", "X", "X", "i", "M", None, 1])),
                          ("cat", st.sampled_from([*CATS, 5, None])), ("name", st.sampled_from([*NAMES, 7, None])),
                          ("pid", ints), ("tid", ints), ("ts", times), ("dur", times)):
        if draw(st.integers(0, 11)) > 0:
            event[key] = draw(strategy)
    shape = draw(st.integers(0, 9))
    if shape == 0:
        event["args"] = draw(st.sampled_from([None, [], 3, "x"]))
    elif shape > 1:
        keys = draw(st.lists(st.sampled_from(args_keys), max_size=6))
        event["args"] = {k: draw(arg_values) for k in keys}
    if draw(st.integers(0, 5)) == 0:
        event["extra"] = draw(values)
    keys = list(event)
    random.Random(draw(st.integers(0, 99))).shuffle(keys)
    return {k: event[k] for k in keys}


@st.composite
def documents(draw: st.DrawFn) -> tuple[bytes, int, int, bool]:
    items: list[Any] = [draw(events()) for _ in range(draw(st.integers(1, 25)))]
    items[0] = {"ph": "X", **items[0]} if isinstance(items[0], dict) else items[0]
    if draw(st.integers(0, 9)) == 0:  # an item that is not an object
        items.insert(draw(st.integers(1, len(items))), draw(scalars | st.lists(scalars, max_size=2)))
    bare = draw(st.integers(0, 7)) == 0
    indent = draw(st.sampled_from([None, None, 1, 2]))
    if bare:
        doc: Any = items
    else:
        head = [("schemaVersion", 1), ("deviceProperties", [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]),
                ("distributedInfo", {"backend": "nccl", "rank": 1, "world_size": 8}), ("host_name", "node0")]
        where = draw(st.integers(0, len(head)))
        doc = dict([*head[:where], ("traceEvents", items), *head[where:], ("traceName", "t")])
    text = json.dumps(doc, indent=indent, ensure_ascii=draw(st.booleans())).encode()
    return text, draw(st.integers(3, 400)), draw(st.integers(3, 2000)), draw(st.booleans())


def small_reads(mp: pytest.MonkeyPatch, chunk: int, batch: int) -> None:
    """Chunk and batch boundaries anywhere: the reader's read and batch sizes set to a drawn document's."""
    mp.setattr(reader_module, "CHUNK_BYTES", chunk)
    mp.setattr(reader_module, "BATCH_BYTES", batch)
    mp.setattr(reader_module, "BATCH_SHARE", 1)


def damaged(directory: Path, text: bytes, at: float, cut: int, insert: bytes) -> Path:
    """``text`` with ``cut`` bytes at fraction ``at`` of it replaced by ``insert``, written to directory/t.json."""
    i = int(at * len(text))
    path = directory / "t.json"
    path.write_bytes(text[:i] + insert + text[i + cut:])
    return path


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents())
def test_fast_reader_equals_the_reference_on_random_traces(tmp_path_factory: pytest.TempPathFactory,
                                                           doc: tuple[bytes, int, int, bool]) -> None:
    text, chunk, batch, gz = doc
    path = tmp_path_factory.mktemp("t") / ("t.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(text) if gz else text)
    with pytest.MonkeyPatch.context() as mp:
        small_reads(mp, chunk, batch)
        assert_same_outcome(path)
        assert_same_outcome(path, max_events=3)


MUTATIONS = [b"", b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"0", b"-", b"e", b"1e400", b"99999999999999999999",
             b"\xff", b"\xc3\xa9", b"\x00", b"\x0c", b" ", b"NaN", b"true", b"\\ud800", b'"\\u00e9"']


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(), at=st.floats(0, 1), cut=st.integers(0, 3), insert=st.sampled_from(MUTATIONS))
def test_fast_reader_equals_the_reference_on_damaged_text(tmp_path_factory: pytest.TempPathFactory,
                                                          doc: tuple[bytes, int, int, bool], at: float, cut: int,
                                                          insert: bytes) -> None:
    """A byte edit anywhere (invalid JSON, numbers yajl refuses, bytes that are not UTF-8): the same result or the
    same error message, never a result where the reference reader refuses the file."""
    text, chunk, batch, _ = doc
    path = damaged(tmp_path_factory.mktemp("d"), text, at, cut, insert)
    with pytest.MonkeyPatch.context() as mp:
        small_reads(mp, chunk, batch)
        assert_same_outcome(path)


# ---- the fast path is the one taken ----------------------------------------------------------------------------
def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


def bench_like(path: Path, steps: int) -> Path:
    """The benchmark's pattern: gpu_trace's two steps repeated."""
    doc = gpu_trace()
    body = doc["traceEvents"][1:]
    doc["traceEvents"] = doc["traceEvents"][:1] + [dict(e, ts=e["ts"] + 2000.0 * b) for b in range(steps // 2)
                                                   for e in body]
    return write(path, doc)


def test_ordinary_traces_take_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kineto's layout, odd values included (a string ts, a negative dur, an id that is a string, args that are
    not an object): the fast reader reads them itself (a batch with odd values goes through KinetoReader.add)."""
    odd = gpu_trace()
    odd["traceEvents"] += [_x("k", "kernel", "5", 1.0), _x("k", "kernel", 1.0, -1.0), {**_x("k", "cpu_op", 1.0, 2.0),
                           "pid": "3"}, {**_x("aten::mm", "cpu_op", 1.0, 2.0), "args": [1]}, 7]
    paths = [write(tmp_path / "gpu.json", gpu_trace()), write(tmp_path / "odd.json", odd),
             write(tmp_path / "bare.json", gpu_trace()["traceEvents"]), bench_like(tmp_path / "bench.json", 400)]
    monkeypatch.setattr(reader_module, "CHUNK_BYTES", 1000)
    monkeypatch.setattr(reader_module, "BATCH_SHARE", 1)
    for path in paths:
        assert_same(fast(path), reference(path))


def test_host_name_after_the_events_is_read_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference reader reads the header from the chunks up to the first event's end: a host_name written after
    traceEvents counts when it is in that chunk (a small file) and not otherwise. The fast reader does the same."""
    path = write(tmp_path / "t.json", gpu_trace())  # host_name follows traceEvents
    assert fast(path).host == reference(path).host == "node0"
    monkeypatch.setattr(reader_module, "CHUNK_BYTES", 512)
    assert fast(path).host is reference(path).host is None


def test_max_events_is_refused_by_the_fast_reader(tmp_path: Path) -> None:
    path = bench_like(tmp_path / "t.json", 200)
    with pytest.raises(SpecError, match="more than 100 kernels"):
        fast(path, max_events=100)
    assert_same_outcome(path, max_events=100)


@pytest.mark.parametrize("text", [b'{"traceEvents": [{"ph": "X"}, {"ph": "X"} {"ph": "X"}]}',
                                  b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2, "cat": "kernel", "name": "k"}',
                                  b'{"traceEvents": [{"ph": "X"}]} trailing',
                                  b'{"traceEvents": [5, {"ph": "X"}]}', b'{"traceEvents": []}', b'[]',
                                  b'{"traceEvents": [{"ph": "X", "ts": 99999999999999999999}]}',
                                  b'{"traceEvents": [{"ph": "X", "x": 1e400}]}',
                                  b'{"traceEvents": [{"ph": "X", "x": "\xff"}]}',
                                  b'{"traceEvents": [{"ph": "X"}], "traceEvents": [{"ph": "X"}]}',
                                  b'{"trace\\u0045vents": [{"ph": "X"}]}',
                                  b'{"traceEvents": [{"a": ' + b"[" * 70 + b"]" * 70 + b"}]}"])
def test_what_the_fast_reader_cannot_vouch_for_goes_to_the_reference(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(text)
    with pytest.raises(Fallback):
        fast(path)
    assert_same_outcome(path)
