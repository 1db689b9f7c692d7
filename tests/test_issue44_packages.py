"""Issue 44 item 6, packages by job: ``bench`` split into ``nccltests`` (the row format), ``bench`` (live
torch.distributed runs), ``traces`` (no torch) and ``calibration``; same-prefix module groups became subpackages;
names that said the wrong thing were renamed; the ``fabricsim.workload`` shim is gone."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from collections import defaultdict
from importlib.resources import files
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "fabricsim"


def stems(package: str) -> set[str]:
    return {p.stem for p in (SRC / package).glob("*.py")}


def test_bench_holds_only_the_live_harness() -> None:
    assert stems("bench") == {"__init__", "_torch", "config", "errors", "faults", "harness", "launch", "memory",
                              "torchops"}


@pytest.mark.parametrize(("package", "names"), [
    ("nccltests", ("BenchRow", "BenchResult", "parse_nccl_tests_file", "format_nccl_tests", "TableStream")),
    ("traces", ("read_trace", "import_trace", "TraceSummary", "MAX_EVENTS")),
    ("calibration", ("calibrate", "load_results", "calibrate_trace", "check_bandwidths", "gemm_efficiency")),
])
def test_each_job_has_its_package_with_its_public_names(package: str, names: tuple[str, ...]) -> None:
    module = importlib.import_module(f"fabricsim.{package}")
    for name in names:
        assert name in module.__all__ and getattr(module, name) is not None


def torch_imports(package: str) -> list[str]:
    found = []
    for path in sorted((SRC / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}:{node.lineno}" for m in mods if m.split(".")[0] == "torch" or m.endswith("_torch")]
    return found


@pytest.mark.parametrize("package", ["nccltests", "traces", "calibration"])
def test_the_offline_packages_never_import_torch(package: str) -> None:
    assert not torch_imports(package)


def test_the_check_sees_torch_where_it_is() -> None:
    assert torch_imports("bench")


def test_the_kernel_patterns_ship_with_traces() -> None:
    assert files("fabricsim.traces").joinpath("data/kernels.yaml").is_file()
    from fabricsim.traces.classify import classify

    assert classify("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn") == "gemm"


def test_no_package_keeps_a_same_prefix_group_of_modules() -> None:
    """Three or more modules named ``prefix_*`` in one folder are a subpackage waiting to happen."""
    groups = []
    for folder in (p for p in SRC.rglob("*") if p.is_dir() and (p / "__init__.py").exists()):
        by_prefix: dict[str, list[str]] = defaultdict(list)
        for path in folder.glob("*.py"):
            if "_" in path.stem.strip("_"):
                by_prefix[path.stem.split("_")[0]].append(path.stem)
        groups += [f"{folder.relative_to(SRC)}: {sorted(v)}" for v in by_prefix.values() if len(v) >= 3]
    assert not groups


@pytest.mark.parametrize(("old", "new"), [
    ("fabricsim.report.html_page", "fabricsim.report.html.page"),
    ("fabricsim.model.hf_config", "fabricsim.model.hf.config"),
    ("fabricsim.sizing.inference_search", "fabricsim.sizing.inference.search"),
    ("fabricsim.validation.errors", "fabricsim.validation.error_model"),
    ("fabricsim.comm.price", "fabricsim.comm.timing"),
    ("fabricsim.sizing.engine", "fabricsim.sizing.executor"),
    ("fabricsim.serving.engine", "fabricsim.serving.discrete_event"),
    ("fabricsim.bench.trace_summary", "fabricsim.traces.summary"),
    ("fabricsim.workload", "fabricsim.training"),
])
def test_moved_modules_live_only_at_their_new_name(old: str, new: str) -> None:
    assert importlib.util.find_spec(new) is not None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_sizing_search_calls_its_executor_an_executor() -> None:
    """``engine`` names the serving engine only; the training search's keyword is ``executor``."""
    from fabricsim.sizing import size

    params = inspect.signature(size).parameters
    assert "executor" in params and "engine" not in params
