"""Catalogs with a case's `overlay` applied: entries replaced or added by id on top of the run's catalog."""

from __future__ import annotations

from typing import Any

from fabricsim.catalog import Catalog, load_documents


class OverlayCatalogs:
    """One base catalog and the overlaid catalogs built from it, cached per overlay object (cases sharing a
    YAML anchor share one catalog)."""

    def __init__(self, base: Catalog) -> None:
        self.base = base
        self._built: dict[int, tuple[Any, Catalog]] = {}

    def for_case(self, case: dict[str, Any]) -> Catalog:
        """The base catalog, or it with the case's overlay applied."""
        overlay = case.get("overlay")
        if not overlay:
            return self.base
        key = id(overlay)
        if key not in self._built:  # the overlay object is kept alongside, so its id cannot be reused
            catalog = load_documents([(f"overlay of case {case.get('id')}", overlay)], base=self.base)
            self._built[key] = (overlay, catalog)
        return self._built[key][1]
