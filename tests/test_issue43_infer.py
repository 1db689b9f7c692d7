"""Issue 43 (a newcomer's first hour, round three), the `infer` and `size --inference` items: every printed figure
inside its printed band (4), the max context bounded by the model's window (7), engine releases parsed strictly
(15), errors naming the option the user gave (16), launch and tie lines that say why (18)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from fabricsim import units
from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.inference import engine_profile

INFER = ["infer", "--model", "llama3-70b", "--tp", "8"]


def _run(args: list[str]) -> str:
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    return " ".join(out.output.split())  # rich may wrap a long line at a space: one line of words


def _number(text: str) -> float:
    """A printed duration ('18.13ms', '9.361s') in seconds, or a printed rate ('1,154') as a number."""
    text = text.replace(",", "")
    return float(text) if re.fullmatch(r"[\d.]+", text) else units.parse_duration(text)


STATIC = re.compile(r"(?P<fig>[\d.,]+[a-zµ]*) \((?P<low>[\d.,]+[a-zµ]*)-(?P<high>[\d.,]+[a-zµ]*), 80% band")
SERVED = re.compile(r"p50 (?P<fig>[\d.,]+[a-zµ]*), p90 \S+, p99 \S+ \(p50 (?P<low>[\d.,]+[a-zµ]*)-"
                    r"(?P<high>[\d.,]+[a-zµ]*), 80% band")


@pytest.mark.parametrize("args", [
    [*INFER, "--batch", "32", "--engine", "vllm@0.6"],  # the issue's: TPOT 18.13ms printed beside 18.67-43.35ms
    [*INFER, "--batch", "32"],
    [*INFER, "--batch", "8", "--engine", "vllm"],
    [*INFER, "--engine", "sglang", "--batch", "16"],
    [*INFER, "--batch", "4", "--rate", "2", "--duration", "60s"],
    [*INFER, "--engine", "vllm", "--rate", "2", "--duration", "60s"],
])
def test_every_printed_figure_lies_inside_its_printed_band(args: list[str]) -> None:
    text = _run(args)
    served = "--rate" in args
    pattern = SERVED if served else STATIC
    found = list(pattern.finditer(text))
    no_band = text.count("no comparable published measurement")
    assert found or no_band, text  # each config prints bands, or says why there are none
    if "sglang" not in args:
        assert found, text
    for m in found:
        fig, low, high = (_number(m[k]) for k in ("fig", "low", "high"))
        assert low <= fig <= high, m.group(0)
    if served:  # the served bands' figures: their static bands too
        for m in STATIC.finditer(text):
            assert _number(m["low"]) <= _number(m["fig"]) <= _number(m["high"]), m.group(0)


def test_the_printed_figure_is_the_json_estimate_and_the_raw_figure_is_named() -> None:
    """The printed TPOT is the model's figure where its band holds it, else the JSON estimate with the raw figure
    named (since issue 45 the out-of-sample bands are wide enough to hold this case's raw figure; the estimate path
    itself is pinned on a band that excludes the raw figure in tests/test_issue43_bands.py)."""
    args = [*INFER, "--batch", "32", "--engine", "vllm@0.6"]
    text = _run(args)
    data = json.loads(_run([*args, "--json"]))
    band, raw = data["tpot_s_band"], data["tpot_s"]
    inside = band["low"] <= raw <= band["high"]
    shown = f"TPOT {units.format_duration(raw if inside else band['estimate'])} ("
    assert shown in text
    assert (f"model's raw figure {units.format_duration(raw)}" in text) is not inside


def test_max_context_is_the_smaller_of_memory_and_the_models_window() -> None:
    text = _run(INFER)
    assert "max context at batch 1: 131,072 (model window; memory holds " in text
    data = json.loads(_run([*INFER, "--json"]))
    assert data["max_context"] == data["context_window"] == 131072
    assert data["max_context_memory"] > 131072 and data["max_context_limit"] == "window"
    big = json.loads(_run([*INFER, "--batch", "32", "--json"]))  # memory binds first
    assert big["max_context"] == big["max_context_memory"] < 131072 and big["max_context_limit"] == "memory"
    assert f"max context at batch 32: {big['max_context']:,} (memory; model window 131,072)" in _run(
        [*INFER, "--batch", "32"])


@pytest.mark.parametrize("engine", ["vllm@", "vllm@ 0.6", "vllm@99", "vllm@0.12", "trtllm@1.1", "sglang@0.6"])
def test_engine_specs_that_name_no_profiled_release_are_refused(engine: str) -> None:
    out = CliRunner().invoke(app, [*INFER, "--engine", engine])
    assert out.exit_code == 2, out.output
    assert "--engine" in out.output and "0.11" in out.output  # names the option and the known releases
    assert "Traceback" not in out.output


def test_engine_releases_inside_a_profiled_series_resolve_and_print_as_given() -> None:
    assert engine_profile("vllm@0.11.2").settings == engine_profile("vllm@0.11").settings
    assert engine_profile("trtllm@1").settings == engine_profile("trtllm@1.0").settings  # 1 is 1.0, not 0.19
    assert engine_profile("vllm@0.7").settings == engine_profile("vllm@0.6").settings
    with pytest.raises(SpecError, match="newer than"):
        engine_profile("vllm@99")
    text = _run([*INFER, "--engine", "trtllm@1"])
    assert "launch (trtllm@1): trtllm-serve" in text  # the 1.0 release's launch command


def test_decode_pool_errors_name_the_decode_option() -> None:
    out = CliRunner().invoke(app, [*INFER, "--rate", "2", "--disagg", "1:1", "--decode-tp", "3"])
    assert out.exit_code == 2
    assert "error: --decode-tp:" in out.output and "tp (3)" in out.output


def test_prefix_shares_error_quotes_the_values_given() -> None:
    out = CliRunner().invoke(app, [*INFER, "--prefix-hit", "0.7", "--prefix-host", "0.7"])
    assert out.exit_code == 2
    line = " ".join(out.output.split())
    assert "--prefix-hit 0.7 + --prefix-host 0.7 = 1.4" in line and "at most 1" in line
    assert CliRunner().invoke(app, [*INFER, "--prefix-hit", "0.7", "--prefix-host", "0.3"]).exit_code == 0


def test_disagg_without_pool_commands_says_why_and_which_releases_have_them() -> None:
    text = _run([*INFER, "--rate", "2", "--duration", "30s", "--disagg", "1:1"])
    assert "no disaggregated launch settings" in text and "releases with them: vllm@" in text


def test_size_inference_marks_every_confirmed_plan_as_cheap_as_the_best_a_tie() -> None:
    args = ["size", "--inference", "--model", "llama3-8b", "--rate", "5", "--slo-ttft", "2s", "--slo-tpot", "50ms",
            "--engine", "sglang", "--systems", "dgx-h100"]
    data = json.loads(_run([*args, "--json"]))
    rows = data["results"]
    best = rows[0]["usd_per_million_output_tokens"]
    cheap = [r for r in rows if r["usd_per_million_output_tokens"] == best]
    assert len(cheap) > 1
    assert all(r["simulated"] and r["tie"] for r in cheap)  # as cheap as the best: confirmed, and a tie
    assert not any(r["tie"] for r in rows if r["usd_per_million_output_tokens"] > best)
    text = _run(args)
    # worded as a tie within the comparison band where published pairs give one (SGLang serving pairs arrived with
    # issue 45's blind campaigns), else as plans costing as little as the cheapest
    if f"{len(cheap)} confirmed plan(s) cost within the model's error" in text:
        assert "at 80%" in text  # the band the ties come from
    else:
        assert f"{len(cheap)} confirmed plan(s) cost as little as the cheapest" in text
        assert "no comparable published measurement" in text  # why there is no band on comparisons
