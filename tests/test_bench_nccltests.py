"""nccl-tests log import: the shared sample read exactly, every layout variation, errors with line numbers,
and our own nccl-tests-format output read back."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricsim.cli import app
from fabricsim.collectives import busbw_factor
from fabricsim.errors import SpecError
from fabricsim.nccltests import (
    BenchResult,
    BenchRow,
    DeviceInfo,
    TableStream,
    format_many,
    format_nccl_tests,
    parse_nccl_tests,
    parse_nccl_tests_file,
    parse_nccl_tests_log,
)
from fabricsim.nccltests.format import table_layout

DATA = Path(__file__).parent / "data" / "nccl-tests"
SAMPLE_NAME = "h100-2node-16gpu-all_reduce.log"


def _sample_path() -> Path:
    """The shared reference log beside the repository when present, else the copy under tests/data."""
    shared = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / "nccl-tests-logs" / SAMPLE_NAME
    return shared if shared.exists() else DATA / SAMPLE_NAME


# (size, count, oop time us, algbw, busbw, ip time us, algbw, busbw), copied from the sample by hand
SAMPLE_ROWS = [
    (536870912, 134217728, 5202.3, 103.20, 193.50, 5377.7, 99.83, 187.19),
    (1073741824, 268435456, 10314, 104.11, 195.20, 10339, 103.85, 194.73),
    (2147483648, 536870912, 20565, 104.42, 195.79, 20583, 104.33, 195.62),
    (4294967296, 1073741824, 41198, 104.25, 195.47, 41040, 104.65, 196.22),
    (8589934592, 2147483648, 81958, 104.81, 196.52, 81960, 104.81, 196.51),
]


def test_sample_log_is_read_exactly() -> None:
    result = parse_nccl_tests_log(_sample_path().read_text(), source=str(_sample_path()))
    assert result.op == "all_reduce"
    assert result.tool == "nccl-tests"
    assert result.world_size == 16
    assert result.hosts == ["nccl-tests-h100-worker-0", "nccl-tests-h100-worker-1"]
    assert result.devices[8] == DeviceInfo(rank=8, group=0, pid=16, host="nccl-tests-h100-worker-1", device=0,
                                           bus_id="0x19", name="NVIDIA H100 80GB HBM3")
    assert (result.warmup_iters, result.iters, result.check, result.dtype) == (5, 20, True, "float32")
    assert result.avg_busbw_GBps == 194.675
    assert result.out_of_bounds == 0
    expected = []
    for size, count, t0, a0, b0, t1, a1, b1 in SAMPLE_ROWS:
        for in_place, t, a, b in ((False, t0, a0, b0), (True, t1, a1, b1)):
            expected.append(BenchRow(op="all_reduce", size_bytes=size, count=count, dtype="float32", redop="sum",
                                     root=-1, in_place=in_place, time_s=t / 1e6, algbw_GBps=a, busbw_GBps=b,
                                     wrong=0))
    assert result.rows == expected
    # the printed average is the mean over both column groups, as nccl-tests computes it
    assert sum(r.busbw_GBps for r in result.rows) / len(result.rows) == pytest.approx(194.675, abs=1e-9)
    # and busbw/algbw is the all_reduce factor for 16 ranks, to print precision
    for row in result.rows:
        assert row.busbw_GBps / row.algbw_GBps == pytest.approx(busbw_factor("all_reduce", 16), abs=0.01)


def test_sample_op_is_inferred_without_a_name() -> None:
    """No binary name in the log and no file name: redop/root columns and busbw/algbw pick all_reduce."""
    assert parse_nccl_tests(_sample_path().read_text())[0].op == "all_reduce"


@pytest.mark.parametrize(
    ("name", "op", "world", "hosts", "rows", "dtype"),
    [
        ("mpirun-tagged-all_gather.log", "all_gather", 16, ["dgx-a01", "dgx-a02"], 12, "float32"),
        ("nccl-tests-2.18-alltoall.log", "all_to_all", 8, ["gpu-node-3"], 12, "float32"),
        ("nccl-info-interleaved-reduce_scatter.log", "reduce_scatter", 4, ["l40s-box"], 12, "bfloat16"),
        ("sendrecv-inplace-unchecked.log", "send_recv", 2, ["ib-node-a", "ib-node-b"], 8, "float32"),
        ("docs-indented-broadcast.md", "broadcast", 8, ["dgx"], 16, "float32"),
        ("single-group-inplace-all_reduce.log", "all_reduce", 8, ["hgx-b200"], 5, "float32"),
        ("old-format-v2.0-reduce.log", "reduce", 4, ["nvidia-dgx"], 10, "float32"),
    ],
)
def test_fixture_layouts(name: str, op: str, world: int, hosts: list[str], rows: int, dtype: str) -> None:
    result = parse_nccl_tests_file(DATA / name)[0]
    assert (result.op, result.world_size, result.hosts, len(result.rows), result.dtype) == (op, world, hosts,
                                                                                            rows, dtype)
    assert result.avg_busbw_GBps is not None
    mean = sum(r.busbw_GBps for r in result.rows) / len(result.rows)
    assert result.avg_busbw_GBps == pytest.approx(mean, rel=1e-3, abs=0.01)
    for row in result.rows:
        assert row.time_s > 0
        if row.algbw_GBps >= 1:
            assert row.busbw_GBps / row.algbw_GBps == pytest.approx(busbw_factor(op, world), abs=0.01)
            assert row.size_bytes / row.time_s / 1e9 == pytest.approx(row.algbw_GBps, rel=0.01)


def test_mpirun_prefixes_and_interleaved_info_are_ignored() -> None:
    result = parse_nccl_tests_file(DATA / "mpirun-tagged-all_gather.log")[0]
    assert [r.size_bytes for r in result.rows[::2]] == [4**k * 2**20 for k in range(6)]
    assert {r.redop for r in result.rows} == {"none"}
    assert {r.root for r in result.rows} == {-1}
    assert result.rows[4].busbw_GBps == 122.22


def test_nccl_tests_218_header_and_bus_ids() -> None:
    result = parse_nccl_tests_file(DATA / "nccl-tests-2.18-alltoall.log")[0]
    assert result.devices[3].bus_id == "0000:5d:00"
    assert result.devices[3].name == "NVIDIA H200"
    assert result.notes == ["nccl-tests 2.18.2, NCCL 2.27.3"]
    assert result.warmup_iters == 1


def test_unchecked_in_place_group_has_no_wrong_count() -> None:
    result = parse_nccl_tests_file(DATA / "sendrecv-inplace-unchecked.log")[0]
    assert {r.wrong for r in result.rows if not r.in_place} == {0}
    assert {r.wrong for r in result.rows if r.in_place} == {None}


def test_single_column_group_takes_its_label() -> None:
    result = parse_nccl_tests_file(DATA / "single-group-inplace-all_reduce.log")[0]
    assert all(r.in_place for r in result.rows)
    assert len({r.size_bytes for r in result.rows}) == 5


def test_old_format_error_column_and_no_root() -> None:
    result = parse_nccl_tests_file(DATA / "old-format-v2.0-reduce.log")[0]
    assert {r.wrong for r in result.rows} == {None}
    assert {r.root for r in result.rows} == {None}
    assert result.devices[0].group is None
    assert result.rows[0].size_bytes == 8


def test_two_tables_with_srun_labels() -> None:
    results = parse_nccl_tests_file(DATA / "srun-labelled-two-tables.log")
    assert [r.op for r in results] == ["all_reduce", "reduce_scatter"]
    assert "NCCL 2.19.3+cuda12.3" in results[0].notes
    with pytest.raises(SpecError, match="holds 2 results tables"):
        parse_nccl_tests_log((DATA / "srun-labelled-two-tables.log").read_text())


def test_truncated_row_names_its_line() -> None:
    with pytest.raises(SpecError, match=r"truncated-all_reduce.log: line 20: a result row has 7 values"):
        parse_nccl_tests_file(DATA / "truncated-all_reduce.log")


def test_log_ending_before_average_names_the_last_line() -> None:
    lines = _sample_path().read_text().splitlines()
    cut = "\n".join(lines[:-3])  # drop the '# Out of bounds', '# Avg bus bandwidth' and '#' lines
    with pytest.raises(SpecError, match=rf"line {len(lines) - 3}: the log ends inside the results table that "
                                        r"starts at line 22"):
        parse_nccl_tests(cut)


def test_a_second_header_inside_an_open_table_is_an_error() -> None:
    lines = _sample_path().read_text().splitlines()
    text = "\n".join(lines[:26] + lines[19:])
    with pytest.raises(SpecError, match="line 29: a new results table starts, but the one at line 22 never"):
        parse_nccl_tests(text)


def test_malformed_value_names_line_and_column() -> None:
    text = _sample_path().read_text().replace("  1073741824     268435456", "  1073741824     26843545x")
    with pytest.raises(SpecError, match="line 25: cannot read '26843545x' as the count column"):
        parse_nccl_tests(text)


def test_unknown_type_names_its_line() -> None:
    text = _sample_path().read_text().replace("float     sum      -1   5202.3", "quad      sum      -1   5202.3")
    with pytest.raises(SpecError, match="line 24: dtype: unknown dtype 'quad'"):
        parse_nccl_tests(text)


def test_no_table_at_all() -> None:
    with pytest.raises(SpecError, match="no nccl-tests results table found"):
        parse_nccl_tests("NCCL WARN something failed\n")


def test_ambiguous_op_asks_for_it() -> None:
    text = (DATA / "mpirun-tagged-all_gather.log").read_text()
    with pytest.raises(SpecError, match="could be all_gather, all_to_all"):
        parse_nccl_tests(text)
    assert parse_nccl_tests(text, op="all_to_all")[0].op == "all_to_all"


def test_unmodelled_binary_is_named() -> None:
    text = (DATA / "nccl-tests-2.18-alltoall.log").read_text().replace("alltoall_perf", "gather_perf")
    with pytest.raises(SpecError, match="line 2: gather_perf is not a collective fabricsim models"):
        parse_nccl_tests(text)


def test_blank_group_is_placed_by_column() -> None:
    """nccl-tests prints spaces for a group it did not run (trace replay runs in-place only)."""
    lines = _sample_path().read_text().splitlines()
    row = lines[23]
    in_place_at = row.index("5377.7")
    blanked = row[:52] + " " * (in_place_at - 52) + row[in_place_at:]
    text = "\n".join([*lines[:23], blanked, *lines[24:]])
    result = parse_nccl_tests(text)[0]
    assert [(r.size_bytes, r.in_place) for r in result.rows[:2]] == [(536870912, True), (1073741824, False)]
    assert result.rows[0].time_s == pytest.approx(5377.7e-6)


def test_timestamp_and_per_iteration_columns() -> None:
    header = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max"
              "    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%  timestamp")
    row = ("     1048576        262144     float     sum      -1    20.00   52.43   91.75       0    19.10    21.30"
           "    21.20     2.10    20.10   52.17   91.29       0    19.00    21.50    21.40     2.30  "
           "2025-01-01 10:00:00")
    devices = [f"#  Rank {r:2d} Group  0 Pid 1 on h device {r} [0x{r + 1}] G" for r in range(8)]
    text = "\n".join([*devices, header, row, "# Avg bus bandwidth    : 91.52"])
    result = parse_nccl_tests(text)[0]
    assert result.op == "all_reduce"  # 8 ranks, ratio 1.75
    assert [(r.in_place, r.time_s, r.busbw_GBps) for r in result.rows] == [(False, 20e-6, 91.75),
                                                                           (True, 20.1e-6, 91.29)]


def _synthetic(op: str = "all_gather", nranks: int = 4, check: bool = True) -> BenchResult:
    rows = []
    for k, size in enumerate(4**k * 1024 for k in range(6)):
        for in_place in (False, True):
            time_s = 23.7e-6 + size / 7.3e9 * (1.03 if in_place else 1)
            algbw = size / time_s / 1e9
            rows.append(BenchRow(op=op, size_bytes=size, count=size // 2, dtype="bfloat16", redop="none",
                                 root=-1, in_place=in_place, time_s=time_s, algbw_GBps=algbw,
                                 busbw_GBps=algbw * busbw_factor(op, nranks), wrong=(k % 2) if check else None))
    devices = [DeviceInfo(rank=r, group=0, pid=100 + r, host=f"h{r // 2}", device=r % 2, bus_id="cpu", name="CPU")
               for r in range(nranks)]
    return BenchResult(tool="fabricsim", op=op, backend="gloo", world_size=nranks, hosts=["h0", "h1"],
                       devices=devices, dtype="bfloat16", warmup_iters=2, iters=7, check=check, rows=rows,
                       avg_busbw_GBps=sum(r.busbw_GBps for r in rows) / len(rows), source="test")


@pytest.mark.parametrize("check", [True, False])
def test_our_output_round_trips(check: bool) -> None:
    original = _synthetic(check=check)
    text = format_nccl_tests(original)
    assert "# Avg bus bandwidth    : " in text
    back = parse_nccl_tests_log(text)
    assert (back.tool, back.op, back.backend, back.world_size, back.hosts) == ("fabricsim", "all_gather", "gloo", 4,
                                                                               ["h0", "h1"])
    assert (back.warmup_iters, back.iters, back.check, back.dtype) == (2, 7, check, "bfloat16")
    assert back.devices == original.devices
    assert back.avg_busbw_GBps == pytest.approx(original.avg_busbw_GBps, rel=1e-5)
    assert back.out_of_bounds == (6 if check else 0)
    assert len(back.rows) == len(original.rows)
    for got, want in zip(back.rows, original.rows, strict=True):
        assert (got.size_bytes, got.count, got.dtype, got.redop, got.root, got.in_place, got.wrong) == (
            want.size_bytes, want.count, want.dtype, want.redop, want.root, want.in_place, want.wrong)
        assert got.time_s == pytest.approx(want.time_s, abs=0.006e-6, rel=1e-4)
        assert got.algbw_GBps == pytest.approx(want.algbw_GBps, abs=0.006)
        assert got.busbw_GBps == pytest.approx(want.busbw_GBps, abs=0.006)


def test_sample_round_trips_through_our_format() -> None:
    original = parse_nccl_tests_file(_sample_path())[0]
    back = parse_nccl_tests_log(format_nccl_tests(original))
    assert back.rows == original.rows
    assert back.devices == original.devices
    assert back.avg_busbw_GBps == original.avg_busbw_GBps


def test_several_results_print_as_several_tables() -> None:
    text = format_many([_synthetic("all_gather"), _synthetic("all_to_all")])
    assert [r.op for r in parse_nccl_tests(text)] == ["all_gather", "all_to_all"]


def _stream(results: list[BenchResult], rows_of: Callable[[BenchResult], list[BenchRow]] | None = None,
            ) -> tuple[TableStream, list[str]]:
    """Feed ``results`` through a TableStream as a run would; the chunks it wrote, one per call that wrote."""
    chunks: list[str] = []
    stream = TableStream(chunks.append)
    for result in results:
        sizes, placements = table_layout(result.rows)
        stream.begin(result.model_copy(update={"rows": [], "avg_busbw_GBps": None}), sizes, placements)
        for row in (rows_of or (lambda r: r.rows))(result):
            stream.row(row)
        stream.end(result)
    return stream, chunks


@pytest.mark.parametrize("check", [True, False])
def test_streamed_table_equals_the_whole_table(check: bool) -> None:
    results = [_synthetic("all_gather", check=check), _synthetic("all_to_all", nranks=2, check=check)]
    stream, chunks = _stream(results)
    assert "".join(chunks) == stream.text == format_many(results)
    assert stream.remainder(format_many(results)) == ""
    # per table: the header, then one chunk per size (after its in-place row), then the footer
    first = format_nccl_tests(results[0]).splitlines()
    assert chunks[0].splitlines() == first[:first.index("#  Rank  3 Group  0 Pid    103 on         h1 device  1 "
                                                        "[cpu] CPU") + 5]
    assert [c.splitlines() for c in chunks[1:7]] == [[line] for line in first[len(chunks[0].splitlines()):][:6]]
    assert chunks[7].startswith("# Out of bounds values")
    assert chunks[8].startswith("\n# fabricsim bench collective all_to_all")
    assert len(chunks) == 2 * (1 + 6 + 1)


def test_streamed_table_keeps_odd_layouts() -> None:
    """One column group only (model predictions print that way), rows arriving in-place first, or a size line
    left incomplete: still exactly format_many's text."""
    oop_only = _synthetic().model_copy(update={"rows": [r for r in _synthetic().rows if not r.in_place]})
    flipped = _synthetic("all_to_all")
    missing = _synthetic("broadcast")
    missing = missing.model_copy(update={"rows": missing.rows[:3] + missing.rows[4:]})
    results = [oop_only, flipped, missing]

    def rows_of(result: BenchResult) -> list[BenchRow]:
        if result.op != "all_to_all":
            return result.rows
        return [row for pair in zip(result.rows[1::2], result.rows[::2], strict=True) for row in pair]

    _, chunks = _stream(results, rows_of)
    assert "".join(chunks) == format_many(results)
    assert "".join(_stream([missing])[1]) == format_nccl_tests(missing)


def test_stream_mismatch_prints_the_final_table() -> None:
    stream, _ = _stream([_synthetic()])
    other = format_many([_synthetic("all_to_all")])
    assert stream.remainder(other).endswith(other)
    assert stream.remainder(other).startswith("\n# ")


def test_cli_parse_json_and_table(runner: CliRunner) -> None:
    result = runner.invoke(app, ["bench", "parse", str(_sample_path()), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["results"]
    assert data[0]["op"] == "all_reduce" and len(data[0]["rows"]) == 10
    assert data[0]["rows"][0]["busbw_bytes_per_s"] == 193.5e9
    table = runner.invoke(app, ["bench", "parse", str(DATA / "mpirun-tagged-all_gather.log")])
    assert table.exit_code == 0, table.output
    assert "all_gather (nccl-tests, 16 ranks on dgx-a01, dgx-a02)" in table.output
    assert "Avg bus bandwidth: 112.959 GB/s" in table.output


def test_cli_parse_errors_are_one_line(runner: CliRunner) -> None:
    result = runner.invoke(app, ["bench", "parse", str(DATA / "truncated-all_reduce.log")])
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and "line 20:" in result.output
    assert len(result.output.strip().splitlines()) == 1
    missing = runner.invoke(app, ["bench", "parse", "/nonexistent.log"])
    assert (missing.exit_code, missing.output) == (2, "error: /nonexistent.log: file not found\n")
    bad_op = runner.invoke(app, ["bench", "parse", str(DATA / "mpirun-tagged-all_gather.log"), "--op", "bogus"])
    assert bad_op.exit_code == 2 and "unknown op 'bogus'" in bad_op.output
    several = runner.invoke(app, ["bench", "parse", str(_sample_path()), "--op", "all"])
    assert several.exit_code == 2 and "give one operation" in several.output
