"""Errors raised for bad user input; the CLI turns them into one-line messages and exit code 2."""

from __future__ import annotations

from collections.abc import Iterable


class SpecError(ValueError):
    """Bad input: names the offending field (and file, where there is one) and what is allowed."""

    def __init__(self, message: str, *, field: str | None = None, source: str | None = None) -> None:
        self.field = field
        self.source = source
        prefix = ""
        if source:
            prefix += f"{source}: "
        if field:
            prefix += f"{field}: "
        super().__init__(prefix + message)


def unknown_name_error(kind: str, name: str, allowed: Iterable[str], *, field: str | None = None) -> SpecError:
    """A SpecError for an unknown preset name, with close matches and the full list of allowed names."""
    import difflib

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
