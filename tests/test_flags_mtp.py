"""Issue 21: `infer --draft-tokens` on a model with no MTP module is a one-line error naming what it needs."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fabricsim.cli import app


def test_draft_tokens_need_an_mtp_module(runner: CliRunner) -> None:
    result = runner.invoke(app, ["infer", "--model", "llama3-70b", "--tp", "8", "--draft-tokens", "2",
                                 "--acceptance", "2"])
    assert result.exit_code == 2, result.output
    assert "--draft-tokens" in result.output and "MTP" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    result = runner.invoke(app, ["infer", "--model", "deepseek-v3", "--system", "dgx-b200", "--tp", "8", "--ep", "2",
                                 "--weights", "fp4", "--batch", "1", "--prompt", "1024", "--output", "64",
                                 "--draft-tokens", "3", "--acceptance", "2.82", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["plan"]["draft_tokens"] == 3


def test_deepseek_preset_ships_one_mtp_module() -> None:
    from fabricsim.model import load_model

    assert load_model("deepseek-v3").mtp_modules == 1
    assert load_model("llama3-70b").mtp_modules == 0
