"""Cooling classes of a data hall: how much power one rack may draw, the PUE the class runs at, the floor a rack
takes (its share of the aisles included) and the rack units it offers; which systems it can host (a liquid hall
hosts air-cooled servers, an air hall no liquid-cooled rack)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from fabricsim.catalog.models import Count, Entry, SourcedFigure

CoolingNeed = Literal["air", "liquid"]
"""What a system needs to be cooled by: ``air`` (fans through the chassis) or ``liquid`` (direct-to-chip cold
plates fed by a coolant distribution unit)."""


class CoolingClass(Entry):
    """A data hall's cooling class (`fabricsim catalog cooling`)."""

    rack_power_w: SourcedFigure = Field(description="the largest power one rack may draw and be cooled (W)")
    pue: SourcedFigure = Field(description="power usage effectiveness (facility power / IT power) of the class")
    floor_m2_per_rack: SourcedFigure = Field(description="floor area per rack (m^2), its share of the aisles and "
                                             "in-row cooling included")
    rack_units: Count = Field(description="usable rack units (U) of one rack")
    hosts: tuple[CoolingNeed, ...] = Field(min_length=1, description="the cooling needs of the systems it can host")

    @model_validator(mode="after")
    def _figures_in_range(self) -> CoolingClass:
        if self.rack_power_w.value <= 0 or self.floor_m2_per_rack.value <= 0:
            raise ValueError("rack_power_w and floor_m2_per_rack must be positive")
        if not 1.0 <= self.pue.value <= 5.0:
            raise ValueError(f"a PUE is between 1 and 5, got {self.pue.value:g}")
        return self

    def why_not_hosted(self, need: str, system_id: str, rack_power_w: float | None = None) -> str | None:
        """Why this class cannot host a system needing ``need`` whose racks draw ``rack_power_w`` (None: not
        checked); None when it can."""
        if need not in self.hosts:
            return (f"{system_id} needs {need} cooling, which a hall of cooling class {self.id!r} cannot give (it "
                    f"hosts {', '.join(self.hosts)} systems)")
        if rack_power_w is not None and rack_power_w > self.rack_power_w.value * (1 + 1e-9):
            return (f"a {system_id} rack draws {rack_power_w / 1e3:.1f} kW, above the {self.rack_power_w.value / 1e3:g}"
                    f" kW a rack of cooling class {self.id!r} can take")
        return None
