"""One what-if result each: the step with a layer made faster, or on a swapped cluster with its cost difference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PER_MILLION = 1e6
SAME_SPEED = 1e-6  # |speed-up - 1| below this is the same speed (a swap that changes nothing the step uses)
MEASURABLE_PERCENT = 0.1
"""The smallest change of the wall-clock step, in % of the base step, that `whatif` turns into a rate (an
upgrade's % faster per $1M, a downgrade's dollars saved per 1% slower). Below it the change is said as "no
measurable" speed-up or cost: the speed-up column prints three decimals (steps of 0.1%), and the paired error
band on a speed-up (`validation.comparison_band`: about ±25% at 80% for dense Hopper training) is hundreds of
times wider, so a rate over a smaller change divides by noise (a 0.0054% slowdown priced "$113.83M per 1%
slower"). The swap's kind (upgrade, downgrade, win, loss) is unchanged by it."""


@dataclass(frozen=True)
class LayerDelta:
    """The step with one layer ``factor`` times faster."""

    layer: str
    step_time_s: float
    speedup: float
    band: dict[str, object] | None = None  # the step time's error band (JSON), from comparable published runs

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, "step_time_s": self.step_time_s, "speedup": self.speedup,
                "step_time_s_band": self.band}


@dataclass(frozen=True)
class SwapDelta:
    """The step on a swapped cluster, the capital cost it adds, and whether it pays for itself (``speedup``: of
    the wall-clock step, step / goodput)."""

    swap: str
    step_time_s: float
    speedup: float
    cost_delta_usd: float | None  # None when a price is missing from the catalog
    fits: bool
    missing_prices: tuple[str, ...] = ()
    speedup_range: tuple[float, float] | None = None
    """the speed-up the model's error on comparisons allows (paired published residuals); None: not bounded"""
    band: dict[str, object] | None = None  # the step time's error band (JSON) on the swapped cluster
    goodput: float = 1.0  # the fraction of wall-clock time the run keeps on the swapped cluster
    facility: dict[str, Any] | None = None
    """the swapped cluster's racks, facility power and floor (`topology.facility` JSON; ``hostable`` false with its
    ``reason`` where the hall's cooling class cannot host the system); None: not computed"""

    @property
    def energy_per_step_j(self) -> float | None:
        """Facility energy of one wall-clock step (facility power x step / goodput); None where power is unknown."""
        power = None if self.facility is None else self.facility.get("facility_power_w")
        if power is None or self.goodput <= 0:
            return None
        return float(power) * self.step_time_s / self.goodput

    @property
    def percent_faster(self) -> float:
        return (self.speedup - 1.0) * 100.0

    @property
    def percent_slower(self) -> float:
        """How much longer the step takes, in % of the base step (negative when faster)."""
        return (1.0 / self.speedup - 1.0) * 100.0

    @property
    def measurable(self) -> bool:
        """True when the step changes by at least `MEASURABLE_PERCENT` (faster or slower)."""
        return abs(self.speedup - 1.0) * 100.0 >= MEASURABLE_PERCENT

    @property
    def kind(self) -> str:
        """What the swap trades: an upgrade (faster, costs more), a downgrade (slower, saves), a win (faster for
        less or the same, or as fast for less), a loss (slower or dearer), no change; cost unknown: speed only."""
        faster, slower = self.speedup > 1.0 + SAME_SPEED, self.speedup < 1.0 - SAME_SPEED
        if self.cost_delta_usd is None:
            speed = "faster" if faster else ("slower" if slower else "same speed")
            return f"{speed}, cost unknown"
        dearer, cheaper = self.cost_delta_usd > 0, self.cost_delta_usd < 0
        if faster and dearer:
            return "upgrade"
        if slower and cheaper:
            return "downgrade"
        if (faster and not dearer) or (cheaper and not slower):
            return "win"
        if slower or dearer:
            return "loss"
        return "no change"

    @property
    def percent_per_million_usd(self) -> float | None:
        """% faster per million dollars spent, for an upgrade only (None otherwise: a downgrade is said as savings
        per % slower, never as % faster per dollar), and only for a measurable speed-up (`MEASURABLE_PERCENT`)."""
        if self.kind != "upgrade" or self.cost_delta_usd is None or not self.measurable:
            return None
        return self.percent_faster / (self.cost_delta_usd / PER_MILLION)

    @property
    def savings_usd_per_percent_slower(self) -> float | None:
        """Dollars saved per 1% of step time given up, for a downgrade whose slowdown is measurable only (None
        otherwise; `MEASURABLE_PERCENT`)."""
        if self.kind != "downgrade" or self.cost_delta_usd is None or not self.measurable:
            return None
        return -self.cost_delta_usd / self.percent_slower

    def work_per_usd_change(self, base_capex_usd: float | None, speedup: float | None = None) -> float | None:
        """Relative change of throughput per capital dollar (+0.05: 5% more work per dollar; None: unknown), at the
        predicted speed-up or at ``speedup``."""
        if self.cost_delta_usd is None or base_capex_usd is None or base_capex_usd <= 0:
            return None
        return (self.speedup if speedup is None else speedup) * base_capex_usd / (base_capex_usd
                                                                                  + self.cost_delta_usd) - 1.0

    def pays_as_predicted(self, base_capex_usd: float | None) -> bool | None:
        """True when the swap is faster (an upgrade or a win) and throughput per capital dollar improves at the
        predicted speed-up (None: cost unknown)."""
        change = self.work_per_usd_change(base_capex_usd)
        if change is None:
            return None
        return self.kind in ("upgrade", "win") and change > 0

    def worth_it(self, base_capex_usd: float | None) -> bool | None:
        """True when spending on the swap pays beyond the model's error: it pays as predicted and still pays at the
        low end of ``speedup_range`` (a swap with no bounded range never clearly pays). A downgrade is never
        "worth it" in this sense, whatever it saves: its trade is `savings_usd_per_percent_slower` (None: cost
        unknown)."""
        pays = self.pays_as_predicted(base_capex_usd)
        if not pays:
            return pays
        if self.speedup_range is None:
            return False
        low = self.work_per_usd_change(base_capex_usd, self.speedup_range[0])
        return low is not None and low > 0

    def within_error(self, base_capex_usd: float | None) -> bool:
        """Pays at the predicted speed-up, but not at the low end of the model's error on comparisons."""
        return bool(self.pays_as_predicted(base_capex_usd)) and not self.worth_it(base_capex_usd)

    def to_json(self, base_capex_usd: float | None) -> dict[str, Any]:
        refused = None if self.facility is None or self.facility.get("hostable", True) else self.facility["reason"]
        return {"swap": self.swap, "step_time_s": self.step_time_s, "step_time_s_band": self.band,
                "facility": self.facility, "energy_per_step_j": self.energy_per_step_j, "refused": refused,
                "speedup": self.speedup,
                "cost_delta_usd": self.cost_delta_usd, "percent_faster": self.percent_faster,
                "percent_slower": self.percent_slower, "kind": self.kind, "measurable": self.measurable,
                "percent_per_million_usd": self.percent_per_million_usd,
                "savings_usd_per_percent_slower": self.savings_usd_per_percent_slower,
                "work_per_usd_change": self.work_per_usd_change(base_capex_usd),
                "worth_it": self.worth_it(base_capex_usd),
                "pays_as_predicted": self.pays_as_predicted(base_capex_usd),
                "speedup_band": None if self.speedup_range is None else
                {"low": self.speedup_range[0], "high": self.speedup_range[1]}, "fits": self.fits,
                "missing_prices": list(self.missing_prices), "goodput": self.goodput}
