"""The one declaration of a run option: a field of a pydantic run spec with its type, default, help, CLI name and
unit (`opt`). `fabricsim.api.specs.generate` writes the typer options, the API functions' keyword arguments and
docstrings, and docs/reference/options.md from these fields, so none of them is written anywhere else."""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field


def opt(default: Any, help: str, *, cli: str | None = None, unit: str | None = None,
        shown: str | None = None, old: str | None = None) -> Any:
    """A run option: ``default`` and ``help`` (the `--help` text, the API docstring and the reference page say
    the same), ``cli`` its flag when not ``--<name-with-dashes>`` (``--x/--no-x`` for a bool), ``unit`` what a
    number is counted in, ``shown`` the default as the reference page states it when the value is a sentinel,
    ``old`` the flag the option had before it was renamed (the CLI still takes it; the API's old keyword is mapped
    by the run's ``renames``)."""
    extra: dict[str, str] = {}
    if old is not None:
        extra["old"] = old
    if cli is not None:
        extra["cli"] = cli
    if unit is not None:
        extra["unit"] = unit
    if shown is not None:
        extra["shown"] = shown
    return Field(default, description=help, json_schema_extra=extra or None)  # type: ignore[arg-type]


class OptionGroup(BaseModel):
    """A group of options several run specs share (its class docstring heads its section of the reference page).
    Values are checked by the API's coercion first (`fabricsim.api.coerce`) and by the model below; the spec
    forbids unknown names."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


@dataclass(frozen=True)
class ApiFunction:
    """What `fabricsim.api.specs.generate` needs to write a run spec's API function: its name, the implementation it
    calls with the validated spec and the call's inputs (``module:name``), the result type, and the function
    that maps old keyword names (`fabricsim.api.coerce`)."""

    name: str
    implementation: str
    result: str
    renames: str | None = None
    summary: str = ""
    extra: tuple[tuple[str, str, str], ...] = ()
    """Keyword arguments of the API alone, not options (name, type, default as source text): passed to the
    implementation by name, left out of the ``inputs`` echo (`size`'s ``progress`` callback)."""


def field_cli(name: str, field: Any) -> str:
    """The CLI flag of a spec field: its ``cli`` as written, or ``--name-with-dashes`` (``--x/--no-x`` for a
    bool or an optional bool)."""
    extra = field.json_schema_extra or {}
    if extra.get("cli"):  # as written: a bool given a flag of its own is a single switch (--resume)
        return str(extra["cli"])
    flag = "--" + name.replace("_", "-")
    return f"{flag}/--no-{flag[2:]}" if is_flag(field.annotation) else flag


def field_flags(name: str, field: Any) -> tuple[str, ...]:
    """Every flag the CLI takes for a spec field: `field_cli`, then its old flag (``opt(old=...)``) if any."""
    old = (field.json_schema_extra or {}).get("old")
    return (field_cli(name, field), *((str(old),) if old else ()))


def is_flag(annotation: Any) -> bool:
    """A bool or an optional bool: an option typed so is a ``--x/--no-x`` pair."""
    return annotation is bool or (get_origin(annotation) in (Union, types.UnionType) and bool in get_args(annotation))
