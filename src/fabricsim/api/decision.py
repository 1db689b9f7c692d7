"""`size`'s decision table: for one model, token budget and constraints, the best plan of each system searched
(today's generation against the next: GB200 NVL72, Vera Rubin NVL72, a UALink pod) with time, cost and energy and
their bands, capital cost, facility megawatts and racks, and the roadmap parts and estimated figures each row rests
on. An add-on to the search's answer: a row it cannot describe is left out with a note, never a failed search."""

from __future__ import annotations

from typing import Any

from fabricsim.catalog import Catalog, figure_basis, split_partial_id
from fabricsim.errors import SpecError

ROADMAP_BAND = ("the band is the model's error on published runs of shipping hardware; the error of the estimated "
                "and announced figures this row rests on is not in it")


def decision_rows(best_by_system_fabric: list[dict[str, Any]], objective: str,
                  catalog: Catalog) -> list[dict[str, Any]]:
    """The best row of each system (a partly used node, ``gb200-nvl72/64``, counts as its system) by the search's
    objective, fastest first when the objective is time and cheapest first otherwise, each with what it rests on."""
    key = "time_to_train_s" if objective == "time" else "cost_usd"
    best: dict[str, dict[str, Any]] = {}
    for row in best_by_system_fabric:
        value = row.get(key)
        if value is None:
            continue
        system = split_partial_id(str(row["system"]))[0]
        held = best.get(system)
        if held is None or float(value) < float(held[key]):
            best[system] = row
    out = [_decision_row(system, row, catalog) for system, row in best.items()]
    return sorted(out, key=lambda r: float(r[key]))


def _decision_row(system_id: str, row: dict[str, Any], catalog: Catalog) -> dict[str, Any]:
    """One system's line: its best cluster and plan, the figures with their bands, the facility and the basis."""
    from fabricsim.topology import ClusterSpec, resolve_nic, resolve_switch

    system = catalog.system(system_id)
    notes: list[str] = []
    roadmap: list[str] = []
    estimated: list[str] = []
    try:
        switch = resolve_switch(str(row["fabric"]), catalog)
        nic = resolve_nic(ClusterSpec(system=system_id, link=switch.id), system, switch, catalog)
        basis = figure_basis(catalog, system, switch.id, nic.id)
        roadmap, estimated = list(basis.roadmap), list(basis.estimated)
    except SpecError as exc:
        notes.append(f"what it rests on could not be listed: {exc.message}")
    if roadmap:
        notes.append(ROADMAP_BAND)
    hall = row.get("facility") or {}
    return {
        "system": system_id,
        "status": system.status,
        "cluster": row["system"],
        "fabric": row["fabric"],
        "gpus": row["gpus"],
        "nodes": row.get("nodes"),
        "gpu_power_w": row.get("gpu_power_w"),
        "plan": row.get("plan"),
        **{k: row.get(k) for k in ("time_to_train_s", "time_to_train_s_band", "cost_usd", "cost_usd_band",
                                   "energy_mwh", "energy_mwh_band", "capex_usd", "power_w", "goodput")},
        "facility_power_w": hall.get("facility_power_w"),
        "racks": hall.get("racks"),
        "cooling": hall.get("cooling"),
        "roadmap": roadmap,
        "estimated": estimated,
        "notes": notes,
    }
