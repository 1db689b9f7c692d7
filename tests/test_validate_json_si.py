"""`validate --json` is SI like every other command: no GB/s, microseconds or milliseconds in any case."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fabricsim.cli import app


def test_validate_json_cases_are_si(runner: CliRunner) -> None:
    result = runner.invoke(app, ["validate", "--group", "collective latency", "--json"])
    data = json.loads(result.output)
    assert data["inputs"]["group"] == "collective latency"
    assert data["cases"]
    for case in data["cases"]:
        assert not case["unit"].endswith(("GB/s", "us", "ms")), case
        assert "GBps" not in case["metric"]
        assert case["measured"] < 1.0  # seconds: latencies of microseconds
    bandwidth = json.loads(runner.invoke(app, ["validate", "--group", "collective bandwidth", "--json"]).output)
    assert all(c["measured"] > 1e9 for c in bandwidth["cases"] if c["unit"].endswith("bytes/s"))
