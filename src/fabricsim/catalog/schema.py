"""Catalog schema versions (``data/schema.yaml``): which fields each version added, and the default or lookup an
entry written before them takes, so an overlay in an older schema loads into today's models."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from fabricsim.errors import SpecError
from fabricsim.inputs import load_packaged_yaml

SCHEMA_FILE = "schema.yaml"
"""The file of the catalog's data package that holds the schema versions (not catalog entries)."""


@dataclass(frozen=True)
class AddedField:
    """A field a schema version added: what an entry written before it takes (``default``, or the id ``lookup``
    finds) and what that means to the model (``fallback``)."""

    name: str
    default: Any
    lookup: dict[str, Any] | None
    fallback: str

    def value_for(self, item: dict[str, Any], tables: dict[str, dict[str, Any]]) -> Any:
        """The value an entry without this field takes: the first id (sorted) of the lookup's category whose
        fields equal ``where`` (``$field``: the entry's own field), None where none does; else the default."""
        if self.lookup is None:
            return self.default
        wanted = {key: item.get(str(value)[1:]) if str(value).startswith("$") else value
                  for key, value in dict(self.lookup["where"]).items()}
        table = tables.get(str(self.lookup["category"]), {})
        found = sorted(entry_id for entry_id, entry in table.items()
                       if all(getattr(entry, key, None) == value for key, value in wanted.items()))
        return found[0] if found else None


@dataclass(frozen=True)
class SchemaVersion:
    """One catalog schema: the commit it was cut at, what changed, the categories it introduced (with their
    fields) and the fields it added to earlier categories."""

    version: str
    commit: str
    date: str
    changes: str
    categories: dict[str, tuple[str, ...]]
    added: dict[str, tuple[AddedField, ...]]


@dataclass(frozen=True)
class Schema:
    """Every catalog schema version, oldest first; ``current`` is the packaged catalog's."""

    current: str
    base_fields: tuple[str, ...]
    versions: tuple[SchemaVersion, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.version for v in self.versions)

    @property
    def oldest(self) -> str:
        return self.versions[0].version

    def check(self, version: Any, source: str) -> str:
        """``version`` as a known version string (YAML may give 0.1 as a number); else a SpecError naming them."""
        text = str(version).strip()
        if text not in self.names:
            raise SpecError(f"unknown catalog schema {text!r}; known: {', '.join(self.names)} (current "
                            f"{self.current})", field="schema", source=source)
        return text

    def added_since(self, version: str) -> dict[str, tuple[AddedField, ...]]:
        """Per category, the fields added to it after ``version`` (a known version)."""
        later = self.versions[self.names.index(version) + 1:]
        out: dict[str, tuple[AddedField, ...]] = {}
        for v in later:
            for category, fields in v.added.items():
                out[category] = out.get(category, ()) + fields
        return out


@lru_cache(maxsize=1)
def catalog_schema() -> Schema:
    """The packaged schema versions (``catalog/data/schema.yaml``)."""
    text = resources.files("fabricsim.catalog.data").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    doc = load_packaged_yaml(text, SCHEMA_FILE)
    versions = tuple(
        SchemaVersion(
            version=str(v["version"]), commit=str(v["commit"]), date=str(v["date"]), changes=str(v["changes"]),
            categories={c: tuple(f) for c, f in (v.get("categories") or {}).items()},
            added={c: tuple(AddedField(name, spec.get("default"), spec.get("lookup"), str(spec["fallback"]))
                            for name, spec in fields.items())
                   for c, fields in (v.get("added") or {}).items()})
        for v in doc["versions"])
    return Schema(current=str(doc["current"]), base_fields=tuple(doc["base_fields"]), versions=versions)


def fill_added_fields(category: str, items: Any, version: str, existing: dict[str, Any],
                      tables: dict[str, dict[str, Any]]) -> tuple[Any, list[str]]:
    """``items`` (an overlay's entries of one category, written in schema ``version``) with each entry whose id is
    new given the fields added since ``version`` that it lacks, and ``category.id.field = value`` for each filled
    with a value other than its stated default (a lookup's find: what the model would not assume by itself).
    Entries whose id ``existing`` holds are left to the field-wise merge; anything not a list of mappings is left
    as is (the loader reports it)."""
    added = catalog_schema().added_since(version).get(category, ())
    if not added or not isinstance(items, list):
        return items, []
    out: list[Any] = []
    filled: list[str] = []
    for item in items:
        if not isinstance(item, dict) or "id" not in item or str(item["id"]) in existing:
            out.append(item)
            continue
        item = dict(item)
        for field in added:
            if field.name not in item:
                item[field.name] = field.value_for(item, tables)
                if item[field.name] != field.default:
                    filled.append(f"{category}.{item['id']}.{field.name} = {item[field.name]}")
        out.append(item)
    return out, filled
