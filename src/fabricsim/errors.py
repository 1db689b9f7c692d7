"""Errors raised for bad user input; the CLI turns them into one-line messages and exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic stays out of the CLI's start-up until a spec is validated
    from pydantic import BaseModel, ValidationError


class SpecError(ValueError):
    """Bad input: names the offending field (and file, where there is one) and what is allowed."""

    def __init__(self, message: str, *, field: str | None = None, source: str | None = None) -> None:
        self.field = field
        self.source = source
        self.api_field: str | None = None  # the API's name of the field (``train(tp=...)``), set by the API
        self.message = message
        prefix = ""
        if source:
            prefix += f"{source}: "
        if field:
            prefix += f"{field}: "
        super().__init__(prefix + message)


def unknown_name_error(kind: str, name: str, allowed: Iterable[str], *, field: str | None = None) -> SpecError:
    """A SpecError for an unknown preset name, with close matches and the full list of allowed names."""
    names = sorted(allowed)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    hint = f" did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return SpecError(f"unknown {kind} {name!r};{hint} allowed: {', '.join(names)}", field=field or kind)


def cli_field(exc: SpecError, names: dict[str, str]) -> SpecError:
    """``exc`` with its field renamed to the command-line option (``virtual_stages`` -> ``vpp``) when ``names`` has
    one; otherwise ``exc`` itself."""
    if exc.field not in names:
        return exc
    message = str(exc)
    prefix = (f"{exc.source}: " if exc.source else "") + f"{exc.field}: "
    return SpecError(message.removeprefix(prefix), field=names[exc.field], source=exc.source)


def _model_at(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The nested pydantic model that owns the last element of ``loc`` (for listing its allowed keys)."""
    from pydantic import BaseModel

    if model is None:
        return None
    current: type[BaseModel] = model
    for part in loc[:-1]:
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        candidates = [field.annotation, *getattr(field.annotation, "__args__", ())]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        current = nested[0]
    return current


def spec_error(exc: ValidationError, model: type[BaseModel] | None = None, source: str | None = None) -> SpecError:
    """The first pydantic error (unknown keys first) as ``file: field: message``; unknown keys list the allowed."""
    errors: list[Any] = list(exc.errors())
    # a misspelt key shows up as unknown and as missing: name the unknown one, it says what to fix
    if not errors:
        return SpecError(f"invalid {exc.title}", source=source)
    err: Any = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    raised = (err.get("ctx") or {}).get("error")
    if isinstance(raised, SpecError):  # a validator's own SpecError already names its field
        if source and not raised.source:
            return SpecError(str(raised).removeprefix(f"{raised.field}: ") if raised.field else str(raised),
                             field=raised.field, source=source)
        return raised
    loc: tuple[int | str, ...] = tuple(err["loc"])
    path = ".".join(str(p) for p in loc) or None
    msg = str(err["msg"]).removeprefix("Value error, ").splitlines()[0]
    if err["type"] == "missing":
        msg = "required field is missing"
    elif err["type"] == "extra_forbidden":
        owner = _model_at(model, loc)
        allowed = sorted(owner.model_fields) if owner is not None else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
        hint = f" did you mean {close[0]!r}?" if close else ""
        msg = f"unknown field;{hint} allowed: {', '.join(allowed)}"
    return SpecError(msg, field=path, source=source)
