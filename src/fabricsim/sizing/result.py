"""What a search returns: ranked plans, the Pareto frontier, the best plan per system x fabric and the counts,
as JSON entries with every field (SI units; None where a price or power is unknown)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fabricsim.sizing.defaults import sizing_defaults
from fabricsim.sizing.spec import SizingSpec

if TYPE_CHECKING:
    import pandas as pd

PLAN_FIELDS = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "mbs", "recompute", "zero", "precision", "flash_attn", "gbs",
               "seq")
METRICS = ("tokens_per_s", "time_to_train_s", "cost_usd", "usd_per_million_tokens", "energy_mwh", "mfu",
           "memory_per_gpu_bytes", "bottleneck")


def _plain(value: Any) -> Any:
    """numpy scalars to Python; NaN to None."""
    item = value.item() if hasattr(value, "item") else value
    if isinstance(item, float) and math.isnan(item):
        return None
    return item


def entry(row: Mapping[Any, Any], unpriced: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """One result as JSON: the cluster, the plan, its metrics, and the catalog figures it lacks (``unpriced``:
    why a cost, energy or power is None)."""
    return {
        "system": row["system"], "fabric": row["fabric"],
        "oversubscription": _plain(row["oversubscription"]), "gpus": _plain(row["gpus"]),
        "nodes": _plain(row["nodes"]),
        "plan": {k: _plain(row[k]) for k in PLAN_FIELDS},
        **{k: _plain(row[k]) for k in METRICS},
        "memory_headroom_bytes": _plain(row["memory_capacity_bytes"] - row["memory_per_gpu_bytes"]),
        "capex_usd": _plain(row["capex_usd"]), "power_w": _plain(row["power_w"]),
        "unpriced": list(unpriced),
    }


def entries(frame: pd.DataFrame, limit: int | None = None,
            missing: Mapping[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """Rows as JSON entries; ``missing`` (chunk -> catalog figures it lacks) fills each entry's ``unpriced``."""
    rows = frame if limit is None else frame.head(limit)
    known = missing or {}
    return [entry(r, known.get(str(r.get("chunk")), ())) for r in rows.to_dict("records")]


@dataclass
class SizingResult:
    """The outcome of a search; ``note`` says why nothing qualified when ``ranked`` is empty."""

    spec: SizingSpec
    frame: pd.DataFrame  # every evaluated plan that fits in memory
    ranked: pd.DataFrame  # those meeting the constraints, best first
    pareto: pd.DataFrame
    best_by_system_fabric: pd.DataFrame
    plans_evaluated: int
    plans_pruned: int
    wall_s: float
    errors: dict[str, str] = field(default_factory=dict)  # chunk -> why its cluster cannot be built
    note: str | None = None
    complete: bool = True
    candidates: list[dict[str, Any]] = field(default_factory=list)  # per system x fabric: best plan or reasons
    missing: dict[str, list[str]] = field(default_factory=dict)  # chunk -> catalog prices or powers it lacks

    @classmethod
    def interrupted(cls, spec: SizingSpec) -> SizingResult:
        import pandas as pd

        empty = pd.DataFrame()
        return cls(spec, empty, empty, empty, empty, 0, 0, 0.0, {}, "interrupted", complete=False)

    def to_json(self) -> dict[str, Any]:
        defaults = sizing_defaults()
        spec = self.spec
        return {
            "model": spec.model if isinstance(spec.model, str) else spec.model.get("name", "model"),
            "tokens": spec.tokens,
            "objective": spec.objective,
            "constraints": {"deadline_s": spec.deadline_s, "budget_usd": spec.budget_usd,
                            "power_cap_w": spec.power_cap_w},
            "results": entries(self.ranked, spec.top, self.missing),
            "pareto": entries(self.pareto, None, self.missing),
            "best_by_system_fabric": entries(self.best_by_system_fabric, None, self.missing),
            "candidates": self.candidates,
            "plans_evaluated": self.plans_evaluated,
            "plans_pruned": self.plans_pruned,
            "plans_feasible": len(self.ranked),
            "wall_s": self.wall_s,
            "note": self.note,
            "unbuildable_clusters": dict(self.errors),
            "assumptions": {
                "cost": ("rental: GPUs x hours x gpu_hour_usd" if spec.gpu_hour_usd is not None else
                         "capex from the bill of materials x time / amortize + energy x kwh_usd"),
                "energy": "BOM power (nodes, switches, optics) x time x PUE",
                "amortize_s": spec.amortize_s, "gpu_hour_usd": spec.gpu_hour_usd, "pue": spec.pue,
                "kwh_usd": spec.kwh_usd,
                "defaults": {k: {"value": d.value, "source": d.source} for k, d in defaults.items()},
            },
        }
