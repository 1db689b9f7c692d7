"""Shared CLI output: the console, the one-line error convention, and the output conventions of every command.

Conventions (follow them in every new command, e.g. `infer`):

* Output format: table commands take ``--format table|json|csv`` (``FormatOpt``) and keep ``--json`` (``JsonOpt``)
  as an alias of ``--format json``; ``output_format`` resolves the two. Print with ``emit``: JSON or CSV on
  stdout and return True, or return False and let the command print its rich tables. Warnings, progress and
  notes go to stderr (``warn``), so stdout stays machine-readable.
* JSON is one object, never a bare list: ``{"inputs": {...}, <payload>}``. ``inputs`` echoes the resolved options
  under their Python parameter names (``command_inputs(locals())`` at the top of the command), so a saved result
  traces back to its command. Lists of results sit under a key (``results``, ``rows``, ``cases``).
* JSON is SI in every field: bytes, seconds, bytes/s, FLOP/s, W, USD, with the unit in the key (``_bytes``,
  ``_s``, ``_bytes_per_s``, ``_flops_per_s``, ``_w``, ``_usd``). ``emit`` applies ``fabricsim.si_json.to_si``,
  which turns the models' nccl-tests units (``*_GBps``, ``*_us``) into SI and renames ``nranks``/``world_size``
  to ``ranks`` (the one rank-count name). NaN and infinity are refused (``allow_nan=False``): use null.
* nccl-tests units (GB/s = 1e9 bytes/s, us) appear only in nccl-tests-style tables (``collective --format
  nccl-tests``, ``bench collective``), which ``bench parse`` reads back.
* CSV: one header row, then the command's main rows with the same SI keys as the JSON (nested values flattened
  as ``parent.child``).
* Tables stay readable at 80 columns: numeric columns via ``num_column`` (never cut or ellipsized), text columns
  fold; commands drop secondary columns when ``console.width`` is narrow rather than cut numbers.
* Every option has help text; flags are ``--x/--no-x`` pairs; the fabric option is ``--ib`` everywhere and takes
  the same names (``fabricsim.api.specs.FABRIC_HELP``).
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from enum import Enum, StrEnum
from functools import wraps
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar, cast

import typer

from fabricsim.api import Result, document, flat, plain
from fabricsim.errors import SpecError
from fabricsim.si_json import to_si

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


class _LazyConsole:
    """The rich console, built on first use: rich's console and table modules stay out of `--help`."""

    _console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            # Wide tables when output is piped (rich would otherwise assume 80 columns), unless COLUMNS is set.
            self._console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200)
        return getattr(self._console, name)


console = cast("Console", _LazyConsole())
P = ParamSpec("P")
R = TypeVar("R")


def print_json(data: Any) -> None:
    """A JSON document already in SI units with its own ``inputs`` key, on stdout (strict: no NaN)."""
    sys.stdout.write(_dumps(plain(data)) + "\n")
class Format(StrEnum):
    """How a table command prints its result."""

    table = "table"
    json = "json"
    csv = "csv"


FormatOpt = Annotated[Format | None, typer.Option("--format", help="table (default), json (SI units) or csv")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON (SI units); same as --format json")]
ReportOpt = Annotated[Path | None, typer.Option("--report", help="write a self-contained HTML design-review report "
                                                "(inputs, answer and band, interactive charts, assumptions and "
                                                "sources; opens offline), e.g. review.html")]
REPORT_SUFFIXES = (".html", ".htm")



def output_format(fmt: Enum | None, as_json: bool) -> str:
    """The format value from --format and the --json alias (they must agree when both are given)."""
    if fmt is not None and as_json and fmt.value != "json":
        fail(f"--json and --format {fmt.value} disagree; give one")
    return "json" if as_json else (str(fmt.value) if fmt is not None else "table")


def command_inputs(params: Mapping[str, Any], *, drop: Sequence[str] = ("as_json", "fmt")) -> dict[str, Any]:
    """The command's options as given (defaults filled in), for the JSON ``inputs`` key."""
    return {k: plain(v) for k, v in params.items()
            if k not in drop and not k.startswith("_") and not callable(v) and not isinstance(v, ModuleType)}


def json_text(payload: Mapping[str, Any], inputs: Mapping[str, Any]) -> str:
    """The document ``{"inputs": ..., **payload}`` in SI units, NaN refused."""
    return _dumps(document(payload, inputs))


def _dumps(doc: Any) -> str:
    """Strict JSON text: a NaN or infinity is refused as bad input (JSON has neither), never printed."""
    try:
        return json.dumps(doc, indent=2, allow_nan=False, default=str)
    except ValueError:
        raise SpecError("the result holds a number that is not finite (NaN or infinity); check the inputs") from None


def emit_json(payload: Mapping[str, Any], inputs: Mapping[str, Any]) -> None:
    """Print one JSON document on stdout (see the module conventions)."""
    sys.stdout.write(json_text(payload, inputs) + "\n")


def emit_csv(rows: Sequence[Mapping[str, Any]]) -> None:
    """Print rows as CSV (SI keys and values as in the JSON; nested keys as parent.child)."""
    table = [flat(to_si(plain(dict(r)))) for r in rows]
    fields = list(dict.fromkeys(k for r in table for k in r))
    writer = csv.DictWriter(sys.stdout, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)


def emit(fmt: str, payload: Mapping[str, Any], inputs: Mapping[str, Any],
         rows: Sequence[Mapping[str, Any]] | None = None) -> bool:
    """JSON or CSV on stdout (True), or False for the command to print its tables."""
    if fmt == "json":
        emit_json(payload, inputs)
        return True
    if fmt == "csv":
        emit_csv(rows if rows is not None else [payload])
        return True
    return False


def new_table(title: str | None = None, **kw: Any) -> Table:
    """A rich Table (rich imported on first use), bold headers by default."""
    from rich.table import Table

    kw.setdefault("header_style", "bold")
    return Table(title=title, **kw)


def num_column(table: Table, header: str) -> None:
    """A numeric column: right-aligned, kept on one line while text columns shrink, folded (never cut) at worst."""
    table.add_column(header, justify="right", no_wrap=True, overflow="fold", min_width=len(header.split()[0]))


def text_column(table: Table, header: str, **kw: Any) -> None:
    """A text column that folds rather than ellipsizes on a narrow console."""
    table.add_column(header, overflow="fold", **kw)


def fit_columns(cells: Mapping[str, Sequence[str]], width: int, keep: Sequence[str] = (),
                drop_first: Sequence[str] = ()) -> list[str]:
    """The headers of a table that fit in `width` columns with no cell folded: columns in `drop_first` go first,
    then the rightmost; those in `keep` stay. Widths are measured on the rendered text (markup stripped)."""
    from rich.text import Text

    def need(header: str) -> int:
        texts = [header, *cells[header]]
        return max(max(Text.from_markup(line).cell_len for line in t.splitlines() or [""]) for t in texts) + 3

    shown = list(cells)
    order = [h for h in drop_first if h in cells] + [h for h in reversed(list(cells)) if h not in drop_first]
    for header in order:
        if sum(need(h) for h in shown) + 1 <= width:
            break
        if header not in keep:
            shown.remove(header)
    return shown


def narrow() -> bool:
    """Whether the console is too narrow for the secondary columns (under 120 columns)."""
    return console.width < 120


def warn(message: str) -> None:
    """One 'warning:' line on stderr."""
    sys.stderr.write(f"warning: {message}\n")


def fail(message: str) -> None:
    """One line on stderr and exit code 2: the CLI's answer to bad input."""
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(code=2)


def spec_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn SpecError from a command into a one-line message and exit code 2, never a traceback."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from pydantic import ValidationError  # here, not at import: `--help` stays light

        try:
            return func(*args, **kwargs)
        except SpecError as exc:
            fail(str(exc))
            raise  # unreachable: fail() raises
        except ValidationError as exc:  # a model validated outside a from_data(): the same one line
            from fabricsim.errors import spec_error

            fail(str(spec_error(exc)))
            raise

    return wrapper


def api_arguments(func: Callable[..., Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The command's options that the API function ``func`` takes (the CLI's presentation options left out)."""
    import inspect

    names = inspect.signature(func).parameters
    return {k: v for k, v in params.items() if k in names}


def write_command_report(path: Path | None, result: Result, inputs: Mapping[str, Any]) -> None:
    """The --report file of a command's result (nothing without --report); its path on stderr."""
    if path is None:
        return
    from fabricsim.report import write_report

    write_report(path, result.command, document(result.data, inputs), **result.report_extras())
    sys.stderr.write(f"report: {path}\n")


def model_import_note(result: Result) -> None:
    """The one line of a Hugging Face config's fields fabricsim does not model, on stderr (JSON: "model_import")."""
    imported = result.data.get("model_import")
    if imported and imported["ignored"]:
        sys.stderr.write(f"note: {imported['source']} ({imported['architecture']}): ignored: "
                         f"{', '.join(imported['ignored'])}\n")
