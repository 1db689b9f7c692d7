"""Bill of materials of a built cluster: what to buy (nodes, switches by tier, cables and transceivers), what it
costs and draws, and the bandwidth it gives.

Figures are approximate and dated: every line item carries its catalog id, unit price, price date and whether the
catalog could verify it. Node prices include the node's GPUs, NICs and NVSwitch chips; a switch or cable without a
catalog price (or power) is listed in ``missing`` and the totals are then None (the known part is given apart).

Cables: a NIC-to-first-switch cable (or a node-to-node cable on a mesh) is copper or optical per the spec's
``node_cable`` (default optical: the SuperPOD puts leaves at the end of the row and runs optics to them); cables
between switches are optical. Each cable is the slowest catalog class of its medium at least as fast as the link.
Optical cables count their transceivers (two per cable in the catalog: one per end; twin-port OSFP switch optics
that carry two links are not merged). A co-packaged-optics switch (catalog ``optics: co-packaged``) carries its
optics inside (its power includes them), so a cable end on it needs no transceiver: such a cable is billed at the
share of its class's price and power its remaining pluggable ends make (the fibre itself is not priced), and each end
on it fails ``optics_failure_factor`` times as often as a pluggable one (``cable_failure_exposure``).

Bisection (one direction, 0 for a single node): the worst balanced cut of the nodes through the scale-out fabric.
Fat tree: floor(N/2) x NICs per node x NIC link rate / oversubscription, the cut between leaf-aligned halves of
full leaves (partly filled leaves can do better). Torus and mesh: see their modules.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

from fabricsim import units
from fabricsim.catalog import NIC, Cable, Catalog, Priced, Switch, System, figure_basis
from fabricsim.topology.fabric import Fabric
from fabricsim.topology.lineitems import LineItem, cable_class, line_item
from fabricsim.topology.nodes import NodeTemplate
from fabricsim.topology.storage import StorageBill, storage_bill
from fabricsim.topology.storage_spec import StorageNetworkSpec


class Billable(Protocol):
    """What the bill reads of a built cluster (a ``Topology`` is one): the bill is a function of the topology, and
    the topology module imports it, not the other way round."""

    @property
    def catalog(self) -> Catalog: ...
    @property
    def fabric(self) -> Fabric: ...
    @property
    def node(self) -> NodeTemplate: ...
    @property
    def fabric_switch(self) -> Switch: ...
    @property
    def nic(self) -> NIC: ...
    @property
    def system(self) -> System: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def num_gpus(self) -> int: ...
    @property
    def nvlink_domain_size(self) -> int: ...
    @property
    def nic_bytes_per_s_per_gpu(self) -> float: ...
    @property
    def oversubscription(self) -> float: ...
    @property
    def tiers(self) -> int: ...


class BillOfMaterials(BaseModel):
    """Counts, cost, power and bandwidth of a cluster (SI units: bytes/s, W, USD)."""

    model_config = ConfigDict(frozen=True)

    system: str
    fabric: str
    switch: str
    link: str
    nic: str
    nodes: int
    gpus: int
    nics: int
    nvlink_domain_size: int
    nvswitch_chips: int
    switches: dict[str, int]
    """by tier: leaf/spine/core for fat trees (0 where a tier is absent), torus, none for a mesh"""
    switches_total: int
    cables: dict[str, int]
    cables_copper: int
    cables_optical: int
    cables_total: int
    transceivers: int
    capex_usd: float | None
    capex_known_usd: float
    power_w: float | None
    power_known_w: float
    missing: list[str]
    bisection_bytes_per_s: float
    nic_bytes_per_s_per_gpu: float
    oversubscription: float
    tiers: int
    items: list[LineItem]
    """every line, the storage network's included (capex and power total them all)"""
    notes: list[str]
    roadmap: list[str] = []
    """roadmap parts the cluster uses (``kind:id``): their figures are announced, not measured"""
    estimated: list[str] = []
    """figures of its parts that are estimates (``id.field``), the method in each entry's notes"""
    cable_failure_exposure: float = 0.0
    """fabric cables as the failure model counts them: each cable 1, less what its ends on co-packaged-optics
    switches fail less (``Switch.optics_failure_factor``); cables_total where every switch is pluggable"""
    storage: StorageBill | None = None
    """the storage servers and the network to them, when the spec has one (counts above are the compute
    fabric's)"""


SWITCH_ENDS = {"node-leaf": 1, "node-router": 1, "node-switch": 1, "node-node": 0}
"""Ends of a fabric segment's cables that plug into fabric switches (2 for every segment not named)"""


def _co_packaged(cable: Cable, switch: Switch, segment: str) -> tuple[Cable, int, float]:
    """A segment's cable class as bought beside ``switch``, the ends on co-packaged optics, and those ends'
    failure factor: an optical cable loses the transceivers (their share of price and power) at such ends."""
    if switch.optics != "co-packaged" or cable.medium != "optical":
        return cable, 0, 1.0
    ends = SWITCH_ENDS.get(segment, 2)
    factor = 1.0 if switch.optics_failure_factor is None else switch.optics_failure_factor.value
    if not ends or not cable.transceivers:
        return cable, ends, factor
    keep = (2 - ends) / 2
    return cable.model_copy(update={
        "id": f"{cable.id}-cpo{ends}",
        "name": f"{cable.name}, {ends} end(s) on co-packaged optics (no transceiver there)",
        "transceivers": round(cable.transceivers * keep),
        "price_usd": None if cable.price_usd is None else cable.price_usd * keep,
        "power_w": None if cable.power_w is None else cable.power_w * keep,
    }), ends, factor


def _nic_swap(old: Priced, new: Priced, count: int) -> LineItem:
    """A fabric NIC replacing the system's own: the difference in price and power, per NIC (unknown if either is)."""
    price = None if new.price_usd is None or old.price_usd is None else new.price_usd - old.price_usd
    power = None if new.power_w is None or old.power_w is None else new.power_w - old.power_w
    return LineItem(item=new.id, category="nic", role=f"replaces {old.id} (difference)", count=count,
                    unit_price_usd=price, unit_power_w=power, price_date=new.price_date,
                    verified=new.verified and old.verified)


def bom(topology: Billable, storage: StorageNetworkSpec | None = None) -> BillOfMaterials:
    """Count, price and power a built topology and, when given, its storage network (see the module docstring for
    the rules, `topology.storage` for the storage's)."""
    catalog, fabric, system = topology.catalog, topology.fabric, topology.system
    nodes = topology.num_nodes
    items = [line_item(system, "node", "compute node", nodes)]
    switches = fabric.switches_by_tier()
    for tier, count in switches.items():
        if count:
            items.append(line_item(topology.fabric_switch, "switch", tier, count))
    cables: dict[str, int] = {}
    copper = optical = transceivers = 0
    exposure = 0.0
    for run in fabric.cables:
        cable = cable_class(catalog, run.medium, run.bytes_per_s)
        cable, cpo_ends, factor = _co_packaged(cable, topology.fabric_switch, run.segment)
        cables[run.segment] = cables.get(run.segment, 0) + run.count
        items.append(line_item(cable, "cable", run.segment, run.count))
        exposure += run.count * (1.0 - cpo_ends / 2 * (1.0 - factor))
        if cable.medium == "copper":
            copper += run.count
        else:
            optical += run.count
            transceivers += run.count * cable.transceivers
    if topology.nic.id != system.nic:
        items.append(_nic_swap(catalog.nic(system.nic), topology.nic, nodes * topology.node.nics))
    store = None
    if storage is not None:
        store = storage_bill(catalog, system, nodes, topology.num_gpus,
                             topology.fabric_switch if fabric.num_switches else None, topology.nic, storage)
        items.extend(store.items)
    missing = sorted({f"{i.item} price" for i in items if i.unit_price_usd is None}
                     | {f"{i.item} power" for i in items if i.unit_power_w is None})
    capex_known = sum(i.price_usd or 0.0 for i in items)
    power_known = sum(i.power_w or 0.0 for i in items)
    notes = ["figures are approximate and dated (see items); node prices include GPUs, NICs and NVSwitch chips"]
    if topology.nic.id != system.nic:
        notes.append(f"fabric NIC {topology.nic.id} replaces the system's {system.nic}: the node price includes "
                     "its own NICs, so the swap is billed as the price and power difference per NIC")
    if topology.fabric_switch.port_bytes_per_s > topology.nic.port_bytes_per_s:
        notes.append(f"NIC links run at the NIC's {units.format_rate(topology.nic.port_bytes_per_s, bits=True)},"
                     f" below the switch port rate")
    if system.rated_power_w is not None and system.power_w is not None:
        gpu = catalog.gpu(system.gpu)
        notes.append(f"node power {system.power_w / 1e3:.2f} kW, not its rated {system.rated_power_w / 1e3:.2f} kW: "
                     f"its GPUs run at a {gpu.tdp_w:g} W board power limit (--gpu-power), and each draws its rated "
                     "board power less the limit less")
    if topology.fabric_switch.optics == "co-packaged":
        notes.append(f"{topology.fabric_switch.id} has co-packaged optics: cables end on it without a pluggable "
                     "transceiver (billed at the share of their class's price and power their other ends make; the "
                     "fibre is not priced), and its power includes its optics")
    basis = figure_basis(catalog, system, topology.fabric_switch.id, topology.nic.id)
    if system.status == "roadmap":
        notes.append(f"{system.id} is a roadmap system: its price, power and NVLink design are assumptions (see "
                     "its catalog notes)")
    if basis.note():
        notes.append(str(basis.note()))
    link = catalog.link(topology.fabric_switch.link)
    if link.status == "roadmap":
        notes.append(f"{link.id} is a roadmap link: its switch, NIC and cables ({topology.fabric_switch.id}, "
                     f"{topology.nic.id}) are assumptions, priced as estimates (see their catalog notes)")
    notes.extend(fabric.notes)
    if store is not None:
        notes.extend(store.notes)
    if missing:
        notes.append("totals are None where a price or power is missing: " + ", ".join(missing))
    return BillOfMaterials(
        system=system.id,
        fabric=fabric.description,
        switch=topology.fabric_switch.id,
        link=topology.fabric_switch.link,
        nic=topology.nic.id,
        nodes=nodes,
        gpus=topology.num_gpus,
        nics=nodes * topology.node.nics,
        nvlink_domain_size=topology.nvlink_domain_size,
        nvswitch_chips=nodes * topology.node.nvswitch_chips,
        switches=switches,
        switches_total=fabric.num_switches,
        cables=cables,
        cables_copper=copper,
        cables_optical=optical,
        cables_total=copper + optical,
        transceivers=transceivers,
        cable_failure_exposure=exposure,
        roadmap=list(basis.roadmap),
        estimated=list(basis.estimated),
        capex_usd=None if any(i.unit_price_usd is None for i in items) else capex_known,
        capex_known_usd=capex_known,
        power_w=None if any(i.unit_power_w is None for i in items) else power_known,
        power_known_w=power_known,
        missing=missing,
        bisection_bytes_per_s=fabric.bisection_bytes_per_s,
        nic_bytes_per_s_per_gpu=topology.nic_bytes_per_s_per_gpu,
        oversubscription=topology.oversubscription,
        tiers=topology.tiers,
        items=items,
        notes=notes,
        storage=store,
    )
