"""What a search returns: ranked plans, the Pareto frontier, the best plan per system x fabric and the counts,
as JSON entries with every field (SI units; None where a price or power is unknown)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fabricsim.sizing.defaults import sizing_defaults
from fabricsim.sizing.rank import secondary_text
from fabricsim.sizing.spec import SizingSpec

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from fabricsim.catalog import Catalog

PLAN_FIELDS = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "mbs", "recompute", "zero", "precision", "flash_attn", "gbs",
               "seq")
METRICS = ("tokens_per_s", "time_to_train_s", "goodput", "cost_usd", "usd_per_million_tokens", "energy_mwh", "mfu",
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
        **({"gpu_power_w": _plain(row["gpu_power_w"])} if "gpu_power_w" in row else {}),
        "plan": {k: _plain(row[k]) for k in PLAN_FIELDS},
        **{k: _plain(row[k]) for k in METRICS},
        "memory_headroom_bytes": _plain(row["memory_capacity_bytes"] - row["memory_per_gpu_bytes"]),
        "capex_usd": _plain(row["capex_usd"]), "power_w": _plain(row["power_w"]),
        **{k: _plain(row[k]) for k in ("storage", "storage_servers", "spare_gpus") if k in row},
        "unpriced": list(unpriced),
    }


def entries(frame: pd.DataFrame, limit: int | None = None,
            missing: Mapping[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """Rows as JSON entries; ``missing`` (chunk -> catalog figures it lacks) fills each entry's ``unpriced``."""
    rows = frame if limit is None else frame.head(limit)
    known = missing or {}
    return [entry(r, known.get(str(r.get("chunk")), ())) for r in rows.to_dict("records")]


def with_bands(rows: list[dict[str, Any]], moe: bool, catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """Entries with the error bands of their time to train, throughput, cost and energy (cost and energy scale with
    the time): the band of a training step like each row's, from comparable published runs."""
    from fabricsim.catalog import default_catalog
    from fabricsim.validation import band_fields, bands, training_regime

    catalog = catalog or default_catalog()
    out = []
    for row in rows:
        gpu = catalog.gpu(catalog.system(str(row["system"])).gpu)
        regime = training_regime(moe, gpu, str(row["plan"]["precision"]), int(row["gpus"]),
                                 int(row["plan"]["zero"]) >= 3)
        values = {k: (float(row[k]), k != "tokens_per_s") for k in ("time_to_train_s", "tokens_per_s", "cost_usd",
                                                                     "energy_mwh") if row.get(k) is not None}
        out.append({**row, **band_fields(bands(values, regime))})
    return out


@dataclass(frozen=True)
class Ties:
    """The ranked plans within the model's error of the best (``mask`` over the ranked rows), the position of the
    one the secondary objective picks, and the comparison band used (JSON)."""

    mask: np.ndarray
    pick: int
    band: dict[str, object]
    objective: str = "time"

    def to_json(self, recommended: dict[str, Any]) -> dict[str, Any]:
        return {"count": int(self.mask.sum()), "comparison_band": self.band,
                "secondary": secondary_text(self.objective),
                "recommended": recommended,
                "rule": "plans whose objective is within the model's error on comparing two plans (paired published "
                        "residuals) of the best are ties; the secondary objective picks among them"}


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
    ties: Ties | None = None  # the ranked plans the model cannot tell from the best, and the pick among them

    @classmethod
    def interrupted(cls, spec: SizingSpec) -> SizingResult:
        import pandas as pd

        empty = pd.DataFrame()
        return cls(spec, empty, empty, empty, empty, 0, 0, 0.0, {}, "interrupted", complete=False)

    def _tagged(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Result rows with ``tie``: within the model's error of the best (never reported as better or worse)."""
        if self.ties is None:
            return rows
        return [{**row, "tie": bool(self.ties.mask[i])} for i, row in enumerate(rows)]

    def _points_json(self) -> dict[str, Any]:
        """``gpu_power_points``: the operating points searched and the ones a system skipped (why), when asked."""
        spec = self.spec
        if not spec.gpu_power_points:
            return {}
        from fabricsim.sizing.power_points import skipped_points

        catalog = spec.catalog()
        systems = tuple(spec.systems if spec.systems is not None else catalog.priced_system_ids())
        return {"gpu_power_points": {"points": list(spec.gpu_power_points),
                                     "meaning": "up to 1: a fraction of each GPU's rated board power; above 1: W",
                                     "skipped": skipped_points(spec, catalog, systems)}}

    def to_json(self) -> dict[str, Any]:
        from fabricsim.sizing.evaluate import spec_model

        defaults = sizing_defaults()
        spec = self.spec
        moe = spec_model(spec).moe is not None if len(self.ranked) else False

        from fabricsim.sizing.facility import with_facility

        def banded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return with_facility(spec, spec.catalog(), with_bands(rows, moe, spec.catalog()))

        return {
            "model": spec.model if isinstance(spec.model, str) else spec.model.get("name", "model"),
            "tokens": spec.tokens,
            "objective": spec.objective,
            "constraints": {"deadline_s": spec.deadline_s, "budget_usd": spec.budget_usd,
                            "power_cap_w": spec.power_cap_w, "facility_w": spec.power_cap_w,
                            "cooling": spec.cooling},
            "results": self._tagged(banded(entries(self.ranked, spec.top, self.missing))),
            "ties": None if self.ties is None else self.ties.to_json(banded(entries(
                self.ranked.iloc[[self.ties.pick]], None, self.missing))[0]),
            "pareto": banded(entries(self.pareto, None, self.missing)),
            "best_by_system_fabric": banded(entries(self.best_by_system_fabric, None, self.missing)),
            "candidates": self.candidates,
            **self._points_json(),
            "plans_evaluated": self.plans_evaluated,
            "plans_pruned": self.plans_pruned,
            "plans_feasible": len(self.ranked),
            "wall_s": self.wall_s,
            "note": self.note,
            "unbuildable_clusters": dict(self.errors),
            "assumptions": {
                "cost": ("rental: GPUs (hot spares' too) x hours x gpu_hour_usd" if spec.gpu_hour_usd is not None
                         else "capex from the bill of materials (storage servers and network, hot spare nodes "
                         "in) x time / amortize + energy x kwh_usd"),
                "energy": "BOM power (nodes, switches, optics, storage, hot spares) x time x PUE",
                "goodput": None if spec.goodput is None else
                "time on the wall clock: / each cluster's goodput (failures from its parts, checkpoints over its "
                "storage network, restarts, waits for repairs beyond its hot spares); each cluster takes the storage "
                "tier and spare count of least cost per hour of kept training (most goodput with objective time)",
                "amortize_s": spec.amortize_s, "gpu_hour_usd": spec.gpu_hour_usd, "pue": spec.pue,
                "kwh_usd": spec.kwh_usd,
                "defaults": {k: {"value": d.value, "source": d.source} for k, d in defaults.items()},
            },
        }
