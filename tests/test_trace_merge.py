"""Issue 48 item 3: one file per rank merged. The ranks are aligned by step number, each step's slowest rank and
spread found, the stragglers named (exactly the injected ones, with their phase), steps missing from some ranks
reported; a single file keeps `trace import`'s own output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.api import trace_merge
from fabricsim.api.specs.trace import STRAGGLER_THRESHOLD
from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.traces import merge_traces, trace_files
from test_trace_import import gpu_trace

US = 1e-6
COMPUTE_US, EXPOSED_US, IDLE_US, OVERLAP_US = 600.0, 100.0, 100.0, 150.0
"""a healthy rank's step: compute, then the all_reduce overlapping its last 150 us and running 100 us past it"""


def _x(name: str, cat: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def rank_trace(rank: int | None, steps: list[int], compute_us: float = COMPUTE_US, exposed_us: float = EXPOSED_US,
               world: int = 8) -> dict[str, Any]:
    """One rank's Kineto trace: for each step number, a GPU ProfilerStep mark, a GEMM of ``compute_us``, an
    all_reduce overlapping its last 150 us and ``exposed_us`` beyond it, then 100 us idle. ``rank`` None: no
    distributedInfo rank."""
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}]
    t = 1_000_000.0
    for n in steps:
        step = compute_us + exposed_us + IDLE_US
        events += [
            _x(f"ProfilerStep#{n}", "gpu_user_annotation", t, step),
            _x("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "kernel", t, compute_us,
               device=0, stream=7),
            _x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel",
               t + compute_us - OVERLAP_US, OVERLAP_US + exposed_us, device=0, stream=20,
               **{"Collective name": "allreduce", "In msg nelems": 2**20, "Out msg nelems": 2**20,
                  "Group size": world, "dtype": "BFloat16"}),
        ]
        t += step + 50.0  # a gap between steps: not part of any step
    info: dict[str, Any] = {"backend": "nccl", "world_size": world}
    if rank is not None:
        info["rank"] = rank
    return {"schemaVersion": 1, "distributedInfo": info, "traceEvents": events}


def write_ranks(folder: Path, ranks: int, steps: int, slow: dict[int, tuple[str, float]] | None = None,
                missing: dict[int, list[int]] | None = None, named: bool = True) -> list[Path]:
    """``ranks`` rank files (rank<N>.json) of ``steps`` steps; ``slow``: rank -> (phase, fraction) makes that rank's
    step that much longer through its compute or its exposed communication; ``missing``: rank -> steps it lacks."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(ranks):
        compute, exposed = COMPUTE_US, EXPOSED_US
        phase, fraction = (slow or {}).get(r, ("", 0.0))
        extra = fraction * (COMPUTE_US + EXPOSED_US + IDLE_US)
        if phase == "compute":
            compute += extra
        elif phase:
            exposed += extra
        numbers = [n for n in range(1, steps + 1) if n not in (missing or {}).get(r, [])]
        path = folder / f"rank{r}.json"
        path.write_text(json.dumps(rank_trace(r if named else None, numbers, compute, exposed, world=ranks)))
        paths.append(path)
    return paths


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slow=st.dictionaries(st.integers(0, 15), st.tuples(st.sampled_from(["compute", "exposed communication"]),
                                                          st.floats(0.01, 0.6)), max_size=4),
       healthy=st.dictionaries(st.integers(0, 15), st.tuples(st.sampled_from(["compute", "exposed communication"]),
                                                             st.floats(0.0, 0.9)), max_size=3),
       threshold=st.sampled_from([0.02, STRAGGLER_THRESHOLD, 0.1]))
def test_the_injected_stragglers_are_named_and_no_others(tmp_path_factory: pytest.TempPathFactory,
                                                         slow: dict[int, tuple[str, float]],
                                                         healthy: dict[int, tuple[str, float]],
                                                         threshold: float) -> None:
    """Each injected straggler is slower than the threshold by a margin; up to three other ranks are slower too,
    by at most 90% of the threshold, and the rest are the median exactly (16 ranks: the median stays theirs)."""
    folder = tmp_path_factory.mktemp("ranks")
    injected = {r: (phase, threshold + margin) for r, (phase, margin) in slow.items()}
    near = {r: (phase, threshold * share) for r, (phase, share) in healthy.items() if r not in injected}
    write_ranks(folder, 16, 4, {**near, **injected})
    merged = merge_traces([folder], straggler_threshold=threshold, workers=1)
    assert {s.rank for s in merged.stragglers} == set(injected)
    for s in merged.stragglers:
        phase, fraction = injected[s.rank]
        assert s.phase == phase
        assert s.slower_by == pytest.approx(fraction, rel=1e-6)
    assert merged.median_step_s == pytest.approx((COMPUTE_US + EXPOSED_US + IDLE_US) * US)
    for step in merged.steps:
        assert step.ranks == 16 and not step.missing_ranks
        if injected:
            worst = max(injected, key=lambda r: (injected[r][1], -r))
            assert step.max_s == pytest.approx((1 + injected[worst][1]) * (COMPUTE_US + EXPOSED_US + IDLE_US) * US)


def test_a_rank_just_under_the_threshold_is_not_a_straggler(tmp_path: Path) -> None:
    write_ranks(tmp_path, 5, 3, {1: ("compute", STRAGGLER_THRESHOLD * 0.9), 3: ("compute", STRAGGLER_THRESHOLD * 1.1)})
    merged = merge_traces([tmp_path], straggler_threshold=STRAGGLER_THRESHOLD, workers=1)
    assert [s.rank for s in merged.stragglers] == [3]


def test_per_rank_figures_are_the_single_file_summary(tmp_path: Path) -> None:
    """A rank's medians are what `trace import` of its own file reports per step (compute, exposed communication)."""
    from fabricsim.traces import import_trace

    paths = write_ranks(tmp_path, 3, 4, {2: ("exposed communication", 0.3)})
    merged = merge_traces(paths, straggler_threshold=STRAGGLER_THRESHOLD, workers=1)
    for stat, path in zip(merged.ranks, paths, strict=True):
        device = import_trace(path).device()
        assert stat.median_step_s == pytest.approx(device.step_time_s)
        assert stat.median_compute_s == pytest.approx(device.compute_s)
        assert stat.median_exposed_comm_s == pytest.approx(device.exposed_comm_s)
    assert merged.stragglers[0].phase == "exposed communication"


def test_steps_are_aligned_by_number_and_missing_ones_reported(tmp_path: Path) -> None:
    write_ranks(tmp_path, 4, 5, {1: ("compute", 0.5)}, missing={0: [2], 3: [2, 5]})
    merged = merge_traces([tmp_path], straggler_threshold=STRAGGLER_THRESHOLD, workers=1)
    by_step = {s.step: s for s in merged.steps}
    assert sorted(by_step) == [1, 2, 3, 4, 5]
    assert by_step[2].missing_ranks == (0, 3) and by_step[2].ranks == 2
    assert by_step[5].missing_ranks == (3,)
    assert by_step[1].slowest_rank == 1 and by_step[1].spread == pytest.approx(by_step[1].max_s / by_step[1].median_s)
    assert merged.missing_steps == 2
    assert [r.steps for r in merged.ranks] == [4, 5, 5, 3]
    assert any("missing from some ranks" in w for w in merged.warnings)


def test_rank_rules_distributed_info_then_file_name_then_order(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "worker.json").write_text(json.dumps(rank_trace(7, [1, 2])))  # distributedInfo wins
    (tmp_path / "a" / "trace_3.json").write_text(json.dumps(rank_trace(None, [1, 2])))  # the name's number
    merged = merge_traces([tmp_path / "a"], straggler_threshold=STRAGGLER_THRESHOLD, workers=1)
    assert [(r.rank, r.rank_rule) for r in merged.ranks] == [(3, "file name"), (7, "distributedInfo.rank")]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.json").write_text(json.dumps(rank_trace(None, [1])))
    (tmp_path / "b" / "y.json").write_text(json.dumps(rank_trace(None, [1])))
    merged = merge_traces([tmp_path / "b"], straggler_threshold=STRAGGLER_THRESHOLD, workers=1)
    assert [(r.rank, r.rank_rule, Path(r.source).name) for r in merged.ranks] == [
        (0, "file order", "x.json"), (1, "file order", "y.json")]
    (tmp_path / "b" / "z.json").write_text(json.dumps(rank_trace(1, [1])))
    with pytest.raises(SpecError, match="two files are rank 1"):
        merge_traces([tmp_path / "b"], straggler_threshold=STRAGGLER_THRESHOLD, workers=1)


def test_files_directories_and_globs_in_natural_order(tmp_path: Path) -> None:
    paths = write_ranks(tmp_path, 12, 1)
    assert trace_files([tmp_path]) == paths
    assert trace_files([str(tmp_path / "rank1*.json")]) == [paths[1], paths[10], paths[11]]
    assert trace_files([paths[3], paths[3], paths[2]]) == [paths[2], paths[3]]
    with pytest.raises(SpecError, match="no trace file matches"):
        trace_files([str(tmp_path / "nope*.json")])


def test_the_process_pool_gives_the_same_result(tmp_path: Path) -> None:
    write_ranks(tmp_path, 6, 3, {4: ("compute", 0.2)}, missing={5: [1]})
    serial = merge_traces([tmp_path], straggler_threshold=STRAGGLER_THRESHOLD, workers=1)
    pooled = merge_traces([tmp_path], straggler_threshold=STRAGGLER_THRESHOLD, workers=2)
    assert serial.to_json() == pooled.to_json()


def test_cli_merges_several_files_and_keeps_one_file_as_before(tmp_path: Path) -> None:
    write_ranks(tmp_path / "ranks", 4, 3, {2: ("compute", 0.2)})
    runner = CliRunner()
    result = runner.invoke(app, ["trace", "import", str(tmp_path / "ranks"), "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [s["rank"] for s in doc["stragglers"]] == [2] and doc["stragglers"][0]["phase"] == "compute"
    assert doc["inputs"]["straggler_threshold"] == STRAGGLER_THRESHOLD and len(doc["ranks"]) == 4
    api = trace_merge(tmp_path / "ranks", workers=1).to_dict()
    assert {k: v for k, v in api.items() if k != "inputs"} == {k: v for k, v in doc.items() if k != "inputs"}
    table = runner.invoke(app, ["trace", "import", str(tmp_path / "ranks" / "rank*.json"), "--workers", "1"])
    assert table.exit_code == 0 and "stragglers" in table.output and "compute" in table.output
    refused = runner.invoke(app, ["trace", "import", str(tmp_path / "ranks"), "--model", "llama3-8b"])
    assert refused.exit_code == 2 and "--model" in refused.output
    # one file: today's document, its inputs with "file" and no merge options
    one = tmp_path / "run.json"
    one.write_text(json.dumps(gpu_trace()))
    single = json.loads(runner.invoke(app, ["trace", "import", str(one), "--json"]).stdout)
    assert list(single["inputs"])[:2] == ["file", "model"] and single["inputs"]["file"] == str(one)
    assert "straggler_threshold" not in single["inputs"] and "workers" not in single["inputs"]
    assert set(single) == {"inputs", "summary", "device", "gemm_efficiency", "gemm_note", "comparison"}
