"""One door for the API's keyword arguments: the values the CLI takes, accepted in their natural Python types (an
int or ``"16"`` for a count, ``8.0`` for 8, a list or a comma string for a list option, one string for a repeated
option), anything else a `SpecError` naming the option as the CLI does. Every API function is wrapped by
`api_call`, so the rules live here and nowhere else."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from fabricsim.errors import SpecError

P = ParamSpec("P")
R = TypeVar("R")

Renames = Callable[[dict[str, Any]], dict[str, Any]]


def option_name(name: str) -> str:
    """The CLI option of an API keyword (``gpus_per_node`` -> ``--gpus-per-node``)."""
    return "--" + name.replace("_", "-")


def _kinds(annotation: object) -> set[str]:
    """The plain types an annotation string allows: int, float, bool, str, path, list (of strings)."""
    text = str(annotation).replace(" ", "")
    kinds = set()
    for part in text.split("|"):
        if part in ("int", "float", "bool", "str"):
            kinds.add(part)
        elif part == "Path":
            kinds.add("path")
        elif part in ("Sequence[str]", "list[str]", "tuple[str,...]"):
            kinds.add("list")
    return kinds


def _whole(value: Any, name: str) -> int:
    """An int from an int, an integral float (8.0) or its text ("16")."""
    if isinstance(value, bool):
        raise SpecError(f"expected a whole number, got {value!r}", field=option_name(name))
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise SpecError(f"expected a whole number, got {value!r}", field=option_name(name))


def _number(value: Any, name: str) -> float:
    """A float from a number or its text ("1.5")."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise SpecError(f"expected a number, got {value!r}", field=option_name(name))


def _text(value: Any, name: str) -> str:
    """Option text from a string, a number (``gpus=64``) or a list of them (``systems=["dgx-h100"]``: the CLI's
    comma list)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, list | tuple) and value and all(isinstance(v, str | int | float) and
                                                        not isinstance(v, bool) for v in value):
        return ",".join(_text(v, name) for v in value)
    raise SpecError(f"expected text as on the command line (or a list of values), got {value!r}",
                    field=option_name(name))


def _strings(value: Any, name: str) -> list[str]:
    """A repeated option's values: one string (or path) is one value, a list or tuple is several."""
    if isinstance(value, str | Path):
        return [str(value)]
    if isinstance(value, list | tuple) and all(isinstance(v, str | Path) for v in value):
        return [str(v) for v in value]
    raise SpecError(f"expected a string or a list of strings, got {value!r}", field=option_name(name))


def coerce(name: str, value: Any, annotation: object) -> Any:
    """``value`` of keyword ``name`` as its annotation wants it (None stays None; unknown annotations pass)."""
    kinds = _kinds(annotation)
    if value is None or not kinds:
        return value
    if "list" in kinds:
        return _strings(value, name)
    if "path" in kinds and isinstance(value, Path):
        return value
    if "bool" in kinds:
        if isinstance(value, bool):
            return value
        raise SpecError(f"expected True or False, got {value!r}", field=option_name(name))
    if "int" in kinds:
        return _whole(value, name)
    if "float" in kinds:
        return _number(value, name)
    if "str" in kinds:
        return _text(value, name)
    return value


@functools.cache
def parameters(func: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    """``func``'s parameters, read once (an API call is timed in microseconds; `inspect.signature` is tens)."""
    return inspect.signature(func).parameters


def coerce_arguments(func: Callable[..., Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Every keyword argument of ``func`` coerced by `coerce` (names ``func`` does not take pass through, so
    Python's own error names them)."""
    params = parameters(func)
    return {k: coerce(k, v, params[k].annotation) if k in params else v for k, v in kwargs.items()}


def run_file_arguments(func: Callable[..., Any], path: str | Path,
                       renames: Renames | None = None) -> dict[str, Any]:
    """The keyword arguments of a run file (``config=``: the CLI's ``--config`` file, YAML or JSON, or a ``--json``
    document, whose ``inputs`` are read): keys are keyword names (``gpus-per-node`` spelt with dashes is taken too);
    a key ``func`` does not take is a SpecError, unless its value is null (a command-line-only option such as
    ``plot`` left unset in a ``--dump-config`` file)."""
    import difflib

    from fabricsim.inputs import load_spec_file

    data = load_spec_file(path, "run file")
    if isinstance(data, dict) and isinstance(data.get("inputs"), dict):
        data = data["inputs"]
    if not isinstance(data, dict):
        raise SpecError("a run file is a mapping of keyword names to values", field="config", source=str(path))
    if renames is not None:  # old keyword names in a run file mean what they meant
        data = renames({str(k).replace("-", "_"): v for k, v in data.items()})
    params = inspect.signature(func).parameters
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name in params and name != "config":
            out[name] = value
        elif value is not None:
            close = difflib.get_close_matches(name, list(params), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise SpecError(f"unknown keyword {key!r} of {func.__name__}(){hint}", field="config", source=str(path))
    return out


def api_call(renames: Renames | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Wrap an API function: a run file's keywords under the call's (``config="run.yaml"``), old keyword names
    mapped by ``renames``, then every argument coerced."""

    def wrap(func: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(func)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            given = dict(kwargs)
            config = given.pop("config", None) if "config" not in parameters(func) else None
            if config is not None:
                if not isinstance(config, str | Path):
                    raise SpecError(f"expected the path of a run file, got {config!r}", field="config")
                given = {**run_file_arguments(func, config, renames), **given}
            if renames is not None:
                given = renames(given)
            try:
                return func(*args, **coerce_arguments(func, given))
            except SpecError as exc:
                name_api_field(exc, func)
                raise

        return call

    return wrap


def name_api_field(exc: SpecError, func: Callable[..., Any]) -> None:
    """Give a SpecError that names a command-line option the API's name for it as well: ``exc.api_field``
    (``train(tp=...)``) and a note under the message (the message stays the CLI's one line)."""
    if exc.field is None or exc.api_field is not None:
        return
    names = inspect.signature(func).parameters
    flags = {**{n: n for n in names}, **{option_name(n): n for n in names}}
    if any(flag not in flags for flag in _flags(exc.field)):  # a run spec's own spelling (--fabric: fabric_kind)
        from fabricsim.api.specs import RUNS, field_cli

        for run in RUNS:
            if run.api.name == func.__name__:  # type: ignore[attr-defined]
                flags.update({field_cli(n, f).split("/")[0]: n for n, f in run.model_fields.items()})
    keywords = [flags[flag] for flag in _flags(exc.field) if flag in flags]
    if keywords:
        exc.api_field = ", ".join(f"{func.__name__}({k}=...)" for k in keywords)
        exc.add_note(f"in the API: {exc.api_field}")


def _flags(field: str) -> list[str]:
    return [part.strip() for part in field.split(",")]


FABRIC_DESIGNS = ("fat-tree", "rail-only", "dragonfly", "slim-fly", "torus", "mesh")
"""Scale-out designs: what ``fabric=`` names in `topology` (and ``--fabric`` on every command)."""


def fabric_alias(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`train` and `whatif` before ``ib=``: ``fabric=`` named the network link (``fabric="ndr"``; deprecated, now
    ``ib=``), while `topology`'s ``fabric=`` is the design. A design name goes to ``fabric_kind``, anything else to
    ``ib`` with a DeprecationWarning; both spellings at once is a SpecError."""
    if "fabric" not in kwargs:
        return kwargs
    out = dict(kwargs)
    value = out.pop("fabric")
    design = isinstance(value, str) and value.strip().lower() in FABRIC_DESIGNS
    target = "fabric_kind" if design else "ib"
    if not design:
        import warnings

        warnings.warn("fabric= naming the network link is deprecated: use ib= (as topology does; fabric= is the "
                      "scale-out design there)", DeprecationWarning, stacklevel=3)
    if out.get(target) is not None and value is not None and out[target] != value:
        raise SpecError(f"fabric={value!r} and {target}={out[target]!r} disagree; give {target}= alone",
                        field=option_name("ib") if target == "ib" else "--fabric")
    if value is not None:
        out[target] = value
    return out


def whatif_fabric_alias(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`fabric_alias` for `whatif`, which runs the system's fat tree and prices other designs as swaps: a design
    name is a SpecError that says so."""
    value = kwargs.get("fabric")
    if isinstance(value, str) and value.strip().lower() in FABRIC_DESIGNS:
        raise SpecError(f"whatif runs the cluster's fat tree; price another design as a swap: swap=['fabric={value}']",
                        field="fabric")
    return fabric_alias(kwargs)


def size_renames(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`size` before ``facility=``: ``power_cap=`` was the same limit (facility power, IT x PUE) under its old name;
    it is taken as ``facility``; both at once with different values is a SpecError."""
    if "power_cap" not in kwargs:
        return kwargs
    out = dict(kwargs)
    value = out.pop("power_cap")
    if out.get("facility") is not None and value is not None and out["facility"] != value:
        raise SpecError(f"power_cap={value!r} and facility={out['facility']!r} disagree: power_cap is the old name of "
                        "facility (the facility power limit); give facility= alone", field="--facility")
    if value is not None:
        out["facility"] = value
    return out
