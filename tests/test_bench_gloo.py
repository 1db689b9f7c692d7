"""Real torch.distributed runs on CPU (gloo over loopback), as CI runs them: every operation with 2 and 4 ranks,
a corrupted result counted, a dead or hung rank named within the timeout, a busy port reported, the CLI in
both launch modes (spawned ranks and torchrun)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricsim.bench import FAULT_ENV, BenchError, CollectiveConfig, run_collective_bench
from fabricsim.bench.faults import DIE_EXIT_CODE
from fabricsim.cli import app
from fabricsim.collectives import OPS, busbw_factor
from fabricsim.errors import SpecError
from fabricsim.nccltests import BenchResult, BenchRow, TableStream, format_many, parse_nccl_tests

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

SIZES = [1024 * 4**k for k in range(7)]  # 1K .. 4M


def _config(nprocs: int, **kwargs: object) -> CollectiveConfig:
    settings: dict[str, object] = {"ops": OPS, "min_bytes": 1024, "max_bytes": 4 * 2**20, "step_factor": 4,
                                   "warmup": 1, "iters": 2, "nprocs": nprocs, "timeout_s": 60.0}
    settings.update(kwargs)
    return CollectiveConfig(**settings)  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=[2, 4], ids=["2ranks", "4ranks"])
def sweep(request: pytest.FixtureRequest) -> tuple[int, list[BenchResult]]:
    results = run_collective_bench(_config(request.param))
    assert results is not None
    return request.param, results


def test_every_op_is_correct_and_timed(sweep: tuple[int, list[BenchResult]]) -> None:
    nranks, results = sweep
    assert [r.op for r in results] == list(OPS)
    for result in results:
        assert (result.tool, result.backend, result.world_size) == ("fabricsim", "gloo", nranks)
        assert result.hosts == [socket.gethostname()]
        assert [d.rank for d in result.devices] == list(range(nranks))
        assert len({d.pid for d in result.devices}) == nranks
        assert [(r.size_bytes, r.in_place) for r in result.rows] == [(s, p) for s in SIZES for p in (False, True)]
        for row in result.rows:
            assert row.wrong == 0, (result.op, row)
            assert row.time_s > 0
            assert row.count * 4 == row.size_bytes
            assert row.algbw_GBps == pytest.approx(row.size_bytes / row.time_s / 1e9)
            assert row.busbw_GBps == pytest.approx(row.algbw_GBps * busbw_factor(result.op, nranks))
        assert result.out_of_bounds == 0
        assert result.avg_busbw_GBps == pytest.approx(sum(r.busbw_GBps for r in result.rows) / len(result.rows))
        assert result.notes


def test_our_table_round_trips(sweep: tuple[int, list[BenchResult]]) -> None:
    nranks, results = sweep
    back = parse_nccl_tests(format_many(results))
    assert [r.op for r in back] == list(OPS)
    for got, want in zip(back, results, strict=True):
        assert (got.tool, got.backend, got.world_size, got.hosts) == ("fabricsim", "gloo", nranks, want.hosts)
        assert got.avg_busbw_GBps == pytest.approx(want.avg_busbw_GBps, rel=1e-5)
        for g, w in zip(got.rows, want.rows, strict=True):
            assert (g.size_bytes, g.count, g.in_place, g.wrong, g.root, g.redop) == (
                w.size_bytes, w.count, w.in_place, w.wrong, w.root, w.redop)
            assert g.time_s == pytest.approx(w.time_s, rel=1e-3)
            assert g.busbw_GBps == pytest.approx(w.busbw_GBps, abs=0.006)


class _Recorder:
    """A listener that records every call, and whether the ranks were still running when it came."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.ranks_alive: list[int] = []
        self.stream = TableStream(lambda _: None)

    def begin(self, result: BenchResult, sizes: list[int], placements: list[bool]) -> None:
        self.calls.append(("begin", (result.op, sizes, placements)))
        self.stream.begin(result, sizes, placements)

    def row(self, row: BenchRow) -> None:
        self.calls.append(("row", row))
        self.ranks_alive.append(sum(p.name.startswith("fabricsim-bench-rank") for p in mp.active_children()))
        self.stream.row(row)

    def end(self, result: BenchResult) -> None:
        self.calls.append(("end", result))
        self.stream.end(result)


def test_rows_stream_while_the_run_goes_on() -> None:
    """Each row reaches the listener as soon as it is measured (the ranks still running), in order, with the
    figures the final results have; the streamed table is exactly format_many's."""
    recorder = _Recorder()
    results = run_collective_bench(_config(2, ops=("all_reduce", "broadcast"), max_bytes=4 * 2**20),
                                   listener=recorder)
    assert results is not None
    expected: list[tuple[str, object]] = []
    for result in results:
        sizes = list(dict.fromkeys(row.size_bytes for row in result.rows))
        expected += [("begin", (result.op, sizes, [False, True])), *(("row", row) for row in result.rows),
                     ("end", result)]
    assert recorder.calls == expected
    assert recorder.stream.text == format_many(results)
    assert recorder.ranks_alive[0] == 2  # the first row came while both ranks were still measuring


def test_cli_table_streams_exactly_the_final_table(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    finals: list[tuple[str, str]] = []
    remainder = TableStream.remainder

    def spy(self: TableStream, full: str) -> str:
        finals.append((self.text, full))
        return remainder(self, full)

    monkeypatch.setattr(TableStream, "remainder", spy)
    result = runner.invoke(app, ["bench", "collective", "--nprocs", "2", "--op", "all_reduce,all_gather", "--max",
                                 "4K", "--iters", "1", "--warmup", "0"])
    assert result.exit_code == 0, result.output
    ((streamed, full),) = finals
    assert streamed == full == result.output
    assert [r.op for r in parse_nccl_tests(result.output)] == ["all_reduce", "all_gather"]


def test_odd_world_and_16_bit_type() -> None:
    """3 ranks (chunks not a power of two per rank) in bfloat16: still every element right."""
    results = run_collective_bench(_config(3, dtype="bfloat16", min_bytes=96, max_bytes=96 * 64**2, step_factor=64))
    assert results is not None
    for result in results:
        assert result.dtype == "bfloat16" and result.world_size == 3
        assert [row.size_bytes for row in result.rows[::2]] == [96, 96 * 64, 96 * 64**2]
        assert result.wrong_total == 0, result.op


def test_corrupted_result_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "corrupt:0")
    results = run_collective_bench(_config(2, max_bytes=4096))
    assert results is not None
    for result in results:
        assert [row.wrong for row in result.rows] == [1] * 4, result.op  # one element on rank 0, every row
        assert result.out_of_bounds == 4


def test_dead_rank_fails_fast_and_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "die:1")
    start = time.monotonic()
    with pytest.raises(BenchError, match=rf"^rank 1 died \(exit code {DIE_EXIT_CODE}\)"):
        run_collective_bench(_config(2, ops=("all_reduce",), timeout_s=20.0))
    assert time.monotonic() - start < 20


def test_hung_rank_fails_within_timeout_and_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "hang:1")
    start = time.monotonic()
    with pytest.raises(BenchError) as info:
        run_collective_bench(_config(2, ops=("broadcast",), timeout_s=10.0))
    elapsed = time.monotonic() - start
    assert str(info.value) == "rank 1 did not finish broadcast 1K out-of-place within 10 s (rank 0 waiting)"
    assert elapsed < 10 + 10  # start-up plus the timeout, never a hang


def test_port_in_use_is_reported() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(SpecError, match=rf"port {port} is already in use; pass --master-port") as info:
            run_collective_bench(_config(2, master_port=port))
    assert info.value.field == "master_port"


def _fabricsim(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricsim", *args], capture_output=True, text=True, check=False,
                          env=env, timeout=timeout)


def test_cli_table_is_nccl_tests_layout() -> None:
    proc = _fabricsim("bench", "collective", "--nprocs", "2", "--op", "reduce_scatter", "--min", "1K", "--max", "64K",
                      "--step-factor", "4", "--iters", "2", "--warmup", "1", "--no-check")
    assert proc.returncode == 0, proc.stderr
    assert "#       size         count      type   redop    root     time   algbw   busbw  #wrong" in proc.stdout
    assert "# Avg bus bandwidth    : " in proc.stdout
    (result,) = parse_nccl_tests(proc.stdout)
    assert (result.op, result.world_size, result.check) == ("reduce_scatter", 2, False)
    assert [r.size_bytes for r in result.rows] == [1024, 1024, 4096, 4096, 16384, 16384, 65536, 65536]
    assert {r.wrong for r in result.rows} == {None}


def test_cli_json_and_corruption_exit_code(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "corrupt:1")
    result = runner.invoke(app, ["bench", "collective", "--nprocs", "2", "--op", "all_gather", "--max", "2K",
                                 "--iters", "1", "--warmup", "0", "--json"])
    assert result.exit_code == 1
    out, _, err = result.output.rpartition("}\n")
    data = json.loads(out + "}")["results"][0]
    assert (data["op"], data["backend"], data["ranks"], data["hosts"]) == ("all_gather", "gloo", 2,
                                                                                [socket.gethostname()])
    assert [row["wrong"] for row in data["rows"]] == [1, 1, 1, 1]
    assert err == "error: 4 wrong elements in 4 results (correctness check failed)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--min", "0"], "error: min: must be at least 1 byte, got 0"),
        (["--min", "4M", "--max", "1K"], "error: max: 1K is smaller than min (4M)"),
        (["--min", "lots"], "error: min: cannot read 'lots' as a size"),
        (["--op", "all_gather", "--nprocs", "4", "--min", "8"], "error: min: 8 bytes is less than one float32"),
        (["--backend", "nccl"], "error: backend: backend nccl needs CUDA GPUs"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(runner: CliRunner, args: list[str], message: str) -> None:
    torch = pytest.importorskip("torch")
    if "nccl" in args and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = runner.invoke(app, ["bench", "collective", *args])
    assert result.exit_code == 2
    assert result.output.startswith(message)
    assert len(result.output.strip().splitlines()) == 1


def test_cli_dead_rank_is_one_line_exit_1() -> None:
    env = {**os.environ, FAULT_ENV: "die:1"}
    proc = _fabricsim("bench", "collective", "--nprocs", "2", "--max", "1K", "--timeout", "20s", env=env)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: rank 1 died (exit code {DIE_EXIT_CODE})")
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def _torchrun(*args: str) -> subprocess.CompletedProcess[str]:
    """``fabricsim ARGS`` as 2 local ranks under torchrun (the test is skipped without torchrun)."""
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        torchrun = Path(shutil.which("torchrun") or "")
    if not torchrun.is_file():
        pytest.skip("torchrun is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", FAULT_ENV)}
    return subprocess.run(
        [str(torchrun), "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
         "-m", "fabricsim", *args],
        capture_output=True, text=True, check=False, env=env, timeout=120,
    )


def test_torchrun_joins_the_job() -> None:
    proc = _torchrun("bench", "collective", "--op", "send_recv", "--max-bytes", "4K", "--iters", "2", "--warmup", "1",
                     "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)["results"][0]  # only rank 0 prints
    assert (data["op"], data["ranks"]) == ("send_recv", 2)
    assert [row["wrong"] for row in data["rows"]] == [0] * 6


def test_torchrun_rank_0_streams_the_table() -> None:
    proc = _torchrun("bench", "collective", "--op", "send_recv,all_reduce", "--max-bytes", "4K", "--iters", "2",
                     "--warmup", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("# Collective test starting") == 2  # only rank 0 prints, each table once
    assert "differs from the final results" not in proc.stdout
    back = parse_nccl_tests(proc.stdout)
    assert [(r.op, r.world_size, len(r.rows)) for r in back] == [("send_recv", 2, 6), ("all_reduce", 2, 6)]
