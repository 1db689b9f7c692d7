"""What a cluster costs and draws: capex and power from its bill of materials (cached per cluster), and the cost
and energy of a training run on it (owned and amortised, or rented by the GPU-hour)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fabricsim.caching import ByIdentity
from fabricsim.catalog import Catalog, default_catalog
from fabricsim.errors import SpecError
from fabricsim.sizing.space import ClusterChoice
from fabricsim.sizing.spec import SizingSpec

J_PER_MWH = 3.6e9
J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class Economics:
    """A cluster's capital cost and power draw from its bill of materials; None where the catalog lacks a figure,
    ``error`` where the cluster cannot be built; its NICs and fabric cables (what fails, `training.failures`)."""

    capex_usd: float | None
    power_w: float | None
    missing: tuple[str, ...] = ()
    error: str | None = None
    nics: int = 0
    cables: int = 0


def economics(choice: ClusterChoice, rail_optimized: bool, catalog: Catalog | None = None) -> Economics:
    """Bill of materials of a fat tree of ``choice`` (cached)."""
    return _economics(choice, rail_optimized, ByIdentity(catalog or default_catalog()))


@lru_cache(maxsize=4096)
def _economics(choice: ClusterChoice, rail_optimized: bool, catalog: ByIdentity[Catalog]) -> Economics:
    from fabricsim.topology import build_cluster

    try:
        bill = build_cluster(choice.system, nodes=choice.nodes, link=choice.link, rail_optimized=rail_optimized,
                             oversubscription=choice.oversubscription, catalog=catalog.value).bom()
    except SpecError as exc:
        return Economics(None, None, (), str(exc))
    return Economics(bill.capex_usd, bill.power_w, tuple(bill.missing), nics=bill.nics, cables=bill.cables_total)


def run_costs(time_s: np.ndarray, econ: Economics, gpus: int, spec: SizingSpec) -> tuple[np.ndarray, np.ndarray]:
    """Total cost (USD) and energy (MWh) of runs of ``time_s`` seconds: energy = power x time x PUE; cost = the
    amortised share of capex plus the electricity, or GPU-hours x the rental price (power included); NaN where
    a price or power is unknown."""
    power = np.nan if econ.power_w is None else econ.power_w
    energy_j = power * time_s * spec.pue
    if spec.gpu_hour_usd is not None:
        cost = gpus * time_s / 3600.0 * spec.gpu_hour_usd
    else:
        capex = np.nan if econ.capex_usd is None else econ.capex_usd
        cost = capex * time_s / spec.amortize_s + energy_j / J_PER_KWH * spec.kwh_usd
    return cost, energy_j / J_PER_MWH
