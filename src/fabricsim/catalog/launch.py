"""Launch templates: how a tool's own command line (and the config file it reads) states a plan's values. A serving
engine's profile and a training stack's profile each carry one in their packaged YAML; the flag names live there,
the rendering here, so `infer` and `train` print commands the same way."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class LaunchFlag(BaseModel):
    """One launch flag: when ``field``'s value meets ``when`` (``always``; ``gt1``: above 1; ``on``/``off`` for a
    switch; any other word: the value written the same way), ``args`` join the command line (``{value}`` and any
    field in braces formatted), ``option`` (a dotted key of the config file) is set to ``set_to`` (else the value),
    (``"{name}"``: the value of that field), and ``note`` says what the command cannot (a checkpoint to load)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str
    when: str
    args: list[str] = Field(default_factory=list)
    option: str | None = None
    set_to: str | int | float | bool | None = None
    note: str = ""

    def applies(self, value: Any) -> bool:
        if self.when == "always":
            return True
        if self.when == "gt1":
            return bool(value is not None and value > 1)
        if self.when in ("on", "off"):
            return bool(value) is (self.when == "on")
        return str(value) == self.when

    def option_value(self, value: Any, values: dict[str, Any] | None = None) -> Any:
        if self.set_to is None:
            return value
        if isinstance(self.set_to, str) and values is not None:
            name = self.set_to.removeprefix("{").removesuffix("}")
            if self.set_to == "{" + name + "}" and name in values:
                return values[name]
        return self.set_to


@dataclass(frozen=True)
class LaunchSettings:
    """A tool's command line (``argv``), the config file it reads (name -> text, empty when none) and notes on
    what the command cannot say."""

    engine: str
    argv: tuple[str, ...]
    config_files: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "command": self.command, "argv": list(self.argv),
                "config_files": dict(self.config_files), "notes": list(self.notes)}


@dataclass
class RenderedFlags:
    """What a list of flags made of a plan's values: the arguments, the config-file options, the notes and the
    fields that some flag stated."""

    args: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    stated: set[str] = field(default_factory=set)

    def unstated(self, values: dict[str, Any], names: Iterable[str]) -> str | None:
        """The first of ``names`` whose value is set (on, or above 1) that no applied flag stated: a launch line
        without it would run another plan; None when every one is stated."""
        for name in names:
            value = values[name]
            if (value is True or (value is not False and value > 1)) and name not in self.stated:
                return name
        return None


def render_flags(flags: list[LaunchFlag], values: dict[str, Any]) -> RenderedFlags:
    """Apply each flag whose condition the values meet, in order."""
    out = RenderedFlags()
    for flag in flags:
        value = values[flag.field]
        if not flag.applies(value):
            continue
        out.stated.add(flag.field)
        out.args += [part.format(value=value, **values) for part in flag.args]
        if flag.option is not None:
            set_option(out.options, flag.option, flag.option_value(value, values))
        if flag.note:
            out.notes.append(flag.note.format(value=value, **values))
    return out


def set_option(options: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested mapping."""
    keys = dotted.split(".")
    node = options
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value


def config_text(name: str, options: dict[str, Any]) -> str:
    """The config file's text: JSON for a ``.json`` name, else a small YAML mapping (nested dicts of scalars)."""
    if name.endswith(".json"):
        return json.dumps(options, indent=2) + "\n"
    return _yaml(options)


def _yaml(options: dict[str, Any], indent: int = 0) -> str:
    lines = []
    for key, value in options.items():
        if isinstance(value, dict):
            lines.append(" " * indent + f"{key}:")
            lines.append(_yaml(value, indent + 2).rstrip("\n"))
        else:
            lines.append(" " * indent + f"{key}: {json.dumps(value)}")
    return "\n".join(lines) + "\n"
