"""``fabricsim.workload`` was split into model, comm, training, inference and serving: for one release its old
public names still resolve, each with a DeprecationWarning naming the new home; anything else is a clear error."""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

import pytest

import fabricsim.model as model
import fabricsim.training as training


def fresh_workload() -> ModuleType:
    import fabricsim.workload as workload

    return importlib.reload(workload)  # forget names cached by an earlier look-up


@pytest.mark.parametrize(("name", "home"), [("ModelSpec", model), ("load_model", model), ("forward_flops", model),
                                            ("ParallelPlan", training), ("place", training),
                                            ("memory_report", training), ("step_flops", training)])
def test_old_names_resolve_to_their_new_home_with_a_warning(name: str, home: ModuleType) -> None:
    workload = fresh_workload()
    with pytest.warns(DeprecationWarning, match=rf"fabricsim\.workload\.{name} moved to {home.__name__}\.{name}"):
        value = getattr(workload, name)
    assert value is getattr(home, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(workload, name) is value  # warned once


def test_every_old_export_still_resolves() -> None:
    workload = fresh_workload()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in workload.__all__:
            assert getattr(workload, name) is not None


def test_an_unknown_name_says_where_the_package_went() -> None:
    workload = fresh_workload()
    with pytest.raises(AttributeError, match=r"split into fabricsim\.model"):
        _ = workload.predict_training
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("fabricsim.workload.training")


def test_nothing_in_the_package_uses_the_deprecated_path() -> None:
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "fabricsim"
    users = [p for p in src.rglob("*.py") if "fabricsim.workload" in p.read_text(encoding="utf-8")
             and p.parent.name != "workload"]
    assert not users
