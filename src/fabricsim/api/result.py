"""The result every API call returns: the command's JSON document (``to_dict``, the same as the CLI's ``--json``),
its main rows as a table (``to_frame``), a short repr, an HTML repr for notebooks and the design-review report."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fabricsim.errors import SpecError
from fabricsim.si_json import to_si

if TYPE_CHECKING:
    import pandas as pd

    from fabricsim.model import HFImport


def plain(value: Any) -> Any:
    """A JSON-ready value: paths and enums as strings, tuples as lists, mapping keys as strings."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def document(payload: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``{"inputs": ..., **payload}`` with the payload in SI units: the one JSON document of every command."""
    return {"inputs": plain(dict(inputs)), **to_si(plain(dict(payload)))}


def flat(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A row with nested mappings flattened as ``parent.child`` and lists as JSON text (one cell each)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out |= flat(value, name + ".")
        elif isinstance(value, list | tuple):
            out[name] = json.dumps(value, default=str)
        else:
            out[name] = value
    return out


class LazyDocument(Mapping[str, Any]):
    """A result's JSON payload built on first access (``build``: the main answer is ready before its add-ons are):
    `fabricsim.train` in a sweep costs the prediction, not the bands, goodput and launch line nobody read."""

    __slots__ = ("_build", "_data")

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self._build: Callable[[], dict[str, Any]] | None = build
        self._data: dict[str, Any] | None = None

    def resolved(self) -> dict[str, Any]:
        """The payload (built now if it was not yet)."""
        if self._data is None:
            assert self._build is not None
            self._data, self._build = self._build(), None
        return self._data

    def __getitem__(self, key: str) -> Any:
        return self.resolved()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.resolved())

    def __len__(self) -> int:
        return len(self.resolved())


@dataclass(frozen=True, repr=False)
class Result:
    """One command's answer. ``data`` is the payload the CLI prints (before SI conversion), ``rows`` its main table
    (None: the payload is one row); subclasses add typed attributes for the objects behind them."""

    command: ClassVar[str] = ""
    headline_keys: ClassVar[tuple[str, ...]] = ()

    inputs: Mapping[str, Any]
    data: Mapping[str, Any]
    rows: Sequence[Mapping[str, Any]] | None = field(default=None, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document `fabricsim <command> --json` prints for the same inputs (SI units)."""
        return json.loads(json.dumps(document(self.data, self.inputs), allow_nan=False, default=str))  # type: ignore[no-any-return]

    def to_frame(self) -> pd.DataFrame:
        """The main rows as a pandas DataFrame, SI keys as in the JSON (nested keys as ``parent.child``)."""
        import pandas as pd

        rows = self.rows if self.rows is not None else [self.data]
        return pd.DataFrame([flat(to_si(plain(dict(r)))) for r in rows])

    def headline(self) -> dict[str, Any]:
        """The few figures that answer the question (SI), for the repr."""
        doc = to_si(plain(dict(self.data)))
        return {k: doc[k] for k in self.headline_keys if k in doc}

    def report(self, path: str | Path) -> Path:
        """Write the self-contained design-review HTML report of this result; returns its path. A path whose folder
        is missing (or not writable) is a SpecError naming it, as `--report` is."""
        from fabricsim.inputs import check_output_path
        from fabricsim.report import write_report

        out = check_output_path(path, "report")
        if out is None:
            raise SpecError("give the report's file name", field="report")
        return write_report(out, self.command, self.to_dict(), **self.report_extras())

    def report_extras(self) -> dict[str, Any]:
        """Keyword arguments of the report beyond the document (a topology's drawing)."""
        return {}

    def __repr__(self) -> str:
        figures = ", ".join(f"{k}={_short(v)}" for k, v in self.headline().items())
        return f"{type(self).__name__}({figures})"

    def __rich__(self) -> Any:
        """A rich table of the headline figures (``rich.print(result)``)."""
        from rich.table import Table

        table = Table(title=f"fabricsim {self.command}", show_header=False)
        for key, value in self.headline().items():
            table.add_row(key, _short(value))
        return table

    def _repr_html_(self) -> str:
        """A small table of the headline figures, for Jupyter."""
        from html import escape

        cells = "".join(f"<tr><th style='text-align:left'>{escape(k)}</th><td>{escape(_short(v))}</td></tr>"
                        for k, v in self.headline().items())
        return f"<table><caption>fabricsim {escape(self.command)}</caption>{cells}</table>"


def _short(value: Any) -> str:
    """A figure in four significant digits; other values as they are."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def model_import_fields(imported: HFImport | None) -> dict[str, Any]:
    """``{"model_import": {architecture, source, ignored}}`` when ``--model`` was a Hugging Face config, so a result
    says which of its fields fabricsim did not model; nothing for a preset or a fabricsim spec file."""
    if imported is None:
        return {}
    return {"model_import": {"architecture": imported.architecture, "source": imported.source,
                             "ignored": list(imported.ignored)}}
