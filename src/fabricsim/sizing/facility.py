"""The facility block of each listed `size` result (`topology.facility`): the racks, facility power and floor its
cluster takes in a hall of the search's cooling class (``--cooling``; without one, of the cooling its system needs,
at the search's PUE). An add-on: a figure it cannot give is a note in the block, never a failed search."""

from __future__ import annotations

from typing import Any

from fabricsim.catalog import Catalog
from fabricsim.errors import SpecError
from fabricsim.sizing.power_points import point_catalog
from fabricsim.sizing.spec import SizingSpec
from fabricsim.topology import facility, hall_for

NO_COOLING = ("no --cooling: racks and floor in a hall of the cooling the system needs, at --pue; no rack power "
              "check constrained the search")


def row_facility(spec: SizingSpec, catalog: Catalog, row: dict[str, Any]) -> dict[str, Any]:
    """The facility block of one result row (its system at the row's GPU power, its nodes, its BOM power)."""
    try:
        sid = str(row["system"])
        watts = row.get("gpu_power_w")
        base = catalog.gpu(catalog.system(sid).gpu)
        if watts is not None and abs(float(watts) - base.tdp_w) > 1e-6 * base.tdp_w:
            catalog = point_catalog(catalog, sid, float(watts))
        system = catalog.system(sid)
        hall = catalog.cooling_class(spec.cooling) if spec.cooling else hall_for(catalog, system)
        power = row.get("power_w")
        block = facility(system, catalog.gpu(system.gpu), int(row["nodes"]), None if power is None else float(power),
                         hall, spec.pue).to_json()
    except SpecError as exc:
        return {"error": exc.message}
    if spec.cooling is None:
        block["notes"] = [NO_COOLING, *block["notes"]]
    return block


def with_facility(spec: SizingSpec, catalog: Catalog, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Result rows each with its ``facility`` block."""
    return [{**row, "facility": row_facility(spec, catalog, row)} for row in rows]
