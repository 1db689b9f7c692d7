"""The accuracy issue's must-holds on the whole validation set (shared files and packaged found cases)."""

from __future__ import annotations

import pytest

from fabricsim.validation import CaseResult, NotExpressible, group_summaries, run_validation
from fabricsim.validation.cases import blind_campaign_ids

# Counted cases known to sit beyond 30%, each with the mechanism still missing; the list may only shrink (empty).
KNOWN_GAPS: dict[str, str] = {}
GROUPS = ("collective bandwidth", "collective latency", "training")


@pytest.fixture(scope="module")
def results() -> list[CaseResult | NotExpressible]:
    """The set these must-holds were written for: every case but the blind campaigns of issue 45 item 6, which
    tests/test_blind_families.py holds to their own figures."""
    blind = blind_campaign_ids()
    return [r for r in run_validation() if r.id not in blind]


def test_every_group_median_within_8_percent(results: list[CaseResult | NotExpressible]) -> None:
    summaries = {s.name: s for s in group_summaries(results)}
    for name in GROUPS:
        s = summaries[name]
        assert s.count >= 9, name
        assert s.median_abs_error is not None and s.median_abs_error <= 0.08, (name, s.median_abs_error)


def test_no_counted_case_beyond_30_percent(results: list[CaseResult | NotExpressible]) -> None:
    # the inference group has its own must-hold bounds (tests/test_inference_validation.py)
    beyond = {r.id: round(r.error, 3) for r in results
              if isinstance(r, CaseResult) and r.group in GROUPS and abs(r.error) > 0.30}
    assert set(beyond) <= set(KNOWN_GAPS), beyond


def test_small_message_all_reduce_within_30_percent(results: list[CaseResult | NotExpressible]) -> None:
    small = [r for r in results if isinstance(r, CaseResult) and r.group == "collective latency"]
    assert len(small) >= 5
    assert all(abs(r.error) <= 0.30 for r in small), [(r.id, r.error) for r in small if abs(r.error) > 0.3]


def test_no_flag_of_the_issue_left_unexpressed(results: list[CaseResult | NotExpressible]) -> None:
    """FP8, flash attention, ZeRO-3, overlaps and uneven pipelines are expressible: every training case the
    shared files mark not expressible for want of them runs now; the rest name a reason no flag can answer."""
    training_gaps = [r for r in results if isinstance(r, NotExpressible) and r.group == "training"]
    assert {r.id for r in training_gaps} == {"dsv3_cluster_bandwidths", "mlperf_gpt3_175b_eos"}
    nemo = [r for r in results if isinstance(r, CaseResult) and r.id.startswith("nemo2407_")]
    assert len(nemo) == 12


def test_every_published_training_run_fits(results: list[CaseResult | NotExpressible]) -> None:
    training = [r for r in results if isinstance(r, CaseResult) and r.group == "training"]
    assert training and all("does not fit" not in r.detail for r in training)
