"""Issue 47 item 5: `size`'s decision table (the best plan on each system searched, today's generation against the
next, with time, cost and energy bands, facility megawatts and what each row rests on) and the README's copy of it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fabricsim.api.decision import decision_rows
from fabricsim.catalog import default_catalog

ROOT = Path(__file__).resolve().parents[1]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("decision_table", ROOT / "tools" / "decision_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = TOOL.decision()
    return result


def test_one_row_per_system_with_bands_facility_and_basis(rows: list[dict[str, Any]]) -> None:
    assert {r["system"] for r in rows} == {"gb200-nvl72", "vera-rubin-nvl72", "helios-mi455x"}
    costs = [r["cost_usd"] for r in rows]
    assert costs == sorted(costs)  # objective cost: cheapest first
    for r in rows:
        assert r["time_to_train_s"] <= 90 * 86400  # the deadline holds
        for key in ("time_to_train_s", "cost_usd", "energy_mwh"):
            band = r[f"{key}_band"]
            assert band["low"] <= band["estimate"] <= band["high"], (r["system"], key)
        assert r["facility_power_w"] > r["power_w"] > 0 and r["racks"] >= 1
        if r["status"] == "roadmap":
            assert f"system:{r['system']}" in r["roadmap"] and r["estimated"]
            assert any("not in it" in n for n in r["notes"])
        else:
            assert r["roadmap"] == [] and r["estimated"] == []


def test_the_readme_table_is_the_commands(rows: list[dict[str, Any]]) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert TOOL.readme_block(readme) == TOOL.block(rows), "run: python tools/decision_table.py (README is stale)"
    assert TOOL.COMMAND.split()[2:] == [w for k, v in TOOL.ARGS.items()
                                             for w in (f"--{k.replace('_', '-')}", v)]


def test_a_row_it_cannot_describe_is_a_note_not_a_failure() -> None:
    row = {"system": "dgx-h100", "fabric": "no-such-network", "gpus": 64, "nodes": 8, "cost_usd": 1.0,
           "time_to_train_s": 1.0, "plan": {}}
    out = decision_rows([row], "cost", default_catalog())
    assert len(out) == 1 and out[0]["roadmap"] == [] and "could not be listed" in out[0]["notes"][0]
