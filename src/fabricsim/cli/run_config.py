"""``--config FILE`` and ``--dump-config`` on every command that runs a model: a run is a file a team can review and
diff, and the flags given on the command line override it.

One mechanism for every command: the decorator `run_config` adds the two options to the command (declared once,
here) and nothing else changes in the command. ``--config`` is eager: click reads it before any other option, and
its callback puts the file's values into the context's ``default_map``, the source click consults for every option
not given on the command line (so flags win, and the file's values go through the same conversion as typed ones).
``--dump-config`` prints the resolved run (file, flags and defaults) as YAML and exits without running the model.

The file (YAML, or JSON by its ``.json`` suffix) is a mapping of option names to values. The canonical keys are the
command's parameter names, which are also the API's keyword arguments and the keys of the JSON ``inputs`` echo
(``gpus_per_node``, ``min_size``, ``fabric_kind``), so ``fabricsim X --json | jq .inputs`` is a run file, and so is
a whole ``--json`` document (its ``inputs`` key is read). The option's own spelling without dashes is accepted too
(``gpus-per-node``, ``min``, ``fabric``). Values take their natural YAML types: numbers, strings (``8G``, ``30d``),
booleans for the ``--x/--no-x`` flags, and a list or a comma string for a list option. Paths are relative to the
working directory, as on the command line. An unknown key, or a key of another command, is a one-line error.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import wraps
from inspect import Parameter, signature
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import typer

from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from typer.core import TyperOption

P = ParamSpec("P")
R = TypeVar("R")

# Options that say how to print, not what to run: accepted in a file, left out of --dump-config (as from `inputs`).
PRESENTATION = ("fmt", "as_json")
OWN = ("config", "dump_config")


def _fail(message: str) -> None:
    """One ``error:`` line on stderr and exit code 2 (the callback runs before the command's own error handler)."""
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(code=2)


def _options(command: Any) -> list[Any]:
    """The options of a click command a run file may set (not --help, --config, --dump-config)."""
    return [p for p in getattr(command, "params", ()) if p.expose_value and p.name not in OWN
            and getattr(p, "opts", None)]


def key_names(command: Any) -> dict[str, str]:
    """Every accepted key of a command's run file -> its parameter name: the parameter names, then each option's
    spelling without dashes (``gpus-per-node``, ``min``) where it names no other parameter."""
    params = _options(command)
    names = {p.name: p.name for p in params}
    for p in params:
        for opt in p.opts:
            names.setdefault(opt.lstrip("-"), p.name)
    return names


def _other_commands(ctx: typer.Context, key: str) -> list[str]:
    """The sibling commands (of the same app) that take ``key``."""
    parent = ctx.parent
    commands: Mapping[str, Any] = getattr(parent.command, "commands", {}) if parent is not None else {}
    return sorted(name for name, cmd in commands.items() if name != ctx.info_name and key in key_names(cmd))


def _kind(param: TyperOption) -> str:
    """"bool" for a flag, "text" for a string option, "other" for the rest (numbers, paths, choices, lists): from
    typer's type descriptor (typer >= 0.25, its own click) or click's parameter type (earlier typer)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        kind = descriptor.annotation
        return "bool" if kind is bool else "text" if kind is str else "other"
    name = getattr(getattr(param, "type", None), "name", "")
    return "bool" if getattr(param, "is_flag", False) or name == "boolean" else "text" if name == "text" else "other"


def _checked(ctx: typer.Context, param: TyperOption, key: str, value: Any, source: str) -> Any:
    """``value`` as the option converts it, so that a bad value is an error naming the key and the file (not only
    the option); the value itself goes to ``default_map`` unconverted (click converts it there once more)."""
    if value is None:
        return value
    runtime = getattr(param, "get_runtime_param", None)
    try:
        if runtime is not None:  # typer >= 0.25 converts values itself
            runtime().coerce(value, param=param, ctx=ctx)
        else:  # earlier typer: click converts them
            getattr(param, "type_cast_value")(ctx, value)  # noqa: B009 (no such attribute in typer's own click)
    except Exception as exc:  # click's BadParameter (a private class in typer's own click): its one-line message
        message = getattr(exc, "format_message", None)
        if message is None:
            raise
        raise SpecError(str(message()).splitlines()[0], field=key, source=source) from None
    return value


def _value(param: TyperOption, key: str, value: Any, source: str) -> Any:
    """A file value as click takes it from ``default_map``: a list option gets a list, a text option a comma list
    for a YAML list, a flag a boolean; anything else is a one-line error naming the key and the file."""

    def bad(expected: str) -> SpecError:
        return SpecError(f"expected {expected}, got {value!r}", field=key, source=source)

    if value is None:
        return None
    if isinstance(value, Mapping):
        raise bad("a value or a list of values")
    kind = _kind(param)
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if isinstance(value, bool):  # YAML reads yes/no/on/off as booleans: quote them for a text option
        raise bad("a value (quote yes/no/on/off to pass them as text)")
    scalars = value if isinstance(value, list) else [value]
    if any(isinstance(v, list | Mapping | bool) for v in scalars):
        raise bad("a list of plain values")
    if param.multiple:
        return [str(v) for v in scalars]
    if isinstance(value, list):
        if kind != "text":
            raise bad("one value")
        return ",".join(str(v) for v in value)
    return value


def read_run_file(path: Path) -> dict[str, Any]:
    """A run file's mapping (a ``--json`` document's ``inputs``), read by the bounded reader."""
    from fabricsim.inputs import load_spec_file

    data = load_spec_file(path, "run file")
    if isinstance(data, dict) and isinstance(data.get("inputs"), dict):
        data = data["inputs"]
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError("a run file is a mapping of option names to values", source=str(path))
    return {str(k): v for k, v in data.items()}


def resolve_run_file(ctx: typer.Context, path: Path) -> dict[str, Any]:
    """The file's values keyed by the command's parameter names (unknown keys and other commands' keys refused)."""
    source = str(path)
    names = key_names(ctx.command)
    params = {p.name: p for p in _options(ctx.command)}
    command = ctx.info_name or "this command"
    out: dict[str, Any] = {}
    for key, value in read_run_file(path).items():
        name = names.get(key)
        if name is None:
            others = _other_commands(ctx, key)
            if others:
                raise SpecError(f"{key!r} is an option of {', '.join(others)}, not of {command}", source=source)
            close = difflib.get_close_matches(key, sorted(params), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise SpecError(f"unknown option {key!r} of {command}{hint}", source=source)
        if name in out:
            raise SpecError(f"{key!r} sets {name!r} a second time", source=source)
        out[name] = _checked(ctx, params[name], key, _value(params[name], key, value, source), source)
    return out


def _load(ctx: typer.Context, param: typer.CallbackParam, value: Path | None) -> Path | None:
    """The --config callback (eager: before every other option): the file's values become the defaults."""
    if value is None or ctx.resilient_parsing:
        return value
    try:
        values = resolve_run_file(ctx, value)
    except SpecError as exc:
        _fail(f"--config: {exc}")
    ctx.default_map = {**(ctx.default_map or {}), **values}
    return value


ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", is_eager=True, callback=_load, metavar="FILE",
    help="run file (YAML or JSON): option names and values, e.g. from --dump-config or `--json | jq .inputs`; "
    "options given on the command line override it")]
DumpConfigOpt = Annotated[bool, typer.Option(
    "--dump-config", help="print the resolved run (--config file, flags, defaults) as YAML for --config, and exit "
    "without running the model")]


def dump_text(command: str, values: Mapping[str, Any]) -> str:
    """The run as YAML: a comment line, then every option under its parameter name (``--config`` reads it back)."""
    import yaml

    from fabricsim.api import plain

    run = {k: plain(v) for k, v in values.items() if k not in PRESENTATION and k not in OWN}
    body = yaml.safe_dump(run, sort_keys=False, default_flow_style=False, width=1000, allow_unicode=True)
    return f"# fabricsim {command} --config FILE (flags given with it override these values)\n{body}"


def _extra(command: str, names: Iterable[str]) -> list[Parameter]:
    """The two options as keyword parameters for the command's signature (a command with a parameter of the same
    name is a programming error)."""
    if set(OWN) & set(names):
        raise TypeError(f"{command}: a parameter named {' or '.join(OWN)} clashes with --config/--dump-config")
    return [Parameter("config", Parameter.KEYWORD_ONLY, default=None, annotation=ConfigOpt),
            Parameter("dump_config", Parameter.KEYWORD_ONLY, default=False, annotation=DumpConfigOpt)]


def run_config(command: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Give a command ``--config FILE`` and ``--dump-config``: the command itself stays as it is (its ``inputs``
    echo unchanged); the wrapper takes the two options off before calling it."""

    def wrap(func: Callable[P, R]) -> Callable[P, R]:
        sig = signature(func, eval_str=True)  # typer reads Annotated options from the evaluated signature

        @wraps(func)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            kwargs.pop("config", None)
            if kwargs.pop("dump_config", False):
                bound = {**{k: p.default for k, p in sig.parameters.items()}, **kwargs}
                sys.stdout.write(dump_text(command, bound))
                raise typer.Exit(0)
            return func(*args, **kwargs)

        params = list(sig.parameters.values())
        call.__signature__ = sig.replace(parameters=[*params, *_extra(command, sig.parameters)])  # type: ignore[attr-defined]
        return call

    return wrap


__all__ = ["ConfigOpt", "DumpConfigOpt", "dump_text", "key_names", "read_run_file", "resolve_run_file",
           "run_config"]
