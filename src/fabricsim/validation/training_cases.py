"""Validate the training step model against published throughput (tokens/s)."""

from __future__ import annotations

from typing import Any

from fabricsim.catalog import Catalog, default_catalog
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.model import ModelSpec
from fabricsim.training import TrainingPrediction, build_plan, framework_profile, parse_extra, predict_training
from fabricsim.validation.collective_cases import CaseResult
from fabricsim.validation.regimes import training_regime

TRAINING_TOLERANCE = 0.15
RUN_FIELDS = ("gpus", "tp", "pp", "dp", "cp", "ep", "seq", "gbs", "mbs")


def predict_case(case: dict[str, Any], catalog: Catalog | None = None) -> TrainingPrediction:
    """Run a case exactly as its `run` fields say (they map to `fabricsim train` flags)."""
    cat = catalog or default_catalog()
    run = dict(case["run"])
    extra = run.pop("extra", []) or []
    unknown = set(run) - set(RUN_FIELDS)
    if unknown:
        raise SpecError(f"unknown run fields {sorted(unknown)}; allowed: {', '.join(RUN_FIELDS)}",
                        field=f"{case.get('id')}.run")
    flags, framework = _framework_flag([str(x) for x in extra], f"{case.get('id')}.run.extra")
    fields: dict[str, Any] = {**run, **parse_extra(flags)}
    if framework is not None:  # the stack's defaults for the knobs the case leaves unset, as `train --framework`
        fields = {**framework_profile(framework).values(), **fields}
    plan = build_plan(fields)
    model = ModelSpec.from_data(case["model"], source=str(case.get("id")))
    return predict_training(model, plan, Cluster(cat.system(case["system"]), catalog=cat))


def _framework_flag(extra: list[str], where: str) -> tuple[list[str], str | None]:
    """``extra`` without its ``--framework NAME[@VERSION]`` and the name (None without one)."""
    if "--framework" not in extra:
        return extra, None
    at = extra.index("--framework")
    if at + 1 >= len(extra):
        raise SpecError("--framework needs a name", field=where)
    return extra[:at] + extra[at + 2:], extra[at + 1]


def case_tolerance(case: dict[str, Any]) -> float:
    """The case's own `tol`/`tolerance`, else the training default (15%)."""
    for key in ("tol", "tolerance"):
        if case.get(key) is not None:
            return float(case[key])
    return TRAINING_TOLERANCE


def run_training_case(case: dict[str, Any], catalog: Catalog | None = None) -> CaseResult:
    """Predict one training case; a plan the model says does not fit in memory fails (the published run ran)."""
    cat = catalog or default_catalog()
    pred = predict_case(case, cat)
    moe = ModelSpec.from_data(case["model"], source=str(case.get("id"))).moe is not None
    regime = training_regime(moe, cat.gpu(cat.system(case["system"]).gpu), pred.peak_precision, pred.gpus,
                             pred.sharded)
    measured = float(case["tokens_per_s"])
    error = (pred.tokens_per_s - measured) / measured
    tol = case_tolerance(case)
    fits = pred.memory.fits
    return CaseResult(
        id=str(case["id"]), kind="training", measured=measured, predicted=pred.tokens_per_s, unit="tokens/s",
        error=error, tolerance=tol, passed=abs(error) <= tol and fits,
        detail=f"{pred.gpus} GPUs, {pred.tflops_per_gpu:.0f} TFLOP/s/GPU, bound={pred.bottleneck}"
               + ("" if fits else ", DOES NOT FIT in memory"),
        source=str(case.get("source", "")), group="training", metric="tokens_per_s", regime=regime.to_json(),
    )
