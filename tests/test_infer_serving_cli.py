"""`fabricsim infer --rate/--trace`: the serving simulation wired to the inference model's step costs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricsim.cli import app

BASE = ["infer", "--model", "llama3-70b", "--system", "dgx-h100", "--tp", "8", "--batch", "32", "--prompt", "1024",
        "--output", "128"]


def _json(runner: CliRunner, *args: str) -> dict[str, object]:
    result = runner.invoke(app, [*BASE, *args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.output)
    return data


def test_rate_reports_percentiles_goodput_and_echoes_inputs(runner: CliRunner) -> None:
    data = _json(runner, "--rate", "4", "--duration", "60s", "--slo-ttft", "2s", "--slo-tpot", "50ms")
    for key in ("ttft_s_p50", "ttft_s_p90", "ttft_s_p99", "tpot_s_p50", "tpot_s_p90", "tpot_s_p99",
                "requests_completed", "goodput", "overloaded"):
        assert key in data
    assert data["requests_completed"] == data["requests_arrived"]
    assert data["overloaded"] is False
    assert data["ttft_s_p50"] <= data["ttft_s_p90"] <= data["ttft_s_p99"]  # type: ignore[operator]
    serving = data["serving_options"]  # type: ignore[index]
    assert serving["rate_per_s"] == 4.0 and serving["slo_tpot_s"] == pytest.approx(0.05)


def test_same_seed_same_result_other_seed_differs(runner: CliRunner) -> None:
    a = _json(runner, "--rate", "4", "--duration", "30s", "--seed", "1")
    b = _json(runner, "--rate", "4", "--duration", "30s", "--seed", "1")
    c = _json(runner, "--rate", "4", "--duration", "30s", "--seed", "2")
    assert a == b
    assert a["requests_arrived"] != c["requests_arrived"] or a["ttft_s_p50"] != c["ttft_s_p50"]


def test_past_saturation_the_report_says_overloaded(runner: CliRunner) -> None:
    result = runner.invoke(app, [*BASE, "--rate", "200", "--duration", "30s"])
    assert result.exit_code == 0, result.output
    assert "overloaded" in result.output
    data = _json(runner, "--rate", "200", "--duration", "30s")
    assert data["overloaded"] is True


def test_more_replicas_lower_the_tail(runner: CliRunner) -> None:
    one = _json(runner, "--rate", "30", "--duration", "30s")
    three = _json(runner, "--rate", "30", "--duration", "30s", "--replicas", "3")
    assert three["ttft_s_p99"] < one["ttft_s_p99"]  # type: ignore[operator]


def test_disaggregated_serving_runs_and_keeps_requests(runner: CliRunner) -> None:
    data = _json(runner, "--rate", "4", "--duration", "30s", "--disagg", "1:1")
    assert data["requests_completed"] == data["requests_arrived"]


def test_trace_file_is_served(runner: CliRunner, tmp_path: Path) -> None:
    trace = tmp_path / "requests.jsonl"
    trace.write_text("".join(json.dumps({"arrival_s": i * 0.5, "prompt_tokens": 512, "output_tokens": 64}) + "\n"
                             for i in range(20)))
    data = _json(runner, "--trace", str(trace))
    assert data["requests_arrived"] == 20 and data["requests_completed"] == 20


@pytest.mark.parametrize("args,field", [
    (["--rate", "-1"], "--rate"),
    (["--rate", "nan"], "--rate"),
    (["--rate", "1", "--duration", "0s"], "--duration"),
    (["--rate", "1", "--disagg", "2"], "--disagg"),
    (["--rate", "1", "--disagg", "0:1"], "--disagg"),
    (["--rate", "1", "--disagg", "1:1", "--replicas", "2"], "--disagg"),
    (["--rate", "1", "--slo-tpot", "fast"], "--slo-tpot"),
    (["--rate", "1", "--replicas", "0"], "--replicas"),
])
def test_bad_serving_options_are_one_line(runner: CliRunner, args: list[str], field: str) -> None:
    result = runner.invoke(app, [*BASE, *args])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in result.output


def test_a_batch_that_cannot_fit_is_a_one_line_error(runner: CliRunner) -> None:
    """The model fits but this batch's KV cache does not: a bad --batch, with the largest batch that fits."""
    result = runner.invoke(app, ["infer", "--model", "llama3-70b", "--tp", "8", "--batch", "100000000"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--batch" in lines[0] and "at most" in lines[0]
