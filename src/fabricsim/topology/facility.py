"""The facility a cluster takes: its racks, the power they draw and the floor they need in a hall of a cooling
class (`catalog.CoolingClass`). Compute racks hold servers up to the rack's usable units and power limit
(``min(rack_units // system rack_units, rack power limit // node power)``); a rack-scale system (NVL72) is one rack
per node (a joined NVLink domain, ``id@D``, one per ``nvlink_rack_gpus``) and must fit the class's power limit. Network
racks (fabric switches, storage servers) are not counted: the catalog has no rack units for switches, so their floor
would be a guess; their power is in the IT power (the bill of materials). Facility power = IT power x PUE."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fabricsim.catalog import GPU, Catalog, CoolingClass, System, is_switch_system

NOT_COUNTED = ("network racks (fabric switches, storage servers) are not counted in racks or floor: the catalog has "
               "no rack units for them; their power is in the IT power")


@dataclass(frozen=True)
class Facility:
    """A cluster's racks, power and floor in a hall of one cooling class (SI: W, m^2); ``hostable`` False with
    ``reason`` where the class cannot host the system (then racks and floor are None)."""

    cooling: str
    pue: float
    it_power_w: float | None
    facility_power_w: float | None
    hostable: bool
    reason: str | None
    racks: int | None
    nodes_per_rack: float | None
    rack_power_w: float | None
    floor_m2: float | None
    notes: tuple[str, ...] = ()

    @property
    def racks_per_mw(self) -> float | None:
        """Compute racks per MW of facility power."""
        if self.racks is None or not self.facility_power_w:
            return None
        return self.racks / (self.facility_power_w / 1e6)

    def to_json(self) -> dict[str, Any]:
        return {"cooling": self.cooling, "pue": self.pue, "it_power_w": self.it_power_w,
                "facility_power_w": self.facility_power_w, "hostable": self.hostable, "reason": self.reason,
                "racks": self.racks, "nodes_per_rack": self.nodes_per_rack, "rack_power_w": self.rack_power_w,
                "racks_per_mw": self.racks_per_mw, "floor_m2": self.floor_m2, "notes": list(self.notes)}


def racks_per_node(system: System, gpu: GPU) -> int | None:
    """Racks one node of ``system`` is: 1 for a rack-scale NVLink system (NVL72), its racks for a joined NVLink
    domain (``id@D``); None for a server that racks hold several of."""
    if system.nvlink_rack_gpus is not None:
        return max(1, system.gpus_per_node // system.nvlink_rack_gpus)
    return 1 if is_switch_system(system, gpu) else None


def why_not_hosted(system: System, gpu: GPU, cooling: CoolingClass) -> str | None:
    """Why a hall of ``cooling`` cannot host ``system`` (its cooling need; a rack-scale system's rack power above the
    class's limit; a server above it alone); None when it can."""
    racks = racks_per_node(system, gpu)
    rack_power = None
    if system.power_w is not None:
        rack_power = system.power_w / racks if racks is not None else system.power_w
    return cooling.why_not_hosted(system.cooling, system.id, rack_power)


def hall_for(catalog: Catalog, system: System) -> CoolingClass:
    """The hall a system's figures are given in when no cooling class is named: the first catalog class that
    hosts its cooling need at its rack power (a Vera Rubin rack needs the high-density liquid hall), else the class
    named by its need (whose block then says why it cannot host it)."""
    gpu = catalog.gpu(system.gpu)
    for hall in catalog.cooling.values():
        if why_not_hosted(system, gpu, hall) is None:
            return hall
    return catalog.cooling_class(system.cooling)


def facility(system: System, gpu: GPU, nodes: int, it_power_w: float | None, cooling: CoolingClass,
             pue: float | None = None) -> Facility:
    """The facility ``nodes`` nodes of ``system`` (IT power ``it_power_w``: the bill of materials', storage and
    spares in) take in a hall of ``cooling`` at ``pue`` (None: the class's PUE)."""
    pue = cooling.pue.value if pue is None else pue
    facility_w = None if it_power_w is None else it_power_w * pue
    notes = [NOT_COUNTED]
    reason = why_not_hosted(system, gpu, cooling)
    if reason is not None:
        return Facility(cooling.id, pue, it_power_w, facility_w, False, reason, None, None, None, None, tuple(notes))
    limit = cooling.rack_power_w.value
    per_node = racks_per_node(system, gpu)
    if per_node is not None:
        racks = nodes * per_node
        return _done(cooling, pue, it_power_w, facility_w, racks, 1 / per_node,
                     None if system.power_w is None else system.power_w / per_node, notes)
    units = cooling.rack_units.value
    by_units = units // system.rack_units if system.rack_units else None
    by_power = int(limit // system.power_w) if system.power_w else None
    if by_units is None and by_power is None:
        notes.append(f"{system.id} has neither rack units nor power in the catalog: racks not counted")
        return Facility(cooling.id, pue, it_power_w, facility_w, True, None, None, None, None, None, tuple(notes))
    if by_units is None or by_power is None:
        notes.append(f"{system.id} has no {'rack units' if by_units is None else 'power'} in the catalog: racks "
                     f"from its {'power' if by_units is None else 'rack units'} alone")
    per_rack = min(v for v in (by_units, by_power) if v is not None)
    if per_rack < 1:
        reason = (f"a {system.id} server takes {system.rack_units} U, more than the {units} U of a rack of cooling "
                  f"class {cooling.id!r}")
        return Facility(cooling.id, pue, it_power_w, facility_w, False, reason, None, None, None, None, tuple(notes))
    bound = "power" if by_power is not None and (by_units is None or by_power < by_units) else "rack units"
    notes.append(f"{per_rack} {system.id} per rack, bound by the rack's {bound}")
    racks = math.ceil(nodes / per_rack)
    return _done(cooling, pue, it_power_w, facility_w, racks, float(per_rack),
                 None if system.power_w is None else min(nodes, per_rack) * system.power_w, notes)


def _done(cooling: CoolingClass, pue: float, it_power_w: float | None, facility_w: float | None, racks: int,
          per_rack: float, rack_power_w: float | None, notes: list[str]) -> Facility:
    return Facility(cooling.id, pue, it_power_w, facility_w, True, None, racks, per_rack, rack_power_w,
                    racks * cooling.floor_m2_per_rack.value, tuple(notes))
