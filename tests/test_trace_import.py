"""Issue 28 part 2: profiler traces (Kineto JSON, .json.gz, Nsight Systems SQLite) read by streaming, summarised per
step (busy time by class, overlap and exposed communication, collectives by op and size), compared with the model
and used for calibration with the checks nccl-tests logs get; `compare` refuses foreign logs as calibrate does."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fabricsim.calibration import calibrate_trace
from fabricsim.catalog import default_catalog
from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.traces import import_trace, read_trace
from fabricsim.traces.classify import classify, collective_op
from fabricsim.traces.intervals import clip, coverage, union

DATA = Path(__file__).resolve().parent / "data"
US = 1e-6
H100 = "NVIDIA H100 80GB HBM3"


def _x(name: str, cat: str, ts: float, dur: float, pid: int = 0, tid: int = 7, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def gpu_trace(allreduce_nelems: int = 2**20) -> dict[str, Any]:
    """Two 1000 us steps on GPU 0: GEMM [0, 300], attention [300, 500], element-wise [500, 600] on stream 7; an
    all_reduce [400, 700] carrying its own arguments and an all_gather [800, 900] linked to record_param_comms by
    External id on stream 20; a copy [900, 950]. Per step: compute 600, communication 400, overlap 200, exposed
    200, idle 150 us."""
    t0 = 5_000_000.0
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}]
    for step in range(2):
        b = t0 + 1000 * step
        events += [
            _x(f"ProfilerStep#{step + 5}", "gpu_user_annotation", b, 1000),
            _x(f"ProfilerStep#{step + 5}", "user_annotation", b - 50, 990, pid=1, tid=1),
            _x("aten::mm", "cpu_op", b - 40, 5, pid=1, tid=1, **{
                "External id": 100 + step, "Input Dims": [[4096, 4096], [4096, 4096]],
                "Input type": ["c10::BFloat16", "c10::BFloat16"]}),
            _x("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "kernel", b, 300,
               **{"External id": 100 + step, "device": 0, "stream": 7}),
            _x("flash_fwd_kernel", "kernel", b + 300, 200, **{"device": 0, "stream": 7}),
            _x("void at::native::vectorized_elementwise_kernel<4>", "kernel", b + 500, 100,
               **{"device": 0, "stream": 7}),
            _x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", b + 400, 300,
               tid=20, **{"device": 0, "stream": 20, "Collective name": "allreduce", "In msg nelems": allreduce_nelems,
                          "Out msg nelems": allreduce_nelems, "Group size": 8, "dtype": "BFloat16"}),
            _x("record_param_comms", "cpu_op", b - 30, 10, pid=1, tid=1, **{
                "External id": 200 + step, "Collective name": "_allgather_base", "In msg nelems": 2**18,
                "Out msg nelems": 2**21, "Group size": 8, "dtype": "BFloat16"}),
            _x("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", b + 800, 100,
               tid=20, **{"device": 0, "stream": 20, "External id": 200 + step}),
            _x("Memcpy DtoD (Device -> Device)", "gpu_memcpy", b + 900, 50, **{"device": 0, "stream": 7}),
            {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": b, "s": "t"},
        ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": H100}],
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8}, "traceEvents": events,
            "host_name": "node0"}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


def check_known_step(summary: Any) -> None:
    dev = summary.device()
    assert dev.steps == 2 and dev.step_source == "ProfilerStep (GPU)"
    assert dev.step_time_s == pytest.approx(1000 * US)
    assert dev.compute_s == pytest.approx(600 * US)
    assert dev.communication_s == pytest.approx(400 * US)
    assert dev.overlap_s == pytest.approx(200 * US)
    assert dev.exposed_comm_s == pytest.approx(200 * US)
    assert dev.idle_s == pytest.approx(150 * US)
    busy = {c.kind: c.busy_s for c in dev.classes}
    assert busy == pytest.approx({"gemm": 300 * US, "attention": 200 * US, "elementwise": 100 * US,
                                  "memory": 50 * US, "communication": 200 * US})
    assert sum(busy.values()) + dev.idle_s == pytest.approx(dev.step_time_s)


def test_synthetic_gpu_trace_round_trips(tmp_path: Path) -> None:
    summary = import_trace(write(tmp_path / "t.json", gpu_trace()))
    check_known_step(summary)
    dev = summary.device(0)
    assert dev.name == H100 and summary.backend == "nccl" and summary.world_size == 8
    calls = {(c.op, c.size_bytes, c.nranks, c.count): c.mean_time_s for c in dev.collectives}
    assert calls == pytest.approx({("all_reduce", 2 * 2**20, 8, 1): 300 * US,  # per-rank buffer
                                   ("all_gather", 4 * 2**20, 8, 1): 100 * US})  # gathered output (nccl-tests)
    assert dev.gemm is not None and dev.gemm.flops == pytest.approx(2 * 4096**3)
    assert dev.gemm.achieved_flops_per_s == pytest.approx(2 * 4096**3 / 300e-6)
    assert json.loads(json.dumps(summary.to_json()))["devices"][0]["exposed_comm_s"] == pytest.approx(200 * US)


def test_gzip_trace_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(gpu_trace(), f)
    check_known_step(import_trace(path))


def nsys_file(path: Path) -> Path:
    """The same two steps as an Nsight Systems SQLite export (ns; names through StringIds)."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
            globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, bytes INTEGER);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER, text TEXT,
            textId INTEGER, globalTid INTEGER);
        CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT);
    """)
    names = ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "flash_fwd_kernel", "vectorized_elementwise_kernel",
             "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
             "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "ProfilerStep#2"]
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(names)))
    t0 = 10**12
    for step in range(2):
        b = t0 + 1_000_000 * step
        rows = [(0, 0, 300, 7), (1, 300, 500, 7), (2, 500, 600, 7), (3, 400, 700, 20), (4, 800, 900, 20)]
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, ?, ?, 1, ?, ?, NULL)",
                        [(b + s * 1000, b + e * 1000, stream, i, n, n) for i, (n, s, e, stream) in enumerate(rows)])
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 7, 4096)", (b + 900_000, b + 950_000))
        text = (f"ProfilerStep#{step + 1}", None) if step == 0 else (None, 5)  # inline text, or an id
        con.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, ?, 1)", (b, b + 1_000_000, *text))
    con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, ?)", (H100,))
    con.commit()
    con.close()
    return path


def test_synthetic_nsight_export_round_trips(tmp_path: Path) -> None:
    summary = import_trace(nsys_file(tmp_path / "t.sqlite"))
    assert summary.format == "nsys"
    dev = summary.device()
    assert dev.name == H100
    assert dev.steps == 2 and dev.step_source == "ProfilerStep (CPU)"
    assert dev.step_time_s == pytest.approx(1000 * US)
    for field, us in (("compute_s", 600), ("communication_s", 400), ("overlap_s", 200), ("exposed_comm_s", 200),
                      ("idle_s", 150)):
        assert getattr(dev, field) == pytest.approx(us * US), field
    assert {c.op for c in dev.collectives} == {"all_reduce", "all_gather"}
    assert all(c.size_bytes == 0 for c in dev.collectives)  # nsys has no sizes: named by their kernels only


def test_kernel_names_classify_from_the_data_file() -> None:
    assert classify("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64") == "gemm"
    assert classify("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT") == "gemm"
    assert classify("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>") \
        == "gemm"
    assert classify("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x3_tn") == "gemm"
    assert classify("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>") == "attention"
    assert classify("fmha_cutlassF_bf16_aligned_64x64_rf_sm80") == "attention"
    assert classify("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3") == "attention"
    assert classify("ncclKernel_AllGather_RING_LL_Sum_int8_t") == "communication"
    assert classify("gloo:all_reduce") == "communication"
    assert classify("aten::addmm") == "gemm" and classify("aten::add_") == "elementwise"
    assert classify("record_param_comms") == "launch" and classify("c10d::allreduce_") == "launch"
    assert collective_op("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL") == "reduce_scatter"
    assert collective_op("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t") == "send_recv"
    assert collective_op("_reduce_scatter_base") == "reduce_scatter"
    assert collective_op("ncclDevKernel_Reduce_Sum_f32_RING_LL") == "reduce"


def test_interval_sweep() -> None:
    import numpy as np

    s, e = union(np.array([5.0, 0.0, 1.0, 10.0]), np.array([6.0, 2.0, 3.0, 11.0]))
    assert s.tolist() == [0.0, 5.0, 10.0] and e.tolist() == [3.0, 6.0, 11.0]
    cov = coverage({"a": (np.array([0.0]), np.array([4.0])), "b": (np.array([2.0, 3.0]), np.array([6.0, 5.0]))})
    assert cov.length(cov.covered["a"] & cov.covered["b"]) == 2.0
    assert cov.length(cov.covered["b"] & ~cov.covered["a"]) == 2.0
    assert clip(np.array([-1.0, 2.5]), np.array([12.0, 5.5]), (s, e)).tolist() == [5.0, 1.0]


def test_reader_streams_with_bounded_memory(tmp_path: Path) -> None:
    """A 20k-kernel trace (Kineto's kernel fields, 7 MB of JSON) is read with a peak of Python allocations well
    under the file: the reader never holds the parsed document (no json.load), only about 50 bytes an event."""
    path = tmp_path / "big.json"
    with open(path, "w") as f:
        f.write('{"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": [')
        for i in range(20_000):
            f.write(("," if i else "") + json.dumps(_x(f"kernel_{i % 50}", "kernel", 10.0 * i, 5.0, **{
                "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": i, "External id": i,
                "registers per thread": 32, "shared memory": 0, "blocks per SM": 0.5, "warps per SM": 2.0,
                "grid": [66, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 3})))
        f.write("]}")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        events = read_trace(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(events.kernels) == 20_000
    assert peak < size / 3 and peak < 100 * 20_000, (peak, size)  # ~90 bytes an event
    with pytest.raises(SpecError, match="more than 1,000 kernels"):
        read_trace(path, max_events=1000)


def test_unrecognised_files_are_refused(tmp_path: Path) -> None:
    log = DATA / "nccl-tests" / "h100-2node-16gpu-all_reduce.log"
    with pytest.raises(SpecError, match="not a trace"):
        read_trace(log)
    with pytest.raises(SpecError, match="no traceEvents"):
        read_trace(write(tmp_path / "x.json", {"something": 1}))
    with pytest.raises(SpecError, match="trace not found"):
        read_trace(tmp_path / "missing.json")
    empty = tmp_path / "e.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE x (a)").connection.commit()
    with pytest.raises(SpecError, match="not an Nsight Systems export"):
        read_trace(empty)


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real torch CPU profile: matmuls and a gloo all_reduce in a world of one, two annotated steps."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function

    path = tmp_path_factory.mktemp("cpu") / "cpu_trace.json"
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        a = torch.randn(128, 128)
        lin = torch.nn.Linear(128, 128)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for step in range(2):
                with record_function(f"ProfilerStep#{step}"):
                    c = lin(a @ a)
                    dist.all_reduce(c)
        prof.export_chrome_trace(str(path))
    finally:
        dist.destroy_process_group()
    return path


def test_torch_cpu_profile_imports(cpu_trace: Path) -> None:
    summary = import_trace(cpu_trace)
    dev = summary.device()
    assert dev.kind == "cpu" and summary.backend == "gloo" and dev.step_source == "ProfilerStep (CPU)"
    busy = {c.kind: c.busy_s for c in dev.classes}
    assert busy["gemm"] > 0 and dev.compute_s > 0
    # issue 43: a GEMM rate is measured on GPU kernels, never on CPU operators' times; the summary says why
    assert dev.gemm is None and dev.gemm_note is not None and "no GPU kernels" in dev.gemm_note
    assert any(c.op == "all_reduce" and c.size_bytes == 128 * 128 * 4 for c in dev.collectives)


def test_trace_calibrate_refuses_cpu_and_impossible_traces(cpu_trace: Path, tmp_path: Path) -> None:
    cat = default_catalog()
    with pytest.raises(SpecError, match=r"a CPU run \(backend gloo\) cannot belong to dgx-h100"):
        calibrate_trace(import_trace(cpu_trace), "dgx-h100", cat)
    fast = import_trace(write(tmp_path / "fast.json", gpu_trace(allreduce_nelems=2**29)))  # 1 GiB in 300 us
    with pytest.raises(SpecError, match=r"bus bandwidth of \d+\.\d GB/s, above the 788 GB/s .* cannot belong"):
        calibrate_trace(fast, "dgx-h100", cat)
    with pytest.raises(SpecError, match="devices 'NVIDIA H100 80GB HBM3' cannot belong to dgx-a100"):
        calibrate_trace(import_trace(write(tmp_path / "ok.json", gpu_trace())), "dgx-a100", cat)
    result, warnings = calibrate_trace(import_trace(tmp_path / "ok.json"), "dgx-h100", cat)
    assert {(r.op, r.size_bytes) for r in result.rows} == {("all_reduce", 2 * 2**20), ("all_gather", 4 * 2**20)}
    assert any("share the GPU with compute" in w for w in warnings)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricsim", *args], capture_output=True, text=True, check=False,
                          timeout=120)


def test_cli_trace_calibrate_one_line_refusal(tmp_path: Path) -> None:
    fast = write(tmp_path / "fast.json", gpu_trace(allreduce_nelems=2**29))
    proc = _cli("trace", "calibrate", str(fast), "--system", "dgx-h100")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "cannot belong to dgx-h100" in proc.stderr
    ok = write(tmp_path / "ok.json", gpu_trace())
    done = CliRunner().invoke(app, ["trace", "calibrate", str(ok), "--system", "dgx-h100", "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["gemm_efficiency"]["fraction"] == pytest.approx(2 * 4096**3 / 300e-6 / 989.4e12, rel=1e-3)
    assert data["gemm_efficiency"]["written"] is False


def test_cli_trace_import_json_and_plan(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", gpu_trace())
    runner = CliRunner()
    out = runner.invoke(app, ["trace", "import", str(path), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["inputs"]["file"] == str(path) and data["comparison"] is None
    assert data["summary"]["devices"][0]["overlap_s"] == pytest.approx(200 * US)
    assert data["gemm_efficiency"]["gpu"] == "h100-sxm"
    plan = ["trace", "import", str(path), "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "8", "--tp", "8",
            "--seq", "2048", "--gbs", "8"]
    table = runner.invoke(app, plan)
    assert table.exit_code == 0, table.output
    assert "kernel time by class" in table.output and "measured (device 0) vs predicted" in table.output
    rows = {r["quantity"]: r for r in json.loads(runner.invoke(app, [*plan, "--json"]).output)["comparison"]}
    assert rows["exposed communication"]["measured_s"] == pytest.approx(200 * US)
    assert rows["step time"]["predicted_s"] > 0
    assert any(q.startswith("all_reduce 2M on 8") for q in rows)
    bad = _cli("trace", "import", str(DATA / "nccl-tests" / "h100-2node-16gpu-all_reduce.log"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1


def test_compare_refuses_logs_that_cannot_belong_to_the_system(tmp_path: Path) -> None:
    """`compare` applies calibrate's checks: an H100 log against dgx-a100, a CPU gloo result against dgx-h100."""
    from fabricsim.nccltests import BenchResult, BenchRow, DeviceInfo

    devices = [DeviceInfo(rank=r, host="vm", device=-1, bus_id="cpu", name="x86_64") for r in range(2)]
    row = BenchRow(op="all_reduce", size_bytes=1024, count=256, dtype="float32", in_place=False, time_s=1e-4,
                   algbw_GBps=0.01, busbw_GBps=0.01)
    gloo = tmp_path / "gloo.json"
    gloo.write_text(BenchResult(tool="fabricsim", op="all_reduce", backend="gloo", world_size=2, hosts=["vm"],
                                devices=devices, rows=[row]).model_dump_json())
    h100 = DATA / "nccl-tests" / "h100-2node-16gpu-all_reduce.log"
    for log, system in ((h100, "dgx-a100"), (gloo, "dgx-h100")):
        proc = _cli("compare", str(log), "--system", system)
        assert proc.returncode == 2, proc.stdout
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and "cannot belong" in proc.stderr
    assert _cli("compare", str(h100), "--system", "dgx-h100", "--json").returncode == 0


def test_trace_import_refuses_to_compare_with_another_system(tmp_path: Path) -> None:
    """The comparison checks the trace can belong to --system, as calibrate and compare do: an H100 trace is not
    compared with an A100 system's prediction."""
    path = write(tmp_path / "h100.json", gpu_trace())
    out = _cli("trace", "import", str(path), "--model", "llama3-8b", "--system", "dgx-a100", "--gpus", "8", "--tp",
               "8", "--gbs", "8")
    assert out.returncode == 2
    assert out.stderr.startswith("error:") and "cannot belong to dgx-a100" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
