"""`fabricsim.sweep`: every plan of a space that fits, timed and priced as one table, by the evaluation `size` runs
(the same rows as an exhaustive `size --out` file), each row the step `fabricsim.train` predicts for its plan."""

from __future__ import annotations

import pickle
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fabricsim
from fabricsim.errors import SpecError

SPACE = {"model": "llama3-8b", "tokens": "100B", "gpus": "64", "systems": "dgx-h100", "fabrics": "ndr",
         "oversubscription": "1", "fabric_kinds": "fat-tree", "tp": "1,2,4,8", "pp": "1,2", "executor": "serial"}


@pytest.fixture(scope="module")
def swept() -> fabricsim.SweepResult:
    return fabricsim.sweep(**SPACE)


def test_rows_are_the_exhaustive_size_rows(swept: fabricsim.SweepResult, tmp_path: Path) -> None:
    """The sweep's table is what an exhaustive `size` streams to its Parquet file: same plans, same figures."""
    out = tmp_path / "all.parquet"
    fabricsim.size(**SPACE, exhaustive=True, out=str(out))
    streamed = pd.read_parquet(out)
    table = swept.to_frame()
    assert len(table) == len(streamed) > 100
    keys = ["system", "fabric", "oversubscription", "gpus", "tp", "pp", "dp", "cp", "ep", "vpp", "mbs",
            "recompute", "zero", "precision", "gbs"]
    a = table.sort_values(keys).reset_index(drop=True)
    b = streamed[list(table.columns)].sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def test_summary_arrow_and_fastest(swept: fabricsim.SweepResult) -> None:
    doc = swept.to_dict()
    table = swept.to_frame()
    assert doc["plans"] == len(table) == swept.to_arrow().num_rows
    assert doc["fastest"]["time_to_train_s"] == pytest.approx(table["time_to_train_s"].min(), rel=1e-12)
    assert doc["cheapest"]["cost_usd"] == pytest.approx(table["cost_usd"].min(), rel=1e-12)
    best = fabricsim.size(**SPACE, objective="time").best
    assert best is not None
    assert best["time_to_train_s"] == pytest.approx(doc["fastest"]["time_to_train_s"], rel=1e-12)


def test_executors_agree(swept: fabricsim.SweepResult) -> None:
    pooled = fabricsim.sweep(**{**SPACE, "executor": "local", "workers": 2, "tp": "1,2,4,8", "pp": "1,2"})
    pd.testing.assert_frame_equal(swept.to_frame(), pooled.to_frame())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_row_is_the_step_train_predicts(swept: fabricsim.SweepResult, data: st.DataObject) -> None:
    """Any row's step time is `fabricsim.train`'s for that plan with every knob given: one model, one answer."""
    table = swept.to_frame()
    row = table.iloc[data.draw(st.integers(0, len(table) - 1))]
    step = fabricsim.train(model="llama3-8b", system=str(row["system"]), ib=str(row["fabric"]),
                           oversubscription=float(row["oversubscription"]), gpus=int(row["gpus"]), tp=int(row["tp"]),
                           pp=int(row["pp"]), cp=int(row["cp"]), vpp=int(row["vpp"]), mbs=int(row["mbs"]),
                           gbs=int(row["gbs"]), seq=int(row["seq"]), recompute=str(row["recompute"]),
                           zero=int(row["zero"]), precision=str(row["precision"]), goodput=False)
    assert step.step_time_s == pytest.approx(float(row["step_time_s"]), rel=1e-9)


def test_out_file_and_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "plans.parquet"
    result = fabricsim.sweep(**{**SPACE, "tp": "8", "pp": "1"}, out=str(out))
    assert len(pd.read_parquet(out)) == result.to_dict()["plans"] > 0
    with pytest.raises(SpecError, match="--executor"):
        fabricsim.sweep(**{**SPACE, "executor": "nowhere"})
    with pytest.raises(SpecError, match="--tp"):
        fabricsim.sweep(**{**SPACE, "tp": "eight"})
    with pytest.raises(SpecError, match="--gpus"):
        fabricsim.sweep(**{k: v for k, v in SPACE.items() if k != "gpus"})
    with pytest.raises(TypeError):
        fabricsim.sweep(**SPACE, deadline="30d")  # a constraint is size's: the sweep returns every plan


def test_train_result_add_ons_on_access() -> None:
    """`fabricsim.train` computes bands, goodput and the document when first read: the same as before, picklable."""
    from fabricsim.api.train import training_bands

    step = fabricsim.train(model="llama3-70b", system="dgx-h100", gpus=1024, tp=8, pp=4)
    assert step.run is not None
    assert step.bands == training_bands(step.run, [])
    doc = step.to_dict()
    assert doc["step_time_s"] == pytest.approx(step.step_time_s)
    assert step.goodput is not None and doc["goodput"]["goodput"] == pytest.approx(step.goodput.goodput)
    again = pickle.loads(pickle.dumps(step))
    assert again.to_dict() == doc
    with pytest.raises(SpecError, match="--storage-network"):  # an add-on option the user gave fails the call
        fabricsim.train(model="llama3-70b", system="dgx-h100", gpus=64, tp=8, storage_network="sideways")
