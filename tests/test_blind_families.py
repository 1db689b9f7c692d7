"""The blind campaigns of issue 45 item 6: published runs in the families the model missed, every one entered in the
ledger before anything changed because of it. Their blind medians are what the model scored on first sight (pinned:
the ledger cannot be rewritten); the current medians may only fall (each bound is the figure at the last landing,
rounded up). The closing notes report both, blind first."""

from __future__ import annotations

import statistics

import pytest

from fabricsim.validation import CaseResult, run_cases
from fabricsim.validation.cases import BLIND_CAMPAIGN_FILES, all_cases, case_file
from fabricsim.validation.ledger import load_ledger

# (case file, group): (blind median as first predicted, bound on today's median), both |error|
FIGURES: dict[tuple[str, str], tuple[float, float]] = {
    ("nccl_multinode_cases.yaml", "collective bandwidth"): (0.115, 0.12),
    ("long_context_cases.yaml", "long context"): (0.185, 0.20),
    ("moe_inference_cases.yaml", "inference"): (0.285, 0.105),
    ("moe_inference_cases.yaml", "serving"): (0.611, 0.27),
    ("fsdp_scale_cases.yaml", "fsdp"): (0.319, 0.26),
    ("moe_training_cases.yaml", "moe"): (0.194, 0.20),
    ("vllm_moe_cases.yaml", "serving"): (0.554, 0.30),
}


@pytest.fixture(scope="module")
def current() -> dict[tuple[str, str], list[float]]:
    cases = [c for c in all_cases() if case_file(c) in BLIND_CAMPAIGN_FILES]
    out: dict[tuple[str, str], list[float]] = {}
    for case, result in zip(cases, run_cases(cases), strict=True):
        if isinstance(result, CaseResult):
            out.setdefault((case_file(case), result.group), []).append(abs(result.error))
    return out


def test_every_blind_campaign_has_its_figures(current: dict[tuple[str, str], list[float]]) -> None:
    assert set(current) == set(FIGURES)
    assert {f for f, _ in FIGURES} == BLIND_CAMPAIGN_FILES


@pytest.mark.parametrize("key", sorted(FIGURES), ids=lambda k: f"{k[0]}:{k[1]}")
def test_blind_median_is_as_first_predicted(key: tuple[str, str]) -> None:
    blind = [abs(float(e["blind_error"])) for e in load_ledger()
             if e.get("file") == key[0] and e.get("group") == key[1] and e.get("blind_error") is not None]
    assert blind and statistics.median(blind) == pytest.approx(FIGURES[key][0], abs=0.0006)


@pytest.mark.parametrize("key", sorted(FIGURES), ids=lambda k: f"{k[0]}:{k[1]}")
def test_current_median_never_worse_than_at_the_last_landing(current: dict[tuple[str, str], list[float]],
                                                             key: tuple[str, str]) -> None:
    assert statistics.median(current[key]) <= FIGURES[key][1], statistics.median(current[key])


def test_a_case_may_name_its_training_stack() -> None:
    """`--framework` in a case's run flags applies the stack's defaults to the knobs the case leaves unset, as
    `fabricsim train --framework` does; the case's own flags win."""
    from fabricsim.validation.training_cases import predict_case

    base = {"id": "t", "system": "dgx-h100", "model": {"name": "m", "layers": 8, "hidden": 2048, "heads": 16,
                                                       "ffn_hidden": 8192, "vocab": 32000},
            "run": {"gpus": 8, "tp": 1, "pp": 1, "dp": 8, "seq": 2048, "gbs": 64, "extra": ["--mbs", "1"]}}
    plain = predict_case(base)
    titan = predict_case({**base, "run": {**base["run"], "extra": ["--mbs", "1", "--framework", "torchtitan"]}})
    assert titan.sharded and not plain.sharded  # torchtitan's FSDP2 (zero 3)
    own = predict_case({**base, "run": {**base["run"], "extra": ["--mbs", "1", "--framework", "torchtitan",
                                                                  "--zero", "1"]}})
    assert not own.sharded
