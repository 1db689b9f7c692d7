"""Run every validation case: each becomes a counted result or a not-expressible entry with its reason."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel

from fabricsim.caching import BoundedMemo, ByIdentity
from fabricsim.catalog import Catalog, default_catalog
from fabricsim.errors import SpecError
from fabricsim.validation.cases import Case, all_cases, validation_sources
from fabricsim.validation.collective_cases import LATENCY_METRICS, CaseResult, run_collective_case
from fabricsim.validation.inference_cases import run_inference_case
from fabricsim.validation.overlay import OverlayCatalogs
from fabricsim.validation.settings import ValidationSettings, expressed, expression_for, load_settings, with_settings
from fabricsim.validation.training_cases import run_training_case

GROUPS = ("collective bandwidth", "collective latency", "training", "moe", "blackwell", "fsdp", "long context",
          "inference", "serving")
"""moe: training cases of mixture-of-experts models; blackwell: dense training cases on Blackwell GPUs (B200, GB200,
B300, GB300); fsdp: dense training cases run with PyTorch FSDP (llm-foundry's MPT benchmarks); each from the files
long context: dense training cases at 32k tokens and more per sequence (context parallelism); each from the files
that declare them (a case's own ``group``); older files' cases stay where they were."""
CASE_GROUPS = ("moe", "blackwell", "fsdp", "long context", "serving")

INFERENCE_REASON = "not expressible by the inference model"  # prefix of every inference case's reason


class NotExpressible(BaseModel):
    """A case fabricsim cannot run yet, and why."""

    id: str
    group: str
    reason: str
    source: str


def case_group(case: Case) -> str:
    """The summary group of a case: collective latency (time_us), collective bandwidth, training or inference."""
    if case.kind in ("training", "inference") and case.data.get("group") in CASE_GROUPS:
        return str(case.data["group"])
    if case.kind != "collective":
        return case.kind
    metric = case.data.get("metric")
    published = case.data.get("published")
    unit = str(published.get("unit", "")) if isinstance(published, dict) else ""
    latency = metric in LATENCY_METRICS or (metric is None and unit.strip() == "us")
    return "collective latency" if latency else "collective bandwidth"


def source_text(value: Any) -> str:
    """A case's source as one line: a structured source (inference.yaml) as its repo, path, url and commit."""
    if isinstance(value, dict):
        parts = [str(value[k]) for k in ("repo", "path", "url", "title", "commit") if value.get(k)]
        return " ".join(parts) if parts else str(value)
    return "" if value is None else str(value)


def not_expressible(case: Case, reason: str) -> NotExpressible:
    return NotExpressible(id=case.id, group=case_group(case), reason=reason,
                          source=source_text(case.data.get("source")))


def runnable(case: Case, settings: ValidationSettings) -> dict[str, Any] | str:
    """The case's fields ready to run (expression and settings applied), or the reason it cannot run."""
    if case.kind == "inference":
        return case.data
    data = case.data
    if data.get("expressible") is False:
        expr = expression_for(case.id, settings)
        if expr is None:
            return str(data.get("reason") or "marked not expressible in the validation file")
        data = expressed(data, expr)
    return with_settings(data, settings) if case.kind == "training" else data


def evaluate(case: Case, catalogs: OverlayCatalogs, settings: ValidationSettings) -> CaseResult | NotExpressible:
    """One case's result; a SpecError (or a malformed case) becomes a not-expressible entry, never a crash."""
    try:
        data = runnable(case, settings)
        if isinstance(data, str):
            return not_expressible(case, data)
        catalog = catalogs.for_case(data)
        if case.kind == "inference":
            result = run_inference_case(data, catalog)
        elif case.kind == "training":
            result = run_training_case(data, catalog)
        else:
            result = run_collective_case(data, catalog)
    except SpecError as exc:
        reason = str(exc)
        return not_expressible(case, f"{INFERENCE_REASON}: {reason}" if case.kind == "inference" else reason)
    except (KeyError, TypeError, ValueError) as exc:
        return not_expressible(case, f"malformed case: {type(exc).__name__}: {exc}")
    return result.model_copy(update={"group": case_group(case)})


def run_cases(cases: list[Case], catalog: Catalog | None = None,
              settings: ValidationSettings | None = None) -> list[CaseResult | NotExpressible]:
    """Evaluate cases against one catalog (default: the packaged one) and the packaged settings."""
    catalogs = OverlayCatalogs(catalog or default_catalog())
    chosen = settings if settings is not None else load_settings()
    return [evaluate(c, catalogs, chosen) for c in cases]


_RUNS: BoundedMemo[tuple[CaseResult | NotExpressible, ...]] = BoundedMemo(4)


def run_validation(catalog: Catalog | None = None) -> list[CaseResult | NotExpressible]:
    """Every case of every validation file. Remembered per catalog object and case-file texts within a process:
    `validate`, the bands and the tests ask for it many times, and the same model on the same files answers the
    same (the results are immutable)."""
    chosen = catalog or default_catalog()
    sources = validation_sources()
    digest = hashlib.sha256(repr([(name, text) for name, (text, _) in sources.items()]).encode()).hexdigest()
    return list(_RUNS.get((ByIdentity(chosen), digest), lambda: tuple(run_cases(all_cases(), chosen))))
