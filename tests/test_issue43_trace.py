"""Issue 43 (trace import): events the reader drops are counted and named; no GEMM rate from CPU operators and no
efficiency above the GPU's peak; a trace is refused against another system's GPU (with or without --model) and
against a plan of another world size; a nesting-depth bound before the streaming parser; --rank errors that say
what the trace holds; parser errors on one line; `trace calibrate` tables that fold at 80 columns."""

from __future__ import annotations

import copy
import gzip
import json
import os
import random
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fabricsim.calibration import gemm_efficiency
from fabricsim.catalog import default_catalog
from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.traces import GemmStat, import_trace, read_trace
from fabricsim.traces.scan import DepthScan
from test_trace_import import _x, gpu_trace, nsys_file, write

US = 1e-6


def _cli(*args: str, env: dict[str, str] | None = None, limit_bytes: int | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-m", "fabricsim", *args], capture_output=True, text=True, check=False,
                          timeout=timeout, env={**os.environ, **(env or {})}, preexec_fn=limit)


def _json(args: list[str]) -> dict[str, Any]:
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    data: dict[str, Any] = json.loads(out.output)
    return data


# ---- item 5: dropped events, GEMM rates, device and world checks -----------------------------------------------
def bad_events_trace() -> dict[str, Any]:
    """The known two steps plus three kernels the reader cannot place: a negative dur, a string ts, no name."""
    doc = gpu_trace()
    doc["traceEvents"] += [
        _x("sm90_xmma_gemm_negative", "kernel", 5_000_100.0, -50.0, **{"device": 0, "stream": 7}),
        _x("sm90_xmma_gemm_string_ts", "kernel", "5000200", 50.0, **{"device": 0, "stream": 7}),
        {**_x("x", "kernel", 5_000_300.0, 10.0, **{"device": 0, "stream": 7}), "name": None},
        _x("python_function_ignored", "python_function", "bad", 1.0),  # a category no summary uses: not counted
    ]
    return doc


def test_dropped_events_are_counted_by_reason_and_named(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.json", bad_events_trace())
    summary = import_trace(path)
    assert summary.dropped.counts == {"a negative dur": 1, "a ts that is not a finite number": 1,
                                      "a name that is not a string": 1}
    assert summary.dropped.examples["a negative dur"] == "sm90_xmma_gemm_negative"
    gemm = next(c for c in summary.device().classes if c.kind == "gemm")
    assert gemm.count == 1  # the negative-dur kernel is not counted as a zero-length GEMM
    notes = [w for w in summary.warnings if "could not be read" in w]
    assert len(notes) == 1 and notes[0].startswith("3 kernel/operator event(s)")
    assert "sm90_xmma_gemm_string_ts" in notes[0]
    data = _json(["trace", "import", str(path)])
    assert data["summary"]["dropped_events"]["a negative dur"] == {"count": 1, "first": "sm90_xmma_gemm_negative"}
    proc = _cli("trace", "import", str(path))
    assert proc.returncode == 0
    assert [line for line in proc.stderr.splitlines() if "could not be read" in line] == [f"warning: {notes[0]}"]
    clean = import_trace(write(tmp_path / "ok.json", gpu_trace()))
    assert len(clean.dropped) == 0 and clean.to_json()["dropped_events"] == {}


def test_nsight_rows_ending_before_they_start_are_counted(tmp_path: Path) -> None:
    path = nsys_file(tmp_path / "t.sqlite")
    con = sqlite3.connect(path)
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, 7, 99, 1, 0, 0, NULL)",
                (10**12 + 500, 10**12 + 100))
    con.commit()
    con.close()
    summary = import_trace(path)
    assert summary.dropped.counts == {"no start, no end or an end before its start": 1}
    assert summary.device().idle_s == pytest.approx(150 * US)


def cpu_only_trace() -> dict[str, Any]:
    """The known trace with its GPU kernels and GPU step marks removed: what a profile without CUDA activity holds
    (an NCCL run's CPU operators; aten::mm's 5 us is its launch, not its 0.137 TFLOP)."""
    doc = gpu_trace()
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_user_annotation")]
    return doc


def test_no_gemm_rate_from_cpu_operators(tmp_path: Path) -> None:
    path = write(tmp_path / "cpu.json", cpu_only_trace())
    dev = import_trace(path).device()
    assert dev.kind == "cpu" and dev.gemm is None and dev.gemm_note is not None and "no GPU kernels" in dev.gemm_note
    data = _json(["trace", "import", str(path)])
    assert data["gemm_efficiency"] is None and "no GPU kernels" in data["gemm_note"]
    assert data["summary"]["devices"][0]["gemm"] is None
    proc = _cli("trace", "import", str(path))
    assert proc.returncode == 0 and "TFLOP/s" not in proc.stdout and "no GEMM rate" in proc.stdout


def test_gemm_rate_above_the_peak_is_no_efficiency(tmp_path: Path) -> None:
    h100 = default_catalog().gpu("h100-sxm")
    eff = gemm_efficiency(GemmStat(ops=1, flops=2 * 4096**3, time_s=5e-6, dtype="c10::BFloat16"), h100)
    assert eff.fraction is None and not eff.plausible and eff.note is not None and "peak" in eff.note
    ok = gemm_efficiency(GemmStat(ops=1, flops=2 * 4096**3, time_s=300e-6, dtype="c10::BFloat16"), h100)
    assert ok.plausible and ok.fraction == pytest.approx(2 * 4096**3 / 300e-6 / h100.bf16_flops_per_s)
    doc = gpu_trace()
    for e in doc["traceEvents"]:  # GEMM kernels of 1 us for a 4096^3 GEMM: 137 PFLOP/s
        if e.get("cat") == "kernel" and "gemm" in e["name"]:
            e["dur"] = 1.0
    path = write(tmp_path / "fast_gemm.json", doc)
    data = _json(["trace", "import", str(path)])
    assert data["gemm_efficiency"]["fraction"] is None and data["gemm_efficiency"]["achieved_flops_per_s"] is None
    assert "peak" in data["gemm_note"]
    proc = _cli("trace", "import", str(path))
    assert proc.returncode == 0 and "TFLOP/s would be" in proc.stdout and "% of the" not in proc.stdout


def test_trace_refused_against_another_gpu_without_model(tmp_path: Path) -> None:
    path = write(tmp_path / "h100.json", gpu_trace())
    proc = _cli("trace", "import", str(path), "--system", "dgx-a100")
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
    assert "cannot belong to dgx-a100" in proc.stderr
    assert _json(["trace", "import", str(path), "--system", "dgx-h100"])["gemm_efficiency"]["gpu"] == "h100-sxm"
    # a profile without GPU kernels has no GPU to check and no efficiency to compute: not refused
    cpu = write(tmp_path / "cpu.json", cpu_only_trace())
    assert _json(["trace", "import", str(cpu), "--system", "dgx-a100"])["gemm_efficiency"] is None


def test_trace_refused_against_a_plan_of_another_world_size(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", gpu_trace())  # distributedInfo.world_size 8
    plan = ["trace", "import", str(path), "--model", "llama3-8b", "--system", "dgx-h100", "--tp", "8"]
    proc = _cli(*plan, "--gpus", "64", "--gbs", "64")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("error: --gpus: the plan has 64 GPUs") and "--gpus 8" in proc.stderr
    implied = _cli(*plan, "--dp", "2", "--gbs", "64")
    assert implied.returncode == 2 and "16 GPUs (tp 8 x pp 1 x dp 2 x cp 1)" in implied.stderr
    assert _json([*plan, "--gpus", "8", "--gbs", "8"])["comparison"]


# ---- item 13: nesting depth ----------------------------------------------------------------------------------------
def test_deep_nesting_is_refused_before_the_parser(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"traceEvents": [' + "[" * 1000 + "]" * 1000 + "]}")
    with pytest.raises(SpecError, match=r"nested more than 64 levels deep \(at byte offset 79 "):
        read_trace(deep)
    packed = tmp_path / "deep.json.gz"
    with gzip.open(packed, "wt") as f:
        f.write("[" * 5000)
    with pytest.raises(SpecError, match="nested more than 64 levels deep"):
        read_trace(packed)


def test_100k_nested_brackets_are_refused_in_bounded_memory(tmp_path: Path) -> None:
    """The issue's file: before, ijson's prefixes took 23.7 GB; now one line, well inside 3 GB of address space."""
    path = tmp_path / "brackets.json"
    path.write_text("[" * 100_000)
    proc = _cli("trace", "import", str(path), limit_bytes=3 * 2**30, timeout=60)
    assert proc.returncode == 2, proc.stderr[-500:]
    assert proc.stderr.count("\n") == 1 and "nested more than 64 levels deep" in proc.stderr


def test_brackets_and_escaped_quotes_inside_strings_do_not_count(tmp_path: Path) -> None:
    doc = gpu_trace()
    odd = 'void k<"[[[[{{{{">(\\"[[[[\\\\'  # brackets and escaped quotes inside a name
    doc["traceEvents"] += [_x(odd * 20 + str(i), "kernel", 5_000_950.0 + i, 1.0, **{"device": 0, "stream": 9})
                           for i in range(40)]
    path = write(tmp_path / "odd.json", doc)
    summary = import_trace(path)
    assert len(summary.dropped) == 0 and summary.device().steps == 2


def _reference_depth(text: bytes) -> int:
    depth = deepest = 0
    inside = escaped = False
    for ch in text.decode():
        if inside:
            escaped, inside = (False, inside) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            inside = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def test_depth_scan_matches_a_reference_across_chunk_boundaries() -> None:
    rng = random.Random(43)

    def text() -> str:
        return "".join(rng.choice(["[", "]", "{", "}", '"', "\\", "a", "é", "\\\\"]) for _ in range(rng.randint(0, 6)))

    def value(depth: int) -> Any:
        r = rng.random()
        if depth > 10 or r < 0.3:
            return rng.choice([1, 2.5, None, True, text()])
        if r < 0.65:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {text(): value(depth + 1) for _ in range(rng.randint(0, 3))}

    refused_some = passed_some = False
    for _ in range(400):
        data = json.dumps(value(0), ensure_ascii=rng.random() < 0.5).encode()
        limit, size = rng.randint(0, 12), rng.randint(1, 5)
        scan = DepthScan("x", limit)
        try:
            for i in range(0, len(data), size):
                scan.feed(data[i:i + size])
        except SpecError:
            refused = True
        else:
            refused = False
            assert scan.depth == 0 and not scan.in_string
        assert refused == (_reference_depth(data) > limit), (data, limit, size)
        refused_some, passed_some = refused_some or refused, passed_some or not refused
    assert refused_some and passed_some


# ---- item 16: --rank and parser errors --------------------------------------------------------------------------
def test_rank_error_says_what_the_trace_holds(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", gpu_trace())
    proc = _cli("trace", "import", str(path), "--rank", "5")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "rank 0 of 8 only (distributedInfo.rank), on GPU 0" in proc.stderr and "it has 0" not in proc.stderr
    doc = copy.deepcopy(gpu_trace())
    del doc["distributedInfo"]
    bare = _cli("trace", "import", str(write(tmp_path / "bare.json", doc)), "--rank", "5")
    assert bare.returncode == 2 and "no GPU 5 in the trace: it holds GPU 0 only" in bare.stderr


def test_rank_may_be_the_distributed_rank_of_a_one_gpu_trace(tmp_path: Path) -> None:
    doc = gpu_trace()
    doc["distributedInfo"]["rank"] = 3  # rank 3 ran on GPU 0 of its node
    path = write(tmp_path / "r3.json", doc)
    assert _json(["trace", "import", str(path), "--rank", "3"])["device"] == 0
    assert _json(["trace", "import", str(path), "--rank", "0"])["device"] == 0


@pytest.mark.parametrize("text", [b'{"traceEvents": [{"ph": "X", "name": "a",, }]}', b'{"traceEvents": [{"ph": "X"',
                                  b'{"traceEvents": [1, 2]} trailing', b'{"traceEvents": [{"a": NaN}]}',
                                  b'{"traceEvents": [{"ph": "X", "name": "a\xff\xfe"}]}'])
def test_json_errors_are_one_line(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "broken.json"
    path.write_bytes(text)
    proc = _cli("trace", "import", str(path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"error: {path}: not valid JSON: ") and "right here" not in proc.stderr


# ---- item 18: trace calibrate at 80 columns ---------------------------------------------------------------------
def test_trace_calibrate_fits_80_columns_without_cutting(tmp_path: Path) -> None:
    folder = tmp_path / "a_directory_with_a_rather_long_name"
    folder.mkdir()
    path = write(folder / "llama3_70b_rank0.pt.trace.json", gpu_trace())
    proc = _cli("trace", "calibrate", str(path), "--system", "dgx-h100", env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in proc.stdout
    log_cells = [line.split("│")[1].strip() for line in lines if line.startswith("│") and line.count("│") == 7]
    assert "llama3_70b_rank0.pt.trace.json" in "".join(log_cells)  # the log table's path, folded whole
