"""Turn a ClusterSpec's names into catalog entries: the system, the fabric switch and link, and the NIC."""

from __future__ import annotations

from dataclasses import dataclass

from fabricsim.catalog import NETWORK_KINDS, NIC, Catalog, LinkTech, Switch, System, network_id
from fabricsim.errors import SpecError
from fabricsim.topology.kinds import ETHERNET, INFINIBAND
from fabricsim.topology.spec import ClusterSpec

FABRIC_SWITCH_KINDS = NETWORK_KINDS


@dataclass(frozen=True)
class Resolved:
    """The catalog entries a build uses."""

    system: System
    switch: Switch
    link: LinkTech
    nic: NIC
    nic_link_bytes_per_s: float
    """rate of one NIC-to-switch link: the slower of the NIC port and the switch port"""

    @property
    def link_kind(self) -> int:
        return INFINIBAND if self.switch.kind == "infiniband" else ETHERNET


def fabric_switches(catalog: Catalog) -> dict[str, Switch]:
    """Catalog switches that can build a scale-out fabric (InfiniBand and Ethernet)."""
    return {k: s for k, s in catalog.switches.items() if s.kind in FABRIC_SWITCH_KINDS}


def resolve_switch(name: str, catalog: Catalog, field: str = "link") -> Switch:
    """A fabric switch from any network name (`catalog.network_id`: ndr, ib-ndr, 400g, a switch id): a switch id is
    that switch, a link the largest-radix shipping switch running it (a roadmap one only where none ships)."""
    key = network_id(catalog, name, field=field, kind="fabric link or switch")
    switches = fabric_switches(catalog)
    if key in switches:
        return switches[key]
    found = catalog.switch_running(key, FABRIC_SWITCH_KINDS)
    if found is not None:
        return found
    served = sorted({s.link for s in switches.values()})
    raise SpecError(f"no catalog switch runs {key!r}; links with a switch: {', '.join(served)}", field=field)


def resolve_nic(spec: ClusterSpec, system: System, switch: Switch, catalog: Catalog) -> NIC:
    """The compute NIC: the spec's, else the system's when it runs the fabric's link generation, else the fastest
    that speaks the fabric.

    "Speaks the fabric" means the NIC's link is of the switch's kind (InfiniBand or Ethernet); among those the
    fastest not faster than the switch port wins (ties by id). A DGX H100 on Spectrum-4 400GbE gets cx7-eth, and
    on Quantum-X800 XDR the ConnectX-8 that runs XDR (a fabric generation brings its NIC).
    """
    kind = switch.kind
    if spec.nic is not None:
        nic = catalog.nic(spec.nic)
        if catalog.link(nic.link).kind != kind:
            raise SpecError(f"NIC {nic.id!r} runs {nic.link}, not {kind} like switch {switch.id!r}", field="nic")
        return nic
    own = catalog.nic(system.nic)
    if own.link == switch.link:
        return own
    fits = [n for n in catalog.nics.values()
            if catalog.link(n.link).kind == kind and n.port_bytes_per_s <= switch.port_bytes_per_s]
    if not fits:
        raise SpecError(f"no catalog NIC speaks {kind} at or below {switch.id}'s port rate; "
                        f"name one with nic", field="nic")
    return sorted(fits, key=lambda n: (-n.port_bytes_per_s, n.id))[0]


def resolve(spec: ClusterSpec, catalog: Catalog) -> Resolved:
    """Look up every catalog entry a spec names; unknown names raise SpecErrors listing the allowed ones."""
    system = catalog.system(spec.system)
    switch = resolve_switch(spec.link or catalog.nic(system.nic).link, catalog)
    nic = resolve_nic(spec, system, switch, catalog)
    host = catalog.link(system.pcie).bytes_per_s  # the NIC sits on the node's PCIe, which may not feed its port
    return Resolved(system=system, switch=switch, link=catalog.link(switch.link), nic=nic,
                    nic_link_bytes_per_s=min(nic.port_bytes_per_s, switch.port_bytes_per_s, host))
