"""The storage network of a cluster: the storage servers its checkpoints go to, sized to a storage tier's rates
(or counted by the user), and the network to them, priced line by line.

- separate (as the DGX SuperPOD builds it: "independent of the compute fabric"): each node's storage ports
  (``System.storage_ports`` on ``System.storage_nic``) and every server port on storage leaves of their own, with
  non-blocking spines (and cores) above them as the endpoints need, all of one catalog switch (default: the
  compute fabric's), and the cables between them;
- converged: the servers plug into the compute fabric's leaves, so the bill adds only the servers, their cables
  and the leaf ports they take (priced as that share of a leaf switch; a fabric built with no free port would need
  one more leaf).

Rates the job reaches (one direction each): the slowest of the servers' own rates, their ports, and the nodes'
side (storage ports when separate, compute NICs when converged, shared with training traffic; the flow
simulator's ``checkpoint_write`` background flows measure that sharing, `fabricsim traffic --jobs`).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from fabricsim import units
from fabricsim.catalog import NIC, Catalog, StorageServer, StorageTier, Switch, System
from fabricsim.errors import SpecError
from fabricsim.topology.lineitems import LineItem, cable_class, line_item
from fabricsim.topology.resolve import resolve_switch
from fabricsim.topology.storage_spec import StorageNetworkKind, StorageNetworkSpec


class StorageBill(BaseModel):
    """The storage network's line items and the rates it gives a job (bytes/s, one direction)."""

    model_config = ConfigDict(frozen=True)

    network: StorageNetworkKind
    tier: str
    server: str
    servers: int
    capacity_bytes: float
    target_read_bytes_per_s: float
    target_write_bytes_per_s: float
    read_bytes_per_s: float
    """aggregate read rate the job reaches: servers, their ports and the nodes' side, the slowest"""
    write_bytes_per_s: float
    servers_write_bytes_per_s: float
    """what the servers themselves write at most: their drives, or their ports where slower"""
    node_bytes_per_s: float
    """what the job's nodes can send to storage at once: their storage ports (separate) or compute NICs
    (converged)"""
    switch: str
    switches: dict[str, int]
    """storage switches by tier (separate; empty when converged)"""
    nics: int
    """storage NICs on the compute nodes (separate; 0 when converged)"""
    cables: int
    compute_ports: int
    """ports the servers take on the compute fabric's leaves (converged; 0 when separate)"""
    items: list[LineItem]
    notes: list[str]
    fallback: str | None = None
    """why the network is not the one the options name (a system without storage ports converged), else None"""


def tier_targets(tier: StorageTier, gpus: int, write_bytes_per_s: float | None = None,
                 scale: float = 1.0) -> tuple[float, float]:
    """(read, write) bytes/s a job of ``gpus`` GPUs needs from ``tier``: its units serving those GPUs, at most the
    per-GPU rate each; a given write rate replaces the tier's (reads scale with it)."""
    units = math.ceil(gpus / tier.unit_gpus)
    read = min(tier.read_bytes_per_s * units, tier.gpu_read_bytes_per_s * gpus)
    write = min(tier.write_bytes_per_s * units, tier.gpu_write_bytes_per_s * gpus)
    if write_bytes_per_s is not None:
        read = write_bytes_per_s * tier.read_bytes_per_s / tier.write_bytes_per_s
        write = write_bytes_per_s
    return read * scale, write * scale


def check_reachable(write: float, nodes: int, node_side: float, through: str) -> None:
    """Refuse a storage write rate beyond what the nodes can send (``through``: their storage ports or NICs)."""
    if write > node_side * (1 + 1e-9):
        raise SpecError(f"a storage write rate of {write / 1e9:g} GB/s is more than the {nodes} nodes can send "
                        f"({node_side / 1e9:g} GB/s through {through})", field="--storage-bw")


def _server_count(spec: StorageNetworkSpec, server: StorageServer, read: float, write: float) -> int:
    if spec.servers is not None:
        if spec.servers < server.min_servers:
            raise SpecError(f"{server.id} is sold from {server.min_servers} servers (asked for {spec.servers})",
                            field="--storage-servers")
        return spec.servers
    need = max(read / server.read_bytes_per_s, write / server.write_bytes_per_s)
    return max(server.min_servers, math.ceil(need * (1 - 1e-9)))


def fat_tree_ports(radix: int) -> int:
    """The most ports a 3-tier non-blocking fat tree of radix-``radix`` switches gives its endpoints."""
    return radix * (radix // 2) ** 2


def _fat_tree(endpoints: int, radix: int) -> dict[str, int]:
    """Switches by tier of a non-blocking fat tree over ``endpoints`` ports: leaves with half their ports down,
    as many uplinks as used downlinks, spines (and cores) enough for them."""
    half = radix // 2
    if endpoints <= radix:
        return {"storage leaf": 1}
    if endpoints <= radix * half:
        return {"storage leaf": math.ceil(endpoints / half), "storage spine": math.ceil(endpoints / radix)}
    if endpoints <= fat_tree_ports(radix):
        return {"storage leaf": math.ceil(endpoints / half), "storage spine": math.ceil(endpoints / half),
                "storage core": math.ceil(endpoints / radix)}
    raise SpecError(f"a storage fabric of {endpoints} ports needs more than 3 tiers of radix-{radix} switches",
                    field="--storage-network")


def no_storage_ports_note(system: System) -> str:
    """The note of a system without storage ports whose default separate storage network converged."""
    return (f"system {system.id} has no storage ports (storage_nic / storage_ports in its catalog entry): storage "
            "converged on the compute fabric")


def converges_without_ports(system: System, spec: StorageNetworkSpec | None) -> bool:
    """Whether ``spec`` (None: no network billed) converges on ``system`` for want of storage ports."""
    return (spec is not None and spec.network == "separate" and spec.converge_without_ports
            and (system.storage_nic is None or system.storage_ports == 0))


def storage_bill(catalog: Catalog, system: System, nodes: int, gpus: int, compute_switch: Switch | None,
                 compute_nic: NIC, spec: StorageNetworkSpec) -> StorageBill:
    """Size, wire and price the storage of a cluster of ``nodes`` nodes of ``system`` (see the module)."""
    tier = catalog.storage_tier(spec.tier)
    server = catalog.storage_server(spec.server)
    target_read, target_write = tier_targets(tier, gpus, spec.write_bytes_per_s, spec.scale)
    count = _server_count(spec, server, target_read, target_write)
    items = [line_item(server, "storage", "storage server", count)]
    notes = [f"{count} x {server.id} sized to {units_text(target_read, target_write)} ({tier.id} for {gpus} GPUs"
             + (f" x {spec.scale:g}" if spec.scale != 1 else "") + ")" if spec.servers is None else
             f"{count} x {server.id} as asked"]
    switches: dict[str, int] = {}
    nics = compute_ports = 0
    network = spec.network
    fallback = None
    if network == "separate" and (system.storage_nic is None or system.storage_ports == 0):
        if not spec.converge_without_ports:
            raise SpecError(f"separate needs storage ports on the nodes, and system {system.id} has none "
                            "(storage_nic / storage_ports in its catalog entry); give converged or none (the "
                            "default, separate, converges on such systems)", field="--storage-network")
        network = "converged"
        fallback = no_storage_ports_note(system)
        notes.append(fallback)
    if network == "separate":
        switch = resolve_switch(spec.switch, catalog) if spec.switch is not None else compute_switch
        if switch is None:
            raise SpecError("this compute fabric has no switch to copy: name the storage switch",
                            field="--storage-switch")
        assert system.storage_nic is not None
        nic = catalog.nic(system.storage_nic)
        node_port = min(nic.port_bytes_per_s, switch.port_bytes_per_s)
        node_ports = nodes * system.storage_ports
        nics = nodes * math.ceil(system.storage_ports / nic.ports)
        items.append(line_item(nic, "nic", "storage NIC", nics))
        node_side = node_ports * node_port
        check_reachable(target_write, nodes, node_side, "their storage ports")
        server_port = min(server.port_bytes_per_s, switch.port_bytes_per_s)
        most = (fat_tree_ports(switch.radix) - node_ports) // server.ports
        if spec.servers is not None and count > most:  # the count asked for is what overflows: name it
            raise SpecError(f"at most {max(most, 0)} x {server.id} ({server.ports} ports each) fit beside the nodes' "
                            f"{node_ports} storage ports on a 3-tier storage fabric of radix-{switch.radix} switches "
                            f"(asked for {count})", field="--storage-servers")
        switches = _fat_tree(node_ports + count * server.ports, switch.radix)
        items += [line_item(switch, "switch", tier_name, n) for tier_name, n in switches.items()]
        runs = [("storage node-leaf", node_ports, node_port, spec.node_cable),
                ("storage server-leaf", count * server.ports, server_port, spec.node_cable)]
        endpoints = node_ports + count * server.ports
        if "storage spine" in switches:
            runs.append(("storage leaf-spine", endpoints, switch.port_bytes_per_s, "optical"))
        if "storage core" in switches:
            runs.append(("storage spine-core", endpoints, switch.port_bytes_per_s, "optical"))
        notes.append(f"separate storage fabric: {sum(switches.values())} x {switch.id}, non-blocking, one switch "
                     f"port per storage port; {system.storage_ports} storage ports per node on {nic.id}, billed "
                     "apart (node prices are quoted with their compute NICs)")
    else:
        switch = compute_switch
        if switch is None:
            raise SpecError("a converged storage network needs a switched compute fabric (a mesh has none)",
                            field="--storage-network")
        node_side = nodes * system.nics_per_node * compute_nic.ports * min(compute_nic.port_bytes_per_s,
                                                                           switch.port_bytes_per_s)
        check_reachable(target_write, nodes, node_side, "all their NICs")
        server_port = min(server.port_bytes_per_s, switch.port_bytes_per_s)
        compute_ports = count * server.ports
        share = None if switch.price_usd is None else switch.price_usd / switch.radix
        power = None if switch.power_w is None else switch.power_w / switch.radix
        items.append(LineItem(item=switch.id, category="switch port", role="storage ports on compute leaves",
                              count=compute_ports, unit_price_usd=share, unit_power_w=power,
                              price_date=switch.price_date, verified=switch.verified))
        runs = [("storage server-leaf", compute_ports, server_port, spec.node_cable)]
        notes.append(f"converged storage: {compute_ports} ports on the compute fabric's leaves, priced as that "
                     f"share of a {switch.id}; checkpoints share the compute NICs and fabric with training")
    cables = 0
    for role, count_, rate, medium in runs:
        if count_:
            items.append(line_item(cable_class(catalog, medium, rate), "cable", role, count_))
            cables += count_
    servers_read = count * min(server.read_bytes_per_s, server.ports * server_port)
    servers_write = count * min(server.write_bytes_per_s, server.ports * server_port)
    return StorageBill(
        network=network, tier=tier.id, server=server.id, servers=count,
        capacity_bytes=count * server.capacity_bytes,
        target_read_bytes_per_s=target_read, target_write_bytes_per_s=target_write,
        read_bytes_per_s=min(servers_read, node_side), write_bytes_per_s=min(servers_write, node_side),
        servers_write_bytes_per_s=servers_write, node_bytes_per_s=node_side,
        switch=switch.id, switches=switches, nics=nics, cables=cables, compute_ports=compute_ports,
        items=items, notes=notes, fallback=fallback)


def units_text(read: float, write: float) -> str:
    """'40 GB/s read, 20 GB/s write'."""
    return f"{units.format_rate(read)} read, {units.format_rate(write)} write"
