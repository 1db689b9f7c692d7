"""`size --inference`: the cheapest result meets its SLOs in simulation, monotone in SLO and rate, memory pruning,
binding notes, determinism, the step-cost mirror and the CLI's JSON and errors."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from fabricsim.catalog import default_catalog
from fabricsim.cli import app
from fabricsim.comm.cluster import Cluster
from fabricsim.errors import SpecError
from fabricsim.inference.plan import InferencePlan
from fabricsim.inference.stepcost import step_cost
from fabricsim.model.presets import load_model
from fabricsim.sizing import InferenceSizingResult, InferenceSizingSpec, size_inference

BASE: dict[str, Any] = {"model": "llama3-70b", "rate_per_s": 10.0, "slo_ttft_s": 2.0, "slo_tpot_s": 0.05,
                        "systems": ("dgx-h100",), "duration_s": 60.0, "weights": ("bf16", "fp8")}


@lru_cache(maxsize=16)
def _run(**changes: Any) -> InferenceSizingResult:
    return size_inference(InferenceSizingSpec.build(**{**BASE, **changes}))


def _best(result: InferenceSizingResult) -> dict[str, Any]:
    assert result.best is not None, result.note
    return result.best


def test_cheapest_meets_both_slos_in_simulation() -> None:
    best = _best(_run())
    assert best["simulated"] and best["simulation"]["passed"]
    assert best["ttft_s_p90"] <= BASE["slo_ttft_s"]
    assert best["tpot_s_p90"] <= BASE["slo_tpot_s"]
    assert not best["simulation"]["overloaded"]
    assert best["gpus"] == best["replicas"] * best["gpus_per_replica"]
    assert best["usd_per_million_output_tokens"] > 0


def test_tighter_tpot_never_cheaper() -> None:
    loose = _best(_run())["usd_per_million_output_tokens"]
    tight = _best(_run(slo_tpot_s=0.03))["usd_per_million_output_tokens"]
    assert tight >= loose


def test_higher_rate_never_needs_fewer_gpus() -> None:
    assert _best(_run(rate_per_s=20.0))["gpus"] >= _best(_run())["gpus"]


def test_70b_bf16_on_80gb_never_tp1() -> None:
    result = _run(weights=("bf16",))
    assert all(e["plan"]["tp"] * e["plan"]["pp"] > 1 for e in result.results)
    assert not ((result.frame["tp"] * result.frame["pp"]) == 1).any()  # pruned by memory before timing
    assert result.pruned_reasons


def test_impossible_tpot_names_the_constraint() -> None:
    result = _run(slo_tpot_s=0.001)
    assert result.best is None and not result.results
    assert result.note is not None and result.note.startswith("no plan meets tpot 1ms: the fastest reaches")
    assert "dgx-h100" in result.note


def test_max_gpus_binds() -> None:
    result = _run(rate_per_s=50.0, max_gpus=4)
    assert result.best is None
    assert result.note is not None and "--max-gpus 4" in result.note


def test_deterministic_for_a_seed() -> None:
    a = size_inference(InferenceSizingSpec.build(**BASE)).to_json()
    b = size_inference(InferenceSizingSpec.build(**BASE)).to_json()
    for d in (a, b):
        d.pop("wall_s")
        d.pop("screen_wall_s")
    assert a == b


def test_progress_reports_screening_then_confirming() -> None:
    """The search tells its progress hook what it does: every system screened, then the plans it simulates."""
    heard: list[tuple[str, int, int]] = []
    size_inference(InferenceSizingSpec.build(**BASE), progress=lambda *e: heard.append(e))
    phases = [what for what, _, _ in heard]
    assert phases[0] == "screening" and "confirming" in phases
    assert phases.index("confirming") > max(i for i, p in enumerate(phases) if p == "screening")
    assert all(0 <= done <= total for _, done, total in heard)


def test_bad_inputs_are_spec_errors() -> None:
    with pytest.raises(SpecError, match="--rate"):
        InferenceSizingSpec.build(**{**BASE, "rate_per_s": -1.0})
    with pytest.raises(SpecError, match="--systems: unknown system"):
        size_inference(InferenceSizingSpec.build(**{**BASE, "systems": ("nope",)}))


def test_step_s_many_matches_step_s() -> None:
    catalog = default_catalog()
    cluster = Cluster(catalog.system("dgx-h100"), fabric="ndr", catalog=catalog)
    for model, plan in ((load_model("llama3-70b"), InferencePlan(tp=4, pp=2, weights="fp8")),
                        (load_model("mixtral-8x7b"), InferencePlan(tp=4, ep=2))):
        cost = step_cost(model, cluster, plan)
        cases = [(0, 0.0, 7, 7 * 3000), (2048, 2048 * 1024.5, 64, 64 * 2200), (1, 1.0, 0, 0), (3, 6.0, 2, 50),
                 (0, 0.0, 0, 0), (900_000, 1e9, 300_000, 10**8), (5000, 1e7, 256, 600_000)]
        got = cost.step_s_many(*(np.array([c[i] for c in cases], dtype=float) for i in range(4)))
        want = [cost.step_s(int(c[0]), float(c[1]), int(c[2]), int(c[3])) for c in cases]
        np.testing.assert_allclose(got, want, rtol=1e-12)


ARGS = ["size", "--inference", "--model", "llama3-70b", "--rate", "10", "--slo-ttft", "2s", "--slo-tpot", "50ms",
        "--systems", "dgx-h100", "--weights", "fp8", "--duration", "60s"]


def test_cli_json_fields(tmp_path: Any) -> None:
    out = tmp_path / "serve.parquet"
    res = CliRunner().invoke(app, [*ARGS, "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    for key in ("results", "best_by_system", "plans_evaluated", "plans_pruned", "wall_s", "inputs", "note"):
        assert key in data
    assert data["inputs"]["rate_per_s"] == 10.0 and data["inputs"]["slo_tpot_s"] == 0.05
    entry = data["results"][0]
    for key in ("system", "fabric", "plan", "gpus_per_replica", "replicas", "gpus", "max_batch", "ttft_s_p50",
                "ttft_s_p90", "ttft_s_p99", "tpot_s_p50", "tpot_s_p90", "tpot_s_p99", "goodput_rps",
                "usd_per_million_output_tokens", "cost_usd_per_hour", "energy", "bottleneck", "screen"):
        assert key in entry, key
    assert set(entry["plan"]) == {"tp", "pp", "ep", "weights", "kv"}
    assert out.exists()


def test_cli_table_and_errors() -> None:
    runner = CliRunner()
    res = runner.invoke(app, ARGS)
    assert res.exit_code == 0, res.output
    assert "cheapest per million output tokens" in res.stdout
    for bad, needle in ((["--slo-tpot", "1ms"], "no plan meets tpot"), (["--rate", "-5"], "--rate"),
                        (["--systems", "nope"], "unknown system")):
        args = list(ARGS)
        flag = bad[0]
        args[args.index(flag) + 1] = bad[1]
        res = runner.invoke(app, args)
        assert res.exit_code == 2
        assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1
        assert "Traceback" not in res.output
