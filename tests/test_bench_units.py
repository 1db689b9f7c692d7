"""Pieces of the benchmark harness that need no running ranks: conventions, config and sizes, fault parsing,
watchdog messages, torchrun detection, the memory benchmark's sweep and its no-CUDA answer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from fabricsim.bench import CollectiveConfig, MemoryConfig, parse_ops, torchrun_env
from fabricsim.bench.config import phase_name, plan
from fabricsim.bench.faults import FAULT_ENV, Fault, fault_from_env
from fabricsim.bench.launch import _exit_text, _failure_message, _stall_message
from fabricsim.bench.memory import summarize, sweep
from fabricsim.cli import app
from fabricsim.collectives import OPS, busbw_factor
from fabricsim.errors import SpecError
from fabricsim.nccltests.rows import canonical_dtype, dtype_size, nccl_tests_dtype


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [("all_reduce", 8, 1.75), ("all_reduce", 2, 1.0), ("all_reduce", 1, 0.0), ("all_gather", 4, 0.75),
     ("reduce_scatter", 16, 15 / 16), ("all_to_all", 8, 7 / 8), ("broadcast", 8, 1.0), ("reduce", 3, 1.0),
     ("send_recv", 2, 1.0)],
)
def test_busbw_factors_follow_nccl_tests(op: str, n: int, factor: float) -> None:
    assert busbw_factor(op, n) == pytest.approx(factor)


def test_busbw_factor_rejects_unknown_op_and_ranks() -> None:
    assert OPS == ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv")
    with pytest.raises(SpecError, match="unknown op 'allreduce'"):
        busbw_factor("allreduce", 4)
    with pytest.raises(ValueError, match="nranks"):
        busbw_factor("all_reduce", 0)


def test_dtype_names() -> None:
    assert canonical_dtype("float") == "float32"
    assert canonical_dtype("half") == "float16"
    assert canonical_dtype("BF16") == "bfloat16"
    assert nccl_tests_dtype("float64") == "double"
    assert dtype_size("bfloat16") == 2
    with pytest.raises(SpecError, match="dtype: unknown dtype 'quad'"):
        canonical_dtype("quad")


def test_sizes_follow_nccl_tests_rounding() -> None:
    config = CollectiveConfig(ops=("all_reduce", "all_gather"), min_bytes=1000, max_bytes=64000, step_factor=4)
    assert config.sizes("all_reduce", 3) == [(1000, 250), (4000, 1000), (16000, 4000), (64000, 16000)]
    # chunked ops: a multiple of nranks elements
    assert config.sizes("all_gather", 3) == [(996, 249), (3996, 999), (15996, 3999), (63996, 15999)]
    steps = plan(config, 3)
    assert len(steps) == 16
    assert steps[:2] == [("all_reduce", 1000, 250, False), ("all_reduce", 1000, 250, True)]


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"min_bytes": 0}, "min", "at least 1 byte"),
        ({"min_bytes": 4096, "max_bytes": 1024}, "max", "1K is smaller than min (4K)"),
        ({"step_factor": 1}, "step_factor", "at least 2"),
        ({"iters": 0}, "iters", "at least 1"),
        ({"warmup": -1}, "warmup", "0 or more"),
        ({"timeout_s": 0.0}, "timeout", "positive"),
        ({"nprocs": 0}, "nprocs", "at least 1"),
        ({"master_port": 70000}, "master_port", "TCP port"),
        ({"backend": "mpi"}, "backend", "allowed: gloo, nccl"),
        ({"dtype": "fp8_e4m3"}, "dtype", "cannot check fp8_e4m3"),
        ({"ops": ()}, "op", "at least one"),
        ({"ops": ("all_reduce", "all_reduce")}, "op", "listed twice"),
        ({"ops": ("allreduce",)}, "--op", "did you mean 'all_reduce'"),
    ],
)
def test_invalid_config_is_a_spec_error(kwargs: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)) as info:
        CollectiveConfig(**kwargs)
    assert info.value.field == field


def test_world_size_checks() -> None:
    config = CollectiveConfig(ops=("all_gather", "send_recv"), min_bytes=8, root=3)
    with pytest.raises(SpecError, match="min: 8 bytes is less than one float32 element per rank for all_gather "
                                        r"over 4 ranks \(16 bytes\)"):
        CollectiveConfig(ops=("all_gather",), min_bytes=8).check_world(4)
    with pytest.raises(SpecError, match="root: rank 3 does not exist in a world of 2"):
        config.check_world(2)
    with pytest.raises(SpecError, match="send_recv needs at least 2 ranks"):
        CollectiveConfig(ops=("send_recv",)).check_world(1)


def test_parse_ops() -> None:
    assert parse_ops(["all"]) == OPS
    assert parse_ops(["all_reduce,alltoall_perf", "sendrecv", "allgather", "all_reduce"]) == (
        "all_reduce", "all_to_all", "send_recv", "all_gather")
    with pytest.raises(SpecError, match="unknown op 'gather'"):
        parse_ops(["gather"])


def test_fault_env() -> None:
    assert fault_from_env({}) is None
    assert fault_from_env({FAULT_ENV: "hang:3"}) == Fault("hang", 3)
    for bad in ("die", "explode:1", "die:x"):
        with pytest.raises(SpecError, match=FAULT_ENV):
            fault_from_env({FAULT_ENV: bad})


def test_phase_names() -> None:
    steps = plan(CollectiveConfig(ops=("all_reduce",), min_bytes=1024, max_bytes=4096), 2)
    assert phase_name(0, steps) == "start-up"
    assert phase_name(1, steps) == "joining the process group"
    assert phase_name(2, steps) == "all_reduce 1K out-of-place"
    assert phase_name(5, steps) == "all_reduce 1K in-place"
    assert phase_name(2 + 2 * len(steps), steps) == "gathering results"


def _proc(exitcode: int | None) -> Any:
    return SimpleNamespace(exitcode=exitcode)


def test_failure_message_blames_the_rank_that_died(tmp_path: Path) -> None:
    (tmp_path / "rank0.error").write_text("RuntimeError: Connection closed by peer [127.0.0.1]:1234")
    (tmp_path / "rank1.log").write_text("starting\nSegmentation fault\n")
    message = _failure_message([_proc(1), _proc(-11), _proc(None)], tmp_path)
    assert message == "rank 1 died (killed by SIGSEGV); its last output: Segmentation fault"


def test_failure_message_prefers_own_errors_over_peer_errors(tmp_path: Path) -> None:
    (tmp_path / "rank0.error").write_text("RuntimeError: Connection reset by peer")
    (tmp_path / "rank1.error").write_text("RuntimeError: Tensors must be contiguous")
    assert _failure_message([_proc(1), _proc(1)], tmp_path) == "rank 1 failed: RuntimeError: Tensors must be contiguous"


def test_exit_text() -> None:
    assert _exit_text(17) == "exit code 17"
    assert _exit_text(-9) == "killed by SIGKILL"


def test_stall_message_names_the_rank_behind() -> None:
    steps = plan(CollectiveConfig(ops=("broadcast",), min_bytes=1024, max_bytes=1024), 4)
    procs = [_proc(None)] * 4
    assert _stall_message([3, 2, 3, 3], procs, 10.0, steps) == (
        "rank 1 did not finish broadcast 1K out-of-place within 10 s (ranks 0, 2, 3 waiting)")
    assert _stall_message([3, 3, 3, 3], procs, 2.5, steps) == (
        "ranks 0, 1, 2, 3 did not finish broadcast 1K out-of-place within 2.5 s")


def test_torchrun_env() -> None:
    assert torchrun_env({}) is None
    env = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert torchrun_env(env) == (3, 8, 1)
    with pytest.raises(SpecError, match="MASTER_ADDR"):
        torchrun_env({"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(SpecError, match="outside WORLD_SIZE"):
        torchrun_env({**env, "RANK": "8"})


def test_memory_sweep_and_summary_with_a_fake_timer() -> None:
    config = MemoryConfig(min_bytes=2**20, max_bytes=2**24, step_factor=4)
    rates = {"d2d": 2.0e12, "h2d_pinned": 50e9, "h2d_pageable": 20e9, "d2h_pinned": 45e9, "d2h_pageable": 15e9}
    rows = sweep(config, lambda kind, size: 5e-6 + size / rates[kind])
    assert len(rows) == 5 * 3
    result = summarize(rows, device="Fake GPU", device_index=0)
    assert result.hbm_copy_GBps == pytest.approx(2**24 / (5e-6 + 2**24 / 2e12) / 1e9)
    assert result.hbm_traffic_GBps == pytest.approx(2 * result.hbm_copy_GBps)
    assert result.pcie_GBps == result.pcie_d2h_GBps
    assert result.pcie_h2d_GBps is not None and result.pcie_h2d_GBps > result.pcie_GBps
    assert all(r.hbm_traffic_GBps is None for r in rows if r.kind != "d2d")


def test_memory_config_is_checked() -> None:
    with pytest.raises(SpecError, match="max: 1M is smaller than min"):
        MemoryConfig(min_bytes=2**21, max_bytes=2**20)
    with pytest.raises(SpecError, match="device"):
        MemoryConfig(device=-1)


def test_memory_without_cuda_says_so_and_exits_0(runner: CliRunner) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = runner.invoke(app, ["bench", "memory", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["rows"] == [] and "no CUDA device" in data["reason"]
    assert set(data) == {"inputs", "rows", "reason"}
    table = runner.invoke(app, ["bench", "memory"])
    assert table.exit_code == 0 and "no CUDA device" in table.output


def test_bench_package_does_not_import_torch() -> None:
    code = "import sys, fabricsim.bench, fabricsim.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_check_data_and_wrong_counts() -> None:
    torch = pytest.importorskip("torch")
    from fabricsim.bench.torchops import NARROW, WIDE, _sum_pattern, count_wrong, pattern

    cpu = torch.device("cpu")
    narrow = pattern(1, 3, 12, torch.float32, cpu, NARROW)
    assert narrow.tolist() == [float((2 * (3 + i) + 3) % 5) for i in range(12)]
    wide = [pattern(r, 0, 256, torch.int64, cpu, WIDE) for r in range(4)]
    assert len({tuple(w.tolist()) for w in wide}) == 4  # ranks tell apart
    summed = _sum_pattern(range(4), 7, 9, torch.int64, cpu)
    assert summed.tolist() == sum(pattern(r, 7, 9, torch.int64, cpu, NARROW) for r in range(4)).tolist()
    # integer sums wrap the way an int8 reduction does
    assert _sum_pattern(range(100), 0, 3, torch.int8, cpu).tolist() == [200 - 256] * 3
    expected = _sum_pattern(range(8), 0, 1000, torch.bfloat16, cpu)
    result = expected.clone()
    result[[3, 500]] += 1
    assert count_wrong(result, expected, 8) == 2
    # a chunk in the wrong place shows: rank 1's data where rank 2's belongs
    gathered = torch.cat([pattern(r, 0, 64, torch.float32, cpu) for r in (0, 1, 1, 3)])
    want = torch.cat([pattern(r, 0, 64, torch.float32, cpu) for r in range(4)])
    assert count_wrong(gathered, want, 4) == 64
    # past bfloat16's exact range (4 * n > 256), a relative tolerance of eps * n applies
    big = _sum_pattern(range(200), 0, 10, torch.bfloat16, cpu)
    assert count_wrong(big * (1 + 2**-8), big, 200) == 0
