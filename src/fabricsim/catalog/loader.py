"""Load the packaged catalog YAML (plus optional overlays) into validated models."""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from fabricsim.catalog.catalog import CATEGORY_MODELS, Catalog
from fabricsim.catalog.schema import SCHEMA_FILE, catalog_schema, fill_added_fields
from fabricsim.errors import SpecError
from fabricsim.inputs import load_packaged_yaml, load_spec_file, load_yaml, read_text

M = TypeVar("M", bound=BaseModel)

DATA_PACKAGE = "fabricsim.catalog.data"


def read_yaml(text: str, source: str) -> Any:
    """Parse YAML text safely (duplicate keys, deep nesting refused), errors as a SpecError naming the file."""
    return load_yaml(text, source)


def read_packaged_yaml(package: str, filename: str) -> Any:
    """Parse a YAML file shipped inside a ``fabricsim`` data package (``fabricsim.model.data``, ...)."""
    return load_packaged_yaml(resources.files(package).joinpath(filename).read_text(encoding="utf-8"), filename)


def read_spec_file(path: str | Path, what: str = "file") -> Any:
    """Parse a user's YAML or JSON spec file (by suffix); a missing or malformed file is a SpecError naming it."""
    return load_spec_file(path, what)


def validation_message(exc: ValidationError) -> tuple[str, str]:
    """The first pydantic error as (dotted field path, message)."""
    err = exc.errors()[0]
    path = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        msg = "required field is missing"
    elif err["type"] == "extra_forbidden":
        msg = "unknown field"
    return path, msg


def merged_entry(base: BaseModel, overlay: dict[str, Any]) -> dict[str, Any]:
    """A partial overlay entry over the catalog entry of the same id: the overlay's fields replace the entry's,
    mappings merged key by key (``efficiency: {value: 0.9}`` keeps the figure's source)."""

    def merge(old: Any, new: Any) -> Any:
        if isinstance(old, dict) and isinstance(new, dict):
            return {**old, **{k: merge(old.get(k), v) for k, v in new.items()}}
        return new

    result: dict[str, Any] = merge(base.model_dump(), overlay)
    return result


def missing_fields(exc: ValidationError) -> list[str]:
    """The dotted paths of every required field a ValidationError says is missing."""
    return [".".join(str(p) for p in e["loc"]) for e in exc.errors() if e["type"] == "missing"]


def parse_entries(model: type[M], items: Any, source: str, category: str,
                  existing: dict[str, Any] | None = None) -> dict[str, M]:
    """Validate a list of mappings into models keyed by id; errors name the file, entry and field. An entry whose
    id ``existing`` already holds (a catalog entry an overlay changes) may give only the fields it changes: they
    are merged over that entry and the result validated; a new id must give every required field."""
    if not isinstance(items, list):
        raise SpecError("expected a list of entries", field=category, source=source)
    out: dict[str, M] = {}
    for index, item in enumerate(items):
        label = f"{category}[{index}]"
        if isinstance(item, dict) and "id" in item:
            label += f" ({item['id']})"
        known = existing.get(str(item["id"])) if existing and isinstance(item, dict) and "id" in item else None
        try:
            entry = model.model_validate(merged_entry(known, item) if isinstance(known, BaseModel) else item)
        except ValidationError as exc:
            missing = missing_fields(exc)
            if known is None and len(missing) > 1:
                raise SpecError(f"a new entry needs every required field; missing: {', '.join(missing)} (an entry "
                                "whose id the catalog has may give only the fields it changes)", field=label,
                                source=source) from None
            path, msg = validation_message(exc)
            raise SpecError(msg, field=f"{label}.{path}" if path else label, source=source) from None
        entry_id = str(getattr(entry, "id"))  # noqa: B009 - every catalog model has an id
        if entry_id in out:
            raise SpecError(f"duplicate id {entry_id!r}", field=label, source=source)
        out[entry_id] = entry
    return out


NOT_CATALOG_KEYS = frozenset({"measurements", "schema"})
"""Keys an overlay may carry beside catalog entries: ``measurements``, the runs a calibration was fitted on (the
error model reads them to narrow its bands; the catalog ignores them), and ``schema``, the catalog schema version
it is written in (`catalog.schema`)."""


def load_documents(documents: list[tuple[str, Any]], base: Catalog | None = None, *,
                   default_schema: str | None = None, filled: list[str] | None = None) -> Catalog:
    """Build a catalog from parsed YAML documents; entries in later documents replace earlier ones by id. A
    document in an older schema than the current one (its ``schema:`` key; without one ``default_schema``, else
    the oldest) has the fields added since given to its entries of new ids (`catalog.schema`); those that took a
    value other than their stated default are appended to ``filled`` as ``source: category.id.field = value``."""
    schema = catalog_schema()
    merged: dict[str, dict[str, Any]] = {c: {} for c in CATEGORY_MODELS}
    if base is not None:
        for category in CATEGORY_MODELS:
            merged[category].update(getattr(base, category))
    for source, doc in documents:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise SpecError("expected a mapping of categories", source=source)
        version = schema.check(doc.get("schema", default_schema or schema.oldest), source)
        for category, items in doc.items():
            if category in NOT_CATALOG_KEYS:
                continue
            if category not in CATEGORY_MODELS:
                allowed = ", ".join(CATEGORY_MODELS)
                raise SpecError(f"unknown category; allowed: {allowed}", field=str(category), source=source)
            if version != schema.current:
                items, names = fill_added_fields(category, items, version, merged[category], merged)
                if filled is not None:
                    filled.extend(f"{source}: {name}" for name in names)
            merged[category].update(parse_entries(CATEGORY_MODELS[category], items, source, category,
                                                  existing=merged[category]))
    catalog = Catalog(**merged)
    catalog.check_references()
    return catalog


def packaged_documents() -> list[tuple[str, Any]]:
    """The catalog YAML files shipped inside the package, in name order."""
    data = resources.files(DATA_PACKAGE)
    docs = []
    for item in sorted(data.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".yaml") and item.name != SCHEMA_FILE:
            docs.append((item.name, load_packaged_yaml(item.read_text(encoding="utf-8"), item.name)))
    return docs


@lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    """The packaged catalog (cached: it is immutable), in the current schema."""
    return load_documents(packaged_documents(), default_schema=catalog_schema().current)


SCHEMA_NOTES_SHOWN: set[str] = set()
"""The older-schema notes already written on stderr in this process (a run loads its overlays more than once)."""


def load_catalog(*overlays: str | Path) -> Catalog:
    """The packaged catalog with overlay YAML files applied on top (entries replaced by id). An overlay in an
    older schema whose new entries lack fields added since is completed from ``schema.yaml``; where that took a
    value other than a field's stated default (a lookup's find) it says so in one ``note:`` line on stderr, once
    per overlay and process."""
    if not overlays:
        return default_catalog()
    docs = []
    for path in overlays:
        docs.append((str(path), load_yaml(read_text(path), str(path))))
    filled: list[str] = []
    catalog = load_documents(docs, base=default_catalog(), filled=filled)
    for source, doc in docs:
        names = [f.removeprefix(f"{source}: ") for f in filled if f.startswith(f"{source}: ")]
        if names:
            note = schema_note(source, doc, names)
            if note not in SCHEMA_NOTES_SHOWN:
                SCHEMA_NOTES_SHOWN.add(note)
                sys.stderr.write(f"note: {note}\n")
    return catalog


def schema_note(source: str, doc: Any, names: list[str]) -> str:
    """One line: which older schema ``source`` is written in and the values its new entries took for fields
    added since (``category.id.field = value``, from ``schema.yaml``)."""
    schema = catalog_schema()
    given = isinstance(doc, dict) and "schema" in doc
    version = schema.check(doc["schema"], source) if given else schema.oldest
    return (f"{source}: catalog schema {version}{'' if given else ' (no schema: key)'}, older than "
            f"{schema.current}: its new entries take the fields added since as catalog/data/schema.yaml says: "
            f"{'; '.join(names)}")
