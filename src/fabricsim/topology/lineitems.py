"""A bill's line items: one catalog entry, its role and count, its dated unit price and power; and the cable
class a link needs (shared by the compute fabric's bill and the storage network's)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from fabricsim import units
from fabricsim.catalog import Cable, Catalog, Priced
from fabricsim.errors import SpecError


class LineItem(BaseModel):
    """One row of a bill: a catalog entry, its role and count, and its dated unit figures."""

    model_config = ConfigDict(frozen=True)

    item: str
    category: str
    role: str
    count: int
    unit_price_usd: float | None
    unit_power_w: float | None
    price_date: str | None
    verified: bool

    @property
    def price_usd(self) -> float | None:
        return None if self.unit_price_usd is None else self.unit_price_usd * self.count

    @property
    def power_w(self) -> float | None:
        return None if self.unit_power_w is None else self.unit_power_w * self.count


def cable_class(catalog: Catalog, medium: str, bytes_per_s: float) -> Cable:
    """The slowest catalog cable of a medium at least as fast as the link (then the cheapest, then by id)."""
    fits = [c for c in catalog.cables.values()
            if c.medium == medium and c.bytes_per_s is not None and c.bytes_per_s >= bytes_per_s * (1 - 1e-9)]
    if not fits:
        raise SpecError(f"no catalog {medium} cable carries {units.format_rate(bytes_per_s, bits=True)}; "
                        f"cables: {', '.join(sorted(catalog.cables))}", field="node_cable")
    return min(fits, key=lambda c: (c.bytes_per_s or 0.0, c.price_usd if c.price_usd is not None else float("inf"),
                                    c.id))


def line_item(entry: Priced, category: str, role: str, count: int) -> LineItem:
    return LineItem(item=entry.id, category=category, role=role, count=count, unit_price_usd=entry.price_usd,
                    unit_power_w=entry.power_w, price_date=entry.price_date, verified=entry.verified)
