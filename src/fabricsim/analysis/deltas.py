"""One what-if result each: the step with a layer made faster, or on a swapped cluster with its cost difference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PER_MILLION = 1e6


@dataclass(frozen=True)
class LayerDelta:
    """The step with one layer ``factor`` times faster."""

    layer: str
    step_time_s: float
    speedup: float

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, "step_time_s": self.step_time_s, "speedup": self.speedup}


@dataclass(frozen=True)
class SwapDelta:
    """The step on a swapped cluster, the capital cost it adds, and whether it pays for itself."""

    swap: str
    step_time_s: float
    speedup: float
    cost_delta_usd: float | None  # None when a price is missing from the catalog
    fits: bool
    missing_prices: tuple[str, ...] = ()

    @property
    def percent_faster(self) -> float:
        return (self.speedup - 1.0) * 100.0

    @property
    def percent_per_million_usd(self) -> float | None:
        """% faster per million dollars spent (None when it costs nothing or the cost is unknown)."""
        if self.cost_delta_usd is None or self.cost_delta_usd <= 0:
            return None
        return self.percent_faster / (self.cost_delta_usd / PER_MILLION)

    def worth_it(self, base_capex_usd: float | None) -> bool | None:
        """True when throughput per capital dollar improves: speedup > new capex / base capex (None: unknown)."""
        if self.cost_delta_usd is None or base_capex_usd is None or base_capex_usd <= 0:
            return None
        return bool(self.speedup * base_capex_usd > base_capex_usd + self.cost_delta_usd)

    def to_json(self, base_capex_usd: float | None) -> dict[str, Any]:
        return {"swap": self.swap, "step_time_s": self.step_time_s, "speedup": self.speedup,
                "cost_delta_usd": self.cost_delta_usd, "percent_faster": self.percent_faster,
                "percent_per_million_usd": self.percent_per_million_usd,
                "worth_it": self.worth_it(base_capex_usd), "fits": self.fits,
                "missing_prices": list(self.missing_prices)}
