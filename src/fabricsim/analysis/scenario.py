"""A cluster as `whatif` varies it (system, GPUs, network link, NIC, oversubscription, goodput options) and its
capital cost."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from math import ceil
from typing import TYPE_CHECKING

from fabricsim.catalog import Catalog, LinkTech, System
from fabricsim.collectives import resolve_fabric_link
from fabricsim.comm import Cluster
from fabricsim.training import GoodputSpec

if TYPE_CHECKING:
    from fabricsim.topology import BillOfMaterials, Facility


@dataclass(frozen=True)
class Capex:
    """Capital cost of a cluster from its bill of materials; None where a catalog price is missing."""

    usd: float | None
    missing: tuple[str, ...]


@dataclass(frozen=True)
class Scenario:
    """The cluster a plan runs on: a system preset, the GPU count, the network, its NIC and oversubscription."""

    system_id: str
    gpus: int
    fabric: str | None
    oversubscription: float
    catalog: Catalog
    nic: str | None = None  # a NIC replacing the system's (a network swap); None: the system's own
    goodput: GoodputSpec | None = None  # failures, checkpoints and restarts (None: a healthy cluster)
    fabric_kind: str = "fat-tree"  # the scale-out design the bill prices: fat-tree or rail-only
    planes: int = 1  # fat tree: planes each NIC is split over (multi-plane)
    network_fraction: float = 1.0  # the job's slowest NIC link as a share of its rate (--degrade link=F@nodeN)
    healthy_catalog: Catalog | None = None  # the catalog before a straggler slowed its GPU (None: none is slow)
    repair_usd: float = 0.0  # parts bought to repair degraded ones (a spare node, a cable)
    repair_missing: tuple[str, ...] = ()  # prices those repairs lack
    template: Cluster | None = None  # the run's cluster (flow simulation, routing, fabric behaviour, SHARP, other
    # jobs): the parts above replace its own; None: an analytical cluster of those parts alone
    cooling: str | None = None  # the hall's cooling class (catalog cooling id); None: the cooling the system needs

    @property
    def system(self) -> System:
        """The system preset, with the replacement NIC when there is one."""
        base = self.catalog.system(self.system_id)
        return base if self.nic is None else base.model_copy(update={"nic": self.nic})

    @property
    def nodes(self) -> int:
        return ceil(self.gpus / self.system.gpus_per_node)

    def cluster(self, catalog: Catalog | None = None) -> Cluster:
        """The training model's cluster, optionally on a catalog variant with the same entry ids."""
        cat = catalog or self.catalog
        system = cat.system(self.system_id)
        if self.nic is not None:
            system = system.model_copy(update={"nic": self.nic})
        if self.template is not None:
            return replace(self.template, system=system, fabric=self.fabric, oversubscription=self.oversubscription,
                           catalog=cat, network_fraction=self.network_fraction)
        return Cluster(system, fabric=self.fabric, oversubscription=self.oversubscription, catalog=cat,
                       network_fraction=self.network_fraction)

    def link(self) -> LinkTech:
        return resolve_fabric_link(self.catalog, self.system, self.fabric)

    @cached_property
    def bill(self) -> BillOfMaterials:
        """Bill of materials of a rail-optimized fat tree (or rail-only network) of these nodes: nodes, switches,
        cables and optics, and
        the price difference of a replacement NIC (node prices include the system's own NICs); built once, for the
        capital cost and for the parts that fail."""
        from fabricsim.topology import ClusterSpec, build_topology

        spec = ClusterSpec.parse({"system": self.system_id, "nodes": self.nodes, "fabric": self.fabric_kind,
                                  "link": self.link().id, "oversubscription": self.oversubscription,
                                  "nic": self.nic, "planes": self.planes})
        if self.goodput is not None:  # the storage network the goodput options buy
            spec = spec.model_copy(update={"storage": self.goodput.network_spec()})
        return build_topology(spec, self.catalog).bom()  # bills a replacement NIC as its price difference

    @property
    def spare_gpus(self) -> int:
        """GPUs of the hot spares the goodput options keep beside the job (0 for a healthy cluster)."""
        if self.goodput is None:
            return 0
        units, unit = self.goodput.spares_for(self.system, self.gpus)
        return units * unit

    def capex(self) -> Capex:
        """The capital cost of `bill` (storage included) and of the hot spare nodes, and the catalog prices it
        lacks."""
        bill = self.bill
        missing = [m for m in bill.missing if m.endswith(" price")]
        usd = bill.capex_usd
        if self.spare_gpus:
            price = self.system.price_usd
            missing += [] if price is not None else [f"{self.system_id} price"]
            share = self.spare_gpus / self.system.gpus_per_node  # spares as that share of a node
            usd = None if usd is None or price is None else usd + share * price
        missing += list(self.repair_missing)
        usd = None if usd is None or self.repair_missing else usd + self.repair_usd
        return Capex(usd, tuple(sorted(set(missing))))

    def it_power_w(self) -> float | None:
        """The IT power of `bill` (storage included) and of the hot spares (that share of a node); None where a
        catalog power is missing."""
        power = self.bill.power_w
        if power is None or not self.spare_gpus:
            return power
        node = self.system.power_w
        return None if node is None else power + self.spare_gpus / self.system.gpus_per_node * node

    def facility(self) -> Facility:
        """The racks, facility power and floor of the cluster in a hall of ``cooling`` (the cooling its system
        needs when None), at that class's PUE (`topology.facility`)."""
        from fabricsim.topology import facility, hall_for

        system = self.system
        hall = (self.catalog.cooling_class(self.cooling, field="--swap") if self.cooling
                else hall_for(self.catalog, system))
        return facility(system, self.catalog.gpu(system.gpu), self.nodes, self.it_power_w(), hall)
