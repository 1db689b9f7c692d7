"""Issue 48 item 3: a large Kineto JSON read by several processes (traces.parallel: byte ranges cut between two
items of traceEvents, each read by the fast reader in a forked child, merged in order) gives what one process gives,
exactly: every TraceEvents field, names in the same order, dropped counts and first examples, equal argument sets
one object; and where a cut is wrong (inside a string, an item, a nested list, the header) or the text is damaged,
one process reads the file again and decides, so errors are the serial reader's."""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricsim.traces import TraceEvents, pages, read_trace
from fabricsim.traces import parallel as split
from fabricsim.traces import read as reader_module
from test_trace_fast_reader import (
    MUTATIONS,
    assert_same,
    bench_like,
    damaged,
    documents,
    outcome,
    reference,
    small_reads,
    write,
)
from test_trace_import import gpu_trace


def read_in_parts(path: Path, max_events: int = reader_module.MAX_EVENTS, parts: int = 2) -> TraceEvents:
    """The fast reader with ``parts`` processes (Serial where they cannot vouch for the result)."""
    with open(path, "rb") as raw:
        return reader_module._read_kineto_fast(raw, raw, path.stat().st_size, str(path), max_events, None, path=path,
                                               parts=parts)


def serial(path: Path, max_events: int = reader_module.MAX_EVENTS) -> TraceEvents:
    with open(path, "rb") as raw:
        return reader_module._read_kineto_fast(raw, raw, path.stat().st_size, str(path), max_events, None)


def assert_same_sharing(a: TraceEvents, b: TraceEvents) -> None:
    """Equal argument sets are one object in both, grouped alike."""
    for name in ("kernel_args", "cpu_args"):
        x, y = getattr(a, name), getattr(b, name)
        assert sorted(x) == sorted(y)
        first_x: dict[int, int] = {}
        first_y: dict[int, int] = {}
        for row in sorted(x):
            assert first_x.setdefault(id(x[row]), row) == first_y.setdefault(id(y[row]), row), (name, row)


def forced_cuts(offsets: list[float]) -> Any:
    """A find_cuts that cuts at the given fractions of the file, commas or not (the ranges must vouch for them)."""
    def find(raw: Any, total: int, parts: int, skip: int) -> list[int]:
        return sorted({min(total - 1, max(1, int(f * total))) for f in offsets})
    return find


def assert_parallel_outcome(path: Path, max_events: int = reader_module.MAX_EVENTS) -> None:
    """read_trace with the file cut as monkeypatched and the reference reader alone: the same events or error."""
    got, want = outcome(lambda p: read_trace(p, max_events=max_events), path), outcome(reference, path, max_events)
    if isinstance(want, TraceEvents):
        assert isinstance(got, TraceEvents), got
        assert_same(got, want)
        assert_same_sharing(got, want)
    else:
        assert got == want


@st.composite
def traps(draw: st.DrawFn) -> tuple[bytes, int, int, bool]:
    """A random trace (test_trace_fast_reader's), at times with events after the events array too (a list of
    objects at the same depth: a cut there must not be read as more events)."""
    text, chunk, batch, gz = draw(documents())
    doc = json.loads(text)
    if isinstance(doc, dict) and draw(st.booleans()):
        doc["otherEvents"] = doc["traceEvents"][:draw(st.integers(2, 6))] * 2
        text = json.dumps(doc, indent=draw(st.sampled_from([None, 1]))).encode()
    return text, chunk, batch, gz


settings_ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])


@settings_
@given(doc=traps(), cuts=st.lists(st.floats(0, 1), min_size=1, max_size=4), comma_cuts=st.booleans())
def test_parallel_equals_serial_on_random_traces(tmp_path_factory: pytest.TempPathFactory,
                                                 doc: tuple[bytes, int, int, bool], cuts: list[float],
                                                 comma_cuts: bool) -> None:
    """Cuts anywhere (at the commas between items as find_cuts picks them, or at any byte), chunk and batch
    boundaries anywhere: the result is the reference reader's, with max-events at its default and at 3."""
    text, chunk, batch, _ = doc
    path = tmp_path_factory.mktemp("p") / "t.json"
    path.write_bytes(text)
    with pytest.MonkeyPatch.context() as mp:
        small_reads(mp, chunk, batch)
        mp.setattr(reader_module, "parts_for", lambda total: len(cuts) + 1)
        if comma_cuts:
            mp.setattr(split, "WINDOW", 64)
        else:
            mp.setattr(split, "find_cuts", forced_cuts(cuts))
        assert_parallel_outcome(path)
        assert_parallel_outcome(path, max_events=3)


@settings_
@given(doc=documents(), cuts=st.lists(st.floats(0, 1), min_size=1, max_size=3), at=st.floats(0, 1),
       cut=st.integers(0, 3), insert=st.sampled_from(MUTATIONS))
def test_parallel_equals_serial_on_damaged_text(tmp_path_factory: pytest.TempPathFactory,
                                                doc: tuple[bytes, int, int, bool], cuts: list[float], at: float,
                                                cut: int, insert: bytes) -> None:
    """A byte edit anywhere, ranges cut anywhere: the same result or the same error message as the reference."""
    text, chunk, batch, _ = doc
    path = damaged(tmp_path_factory.mktemp("q"), text, at, cut, insert)
    with pytest.MonkeyPatch.context() as mp:
        small_reads(mp, chunk, batch)
        mp.setattr(reader_module, "parts_for", lambda total: len(cuts) + 1)
        mp.setattr(split, "find_cuts", forced_cuts(cuts))
        assert_parallel_outcome(path)


# ---- the parallel path is the one taken ------------------------------------------------------------------------
def test_ordinary_traces_are_read_in_parallel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kineto's layout (object or bare array, odd values in places): the ranges vouch for their cuts and the merged
    result is the serial one, argument sharing included."""
    odd = gpu_trace()
    odd["traceEvents"] += [{"ph": "X", "cat": "kernel", "name": "k", "ts": "5", "dur": 1.0}, 7]
    long = bench_like(tmp_path / "bench.json", 600)
    doc = gpu_trace()
    doc["traceEvents"] = doc["traceEvents"] * 40 + odd["traceEvents"] * 3
    paths = [long, write(tmp_path / "odd.json", doc), write(tmp_path / "bare.json", doc["traceEvents"])]
    monkeypatch.setattr(split, "WINDOW", 4096)
    for path in paths:
        for parts in (2, 3, 4):
            with open(path, "rb") as raw:
                first = raw.read(1000)
                got = split.read_parallel(str(path), first, raw, path.stat().st_size, str(path),
                                                 reader_module.MAX_EVENTS, None, 1000, 5000, parts)
            want = serial(path)
            assert_same(got, want)
            assert_same_sharing(got, want)


def test_parts_for_small_and_large_files() -> None:
    assert reader_module.parts_for(split.PARALLEL_BYTES - 1) == 1
    assert 1 <= reader_module.parts_for(1 << 34) <= split.MAX_PARTS
    with ProcessPoolExecutor(1) as pool:  # a pool's worker reads alone: the pool has the cores
        assert pool.submit(split.parts_for, 1 << 34).result() == 1


def test_a_child_that_dies_leaves_one_process_to_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = bench_like(tmp_path / "bench.json", 200)
    monkeypatch.setattr(split, "_child", lambda *args: os._exit(3))
    with open(path, "rb") as raw, pytest.raises(split.Serial):
        split.read_parallel(str(path), raw.read(1000), raw, path.stat().st_size, str(path),
                                   reader_module.MAX_EVENTS, None, 1000, 5000, 2)
    assert_same(read_in_parts(path), serial(path))


def test_max_events_and_depth_are_refused_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More events than max-events, an item nested too deep in a later range: one process reads it and refuses it
    with the serial reader's words."""
    path = bench_like(tmp_path / "bench.json", 200)
    monkeypatch.setattr(split, "WINDOW", 4096)
    monkeypatch.setattr(reader_module, "parts_for", lambda total: 3)
    assert_parallel_outcome(path, max_events=100)
    doc = gpu_trace()
    nested: Any = []
    for _ in range(70):
        nested = [nested]
    doc["traceEvents"] = doc["traceEvents"] * 30 + [{"ph": "X", "a": nested}] + doc["traceEvents"]
    deep = write(tmp_path / "deep.json", doc)
    with pytest.raises(Exception, match="nested more than 64 levels deep") as caught:
        read_trace(deep)
    assert str(caught.value) == outcome(reference, deep)[1]


def test_a_cut_after_the_events_array_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A later key holding a list of events: a cut between two of them looks like one between two items (a comma
    between objects at the events array's depth); the range before it sees the array closed and cannot vouch for
    it, so those objects are never read as events."""
    doc = gpu_trace()
    doc["otherEvents"] = doc["traceEvents"][1:]
    path = write(tmp_path / "t.json", doc)
    text = path.read_bytes()
    cut = text.index(b"}, {", text.index(b'"otherEvents"')) + 1
    monkeypatch.setattr(split, "find_cuts", lambda raw, total, parts, skip: [cut])
    monkeypatch.setattr(reader_module, "CHUNK_BYTES", 256)
    with open(path, "rb") as raw, pytest.raises(split.Serial):
        split.read_parallel(str(path), raw.read(256), raw, path.stat().st_size, str(path),
                                   reader_module.MAX_EVENTS, None, 256, 1000, 2)
    monkeypatch.setattr(reader_module, "parts_for", lambda total: 2)
    assert_parallel_outcome(path)


def test_small_pages_restores_numpy_setting() -> None:
    """numpy's huge-page switch is off inside (nested uses too) and back as it was after, even after an error."""
    switch = pages._switch()
    if switch is None:
        pytest.skip("this numpy has no huge-page switch")
    before = switch(True)
    try:
        with pages.small_pages():
            with pages.small_pages():
                assert switch(False) is False
            assert switch(False) is False
        assert switch(True) is True
        with pytest.raises(RuntimeError), pages.small_pages():
            raise RuntimeError
        assert switch(True) is True
    finally:
        switch(before)
