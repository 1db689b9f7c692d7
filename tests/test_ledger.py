"""Issue 45 item 1: the blind ledger. Every validation case has an entry holding its prediction as first made (the
model at its arrival commit's parent); entries are chained, so a first prediction cannot be rewritten, removed or
moved without the test failing; new cases are entered by the tool, not by hand; and `validate` prints the
in-sample, leave-one-document-out and blind medians of every group."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from fabricsim.cli import app
from fabricsim.validation import all_cases, blind_errors, broken_links, load_ledger
from fabricsim.validation.ledger import FIELDS, GENESIS, append, dump, entry_chain, ledger_path, main, new_entries
from fabricsim.validation.runner import NotExpressible

BACKFILLED = 281
BACKFILL_HEAD = "8f44fc3718b96d445c1d481dc5423d1fcfa9cbaecdfeff21f9a39dd89b079b32"
"""The chain of the last backfilled entry (issue 45): rewriting any of the first 281 entries changes it."""


def test_the_ledger_is_intact_and_its_backfill_pinned() -> None:
    entries = load_ledger()
    assert broken_links(entries) == []
    assert len(entries) >= BACKFILLED
    assert entries[BACKFILLED - 1]["chain"] == BACKFILL_HEAD
    assert len({e["id"] for e in entries}) == len(entries), "one entry per case"


def test_every_case_has_an_entry() -> None:
    """A case added to the validation data without its ledger entry fails here: enter it (`python -m
    fabricsim.validation.ledger enter`) before changing anything because of it."""
    known = {e["id"] for e in load_ledger()}
    missing = sorted({c.id for c in all_cases()} - known)
    assert not missing, f"cases without a ledger entry (run `python -m fabricsim.validation.ledger enter`): {missing}"


@pytest.mark.parametrize("change", ["blind_error", "parent", "remove", "swap"])
def test_a_rewritten_entry_breaks_the_chain(change: str) -> None:
    entries = [dict(e) for e in load_ledger()[:20]]
    if change == "remove":
        del entries[5]
    elif change == "swap":
        entries[3], entries[4] = entries[4], entries[3]
    else:
        entries[7][change] = 0.01 if change == "blind_error" else "0" * 40
    assert broken_links(entries)


def test_blind_errors_are_first_predictions_against_the_measurement() -> None:
    entries = load_ledger()
    found = blind_errors(entries)
    assert len(found) >= 80
    for e in entries:
        if e["id"] in found and e["measured"]:
            assert found[e["id"]] == pytest.approx(e["blind_predicted"] / e["measured"] - 1.0, rel=1e-6, abs=1e-9)


def test_new_cases_enter_with_the_model_as_it_stands(tmp_path: Path) -> None:
    counted = SimpleNamespace(id="new_case", group="training", kind="training", measured=100.0, predicted=110.0,
                              unit="tokens/s", error=0.1)
    missing = NotExpressible(id="odd_case", group="inference", reason="no such engine", source="x")
    old = load_ledger()[:3]
    added = new_entries([counted, missing, SimpleNamespace(id=old[0]["id"])], {e["id"] for e in old}, "abc123",
                        {"new_case": "found_cases.yaml"})
    assert [e["id"] for e in added] == ["new_case", "odd_case"]
    assert added[0]["file"] == "found_cases.yaml" and added[1]["file"] is None
    assert added[0]["blind_error"] == 0.1 and added[0]["parent"] == "abc123"
    assert added[1]["blind_predicted"] is None and "no such engine" in added[1]["blind_note"]
    grown = append(old, added)
    assert grown[:3] == old and broken_links(grown) == []
    path = tmp_path / "ledger.yaml"
    path.write_text(dump(grown, "# test\n"), encoding="utf-8")
    assert load_ledger(path) == grown


def test_the_chain_is_the_previous_chain_and_the_fields() -> None:
    first = load_ledger()[0]
    assert first["chain"] == entry_chain(first, GENESIS)
    assert list(first)[: len(FIELDS)] == list(FIELDS)


def test_ledger_check_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check"]) == 0
    assert "intact" in capsys.readouterr().out
    assert ledger_path().name == "ledger.yaml"


def test_validate_prints_three_medians_per_group() -> None:
    run = CliRunner().invoke(app, ["validate", "--group", "training", "--json"])
    medians: dict[str, Any] = json.loads(run.stdout)["groups"]["training"]["medians"]
    assert set(medians) == {"in_sample", "in_sample_cases", "leave_one_document_out", "leave_one_document_out_cases",
                            "blind", "blind_cases"}
    assert medians["blind_cases"] >= 15 and 0 < medians["blind"] < 1
    table = CliRunner().invoke(app, ["validate", "--group", "training"])
    assert "median error: in-sample" in table.stdout and "left-out document" in table.stdout
    assert "blind" in table.stdout
