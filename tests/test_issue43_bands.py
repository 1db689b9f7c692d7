"""Issue 43 item 4, beyond `infer`: every printed figure lies inside its printed band, in every command. One
mechanism (`Band.figure`, `shown_figure`): the model's figure where its band holds it, else the band's centre with
the raw figure named."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from fabricsim import units
from fabricsim.cli import app
from fabricsim.validation import Band, NoBand, shown_figure

BIASED = Band(low=18.67e-3, high=43.35e-3, level=0.8, cases=9, bias=-0.26, estimate=24.62e-3, matched="x")


def test_a_figure_the_band_holds_is_printed_as_is() -> None:
    assert BIASED.figure(30e-3, units.format_duration).startswith("30ms (18.67ms-43.35ms, 80% band from 9")
    assert shown_figure(30e-3, BIASED.to_json()) == 30e-3


def test_a_figure_outside_its_band_prints_the_centre_and_names_the_raw_one() -> None:
    text = BIASED.figure(18.13e-3, units.format_duration)
    assert text.startswith("24.62ms (18.67ms-43.35ms")
    assert "model's raw figure 18.13ms" in text and "-26%" in text
    assert shown_figure(18.13e-3, BIASED.to_json()) == pytest.approx(24.62e-3)


def test_no_band_keeps_the_figure_and_says_why() -> None:
    none = NoBand("3 published case(s); 9 are needed")
    assert none.figure(1.0, "{:g}".format) == "1 (3 published case(s); 9 are needed)"
    assert shown_figure(1.0, none.to_json()) == 1.0
    assert shown_figure(1.0, None) == 1.0


BAND = re.compile(r"step time (?P<fig>[\d.]+[a-zµ]*) \((?P<low>[\d.]+[a-zµ]*)-(?P<high>[\d.]+[a-zµ]*), 80% band")
CELL = re.compile(r"(?P<fig>[\d.]+[a-zµ]*s) \((?P<low>[\d.]+[a-zµ]*s)-(?P<high>[\d.]+[a-zµ]*s)\)")


@pytest.mark.parametrize("args", [
    ["train", "--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "2", "--gbs", "64"],
    ["train", "--model", "mixtral-8x7b", "--system", "dgx-b200", "--gpus", "64", "--tp", "2", "--ep", "8",
     "--gbs", "256"],
    ["whatif", "--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--gbs", "32", "--swap", "system=dgx-b200"],
])
def test_train_and_whatif_print_figures_inside_their_bands(args: list[str]) -> None:
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    found = list(BAND.finditer(text)) + list(CELL.finditer(text))
    assert found, text
    for m in found:
        fig, low, high = (units.parse_duration(m[k]) for k in ("fig", "low", "high"))
        assert low <= fig <= high, m.group(0)


def test_collective_rows_raw_busbw_inside_its_band() -> None:
    """The collective table prints nccl-tests' columns as the model gives them: each must lie in its band."""
    out = CliRunner().invoke(app, ["collective", "--nodes", "4", "--op", "all_reduce", "--min", "8", "--max", "8G",
                                   "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["rows"]
    banded = [(r[k[:-5]], v) for r in rows for k, v in r.items()
              if k.endswith("_band") and isinstance(v, dict) and v.get("low") is not None]
    assert banded
    for raw, band in banded:
        assert band["low"] <= raw <= band["high"]  # the table prints the raw row (nccl-tests' columns)
