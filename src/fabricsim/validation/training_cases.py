"""Validate the training step model against published throughput (tokens/s)."""

from __future__ import annotations

from typing import Any

from fabricsim.catalog import Catalog, default_catalog
from fabricsim.errors import SpecError
from fabricsim.validation.collective_cases import CaseResult
from fabricsim.workload import ModelSpec
from fabricsim.workload.runspec import build_plan, parse_extra
from fabricsim.workload.training import Cluster, TrainingPrediction, predict_training

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
    fields: dict[str, Any] = {**run, **parse_extra(list(extra))}
    plan = build_plan(fields)
    model = ModelSpec.from_data(case["model"], source=str(case.get("id")))
    return predict_training(model, plan, Cluster(cat.system(case["system"]), catalog=cat))


def run_training_case(case: dict[str, Any], catalog: Catalog | None = None) -> CaseResult:
    pred = predict_case(case, catalog)
    measured = float(case["tokens_per_s"])
    error = (pred.tokens_per_s - measured) / measured
    return CaseResult(
        id=str(case["id"]), kind="training", measured=measured, predicted=pred.tokens_per_s, unit="tokens/s",
        error=error, tolerance=TRAINING_TOLERANCE, passed=abs(error) <= TRAINING_TOLERANCE,
        detail=f"{pred.gpus} GPUs, {pred.tflops_per_gpu:.0f} TFLOP/s/GPU, bound={pred.bottleneck}",
        source=str(case.get("source", "")),
    )
