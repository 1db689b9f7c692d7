"""Per-publication run settings and expressions (packaged settings.yaml): the flags a case's era implies, and the
runnable form of cases the shared files mark not expressible, so the validator runs each case as published."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricsim.errors import SpecError
from fabricsim.validation.cases import packaged_text, parse_document

SETTINGS_FILE = "settings.yaml"


class Setting(BaseModel):
    """Flags appended to the `extra` of every training case whose id matches the glob."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: str = Field(min_length=1, description="case-id glob (fnmatch)")
    extra: list[str] = Field(description="`fabricsim train` flags, before the case's own")
    source: str = Field(min_length=1, description="the publication's stated settings")


class Expression(BaseModel):
    """A runnable training case for a published row the shared file could not express."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    system: str
    model: dict[str, Any]
    run: dict[str, Any]
    source: str = Field(min_length=1)


class ValidationSettings(BaseModel):
    """The contents of settings.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    settings: list[Setting] = []
    expressions: list[Expression] = []


def parse_settings(data: dict[str, Any], origin: str) -> ValidationSettings:
    """Validate a settings document; errors name the file and field."""
    try:
        return ValidationSettings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise SpecError(err["msg"], field=".".join(str(p) for p in err["loc"]), source=origin) from None


@lru_cache(maxsize=1)
def load_settings() -> ValidationSettings:
    """The packaged settings.yaml (cached: it is immutable)."""
    origin = f"fabricsim/validation/data/{SETTINGS_FILE}"
    return parse_settings(parse_document(packaged_text(SETTINGS_FILE), origin), origin)


def settings_extra(case_id: str, settings: ValidationSettings) -> list[str]:
    """The flags of every setting matching `case_id`, in file order."""
    return [flag for s in settings.settings if fnmatchcase(case_id, s.match) for flag in s.extra]


def with_settings(case: dict[str, Any], settings: ValidationSettings) -> dict[str, Any]:
    """The case with the matching settings' flags put before its own (so the case's flags win on conflict)."""
    flags = settings_extra(str(case.get("id")), settings)
    if not flags or not isinstance(case.get("run"), dict):
        return case
    run = dict(case["run"])
    run["extra"] = [*flags, *(run.get("extra") or [])]
    return {**case, "run": run}


def expression_for(case_id: str, settings: ValidationSettings) -> Expression | None:
    """The expression written for this case id, if any."""
    return next((e for e in settings.expressions if e.id == case_id), None)


CONFIG_KEYS = {"gpus": "gpus", "GBS": "gbs", "MBS": "--mbs", "seq": "seq", "TP": "tp", "PP": "pp", "CP": "cp",
               "VP": "--vpp"}


def run_value(run: dict[str, Any], key: str) -> int:
    """A run field (`tp`) or the value after an extra flag (`--mbs`); plan defaults of 1 when absent."""
    if not key.startswith("--"):
        return int(run.get(key) or 1)
    extra = [str(x) for x in run.get("extra") or []]
    return int(extra[extra.index(key) + 1]) if key in extra[:-1] else 1


def check_config(case: dict[str, Any], expr: Expression) -> None:
    """The expression must agree with the case's `config` string ('gpus=64 GBS=2048 ... TP=1 ... FP8') and
    gpus = tp * pp * cp * dp; a disagreement is a SpecError naming both values."""
    config = str(case.get("config", ""))
    for key, value in re.findall(r"(\w+)=(\d+)", config):
        if key in CONFIG_KEYS and run_value(expr.run, CONFIG_KEYS[key]) != int(value):
            raise SpecError(f"config says {key}={value}, expression has {run_value(expr.run, CONFIG_KEYS[key])}",
                            field=f"expressions.{expr.id}")
    if "FP8" in config.split() and "fp8" not in [str(x).lower() for x in expr.run.get("extra") or []]:
        raise SpecError("config says FP8, expression lacks --precision fp8", field=f"expressions.{expr.id}")
    product = 1
    for key in ("tp", "pp", "cp", "dp"):
        product *= run_value(expr.run, key)
    if product != run_value(expr.run, "gpus"):
        raise SpecError(f"gpus {run_value(expr.run, 'gpus')} != tp*pp*cp*dp = {product}",
                        field=f"expressions.{expr.id}")


def expressed(case: dict[str, Any], expr: Expression) -> dict[str, Any]:
    """The case as a runnable training case: the expression's system, model and run; the published figures kept."""
    check_config(case, expr)
    return {**case, "system": expr.system, "model": dict(expr.model), "run": dict(expr.run),
            "expressible": True, "expression_source": expr.source}
