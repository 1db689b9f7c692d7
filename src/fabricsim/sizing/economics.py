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
from fabricsim.topology import BillOfMaterials, StorageNetworkSpec

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
    cables: float = 0.0
    """fabric cables as failures count them (`BillOfMaterials.cable_failure_exposure`)"""
    spare_gpus: int = 0
    """GPUs of the hot spares in capex and power (a rental bills their hours too)"""
    storage_servers: int = 0


def economics(choice: ClusterChoice, rail_optimized: bool, catalog: Catalog | None = None,
              storage: StorageNetworkSpec | None = None, spare_gpus: int = 0) -> Economics:
    """Bill of materials of a fat tree of ``choice`` (cached), with its storage network and ``spare_gpus`` GPUs of
    hot spares (priced as that share of a node)."""
    return _economics(choice, rail_optimized, ByIdentity(catalog or default_catalog()), storage, spare_gpus)


@lru_cache(maxsize=4096)
def _economics(choice: ClusterChoice, rail_optimized: bool, catalog: ByIdentity[Catalog],
               storage: StorageNetworkSpec | None, spare_gpus: int) -> Economics:
    from fabricsim.topology import storage_bill

    bill = _fabric_bill(choice, rail_optimized, catalog)
    if isinstance(bill, str):
        return Economics(None, None, (), bill)
    cat = catalog.value
    system = cat.system(choice.system)
    extra: list[tuple[float | None, float | None, str]] = [
        (system.price_usd, system.power_w, system.id)] * (1 if spare_gpus else 0)
    share = spare_gpus / system.gpus_per_node  # spares as that share of a node (a rack's trays pro rata)
    extra_usd = share * (system.price_usd or 0.0)
    extra_w = share * (system.power_w or 0.0)
    servers = 0
    if storage is not None:
        try:
            store = storage_bill(cat, system, choice.nodes, choice.gpus,
                                 cat.switch(bill.switch) if bill.switches_total else None, cat.nic(bill.nic), storage)
        except SpecError as exc:
            return Economics(None, None, (), str(exc))
        servers = store.servers
        extra += [(i.unit_price_usd, i.unit_power_w, i.item) for i in store.items]
        extra_usd += sum(i.price_usd or 0.0 for i in store.items)
        extra_w += sum(i.power_w or 0.0 for i in store.items)
    missing = set(bill.missing) | {f"{name} price" for price, _, name in extra if price is None} \
        | {f"{name} power" for _, power, name in extra if power is None}
    capex = None if bill.capex_usd is None or any(p is None for p, _, _ in extra) else bill.capex_usd + extra_usd
    power = None if bill.power_w is None or any(w is None for _, w, _ in extra) else bill.power_w + extra_w
    return Economics(capex, power, tuple(sorted(missing)), nics=bill.nics, cables=bill.cable_failure_exposure,
                     spare_gpus=spare_gpus, storage_servers=servers)


@lru_cache(maxsize=1024)
def _fabric_bill(choice: ClusterChoice, rail_optimized: bool, catalog: ByIdentity[Catalog]) -> BillOfMaterials | str:
    """The compute fabric's bill (every storage and spare option of a cluster shares it), or why it cannot be
    built."""
    from fabricsim.topology import build_cluster

    try:
        planes = 2 if choice.kind == "2-plane" else 1
        return build_cluster(choice.system, nodes=choice.nodes, fabric="fat-tree" if planes > 1 else choice.kind,
                             link=choice.link, rail_optimized=rail_optimized,
                             oversubscription=choice.oversubscription, planes=planes, catalog=catalog.value).bom()
    except SpecError as exc:
        return str(exc)


def run_costs(time_s: np.ndarray, econ: Economics, gpus: int, spec: SizingSpec) -> tuple[np.ndarray, np.ndarray]:
    """Total cost (USD) and energy (MWh) of runs of ``time_s`` seconds: energy = power x time x PUE; cost = the
    amortised share of capex plus the electricity, or GPU-hours x the rental price (power included); NaN where
    a price or power is unknown."""
    power = np.nan if econ.power_w is None else econ.power_w
    energy_j = power * time_s * spec.pue
    if spec.gpu_hour_usd is not None:
        cost = (gpus + econ.spare_gpus) * time_s / 3600.0 * spec.gpu_hour_usd
    else:
        capex = np.nan if econ.capex_usd is None else econ.capex_usd
        cost = capex * time_s / spec.amortize_s + energy_j / J_PER_KWH * spec.kwh_usd
    return cost, energy_j / J_PER_MWH
