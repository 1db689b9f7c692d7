"""`traffic --checkpoint MODEL`: a training job's checkpoint written over a converged storage network, at flow level
beside the job's own traffic, and compared with the goodput model's write time.

The storage servers sit on the compute fabric as storage nodes at its end (the flow simulator's background
``checkpoint_write`` flows, `fabricsim.traffic.jobs`): as many whole nodes as it takes for their NICs to carry what
the servers write (their ports, or their drives where slower), and the cables from the fabric to those nodes
carry only that share of their rate (`cap_storage_links`), so the storage nodes absorb what the servers would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fabricsim.catalog import Catalog
    from fabricsim.topology import ClusterSpec, StorageBill, Topology
    from fabricsim.traffic import BackgroundSpec


@dataclass(frozen=True)
class CheckpointTraffic:
    """The storage bill, the storage nodes standing in for its servers, and the write as background flows."""

    bill: StorageBill
    storage_nodes: int
    checkpoint_bytes: float
    background: BackgroundSpec
    analytical_write_s: float


def checkpoint_traffic(spec: ClusterSpec, catalog: Catalog, model_name: str, job: str, gpus: int,
                       server: str | None, servers: int | None) -> CheckpointTraffic:
    """Size the converged storage of ``spec``'s nodes and turn one checkpoint of ``model_name`` into
    ``checkpoint_write`` flows from the job's ``gpus`` GPUs."""
    from fabricsim.model import load_model
    from fabricsim.topology import StorageNetworkSpec, resolve_switch, storage_bill
    from fabricsim.traffic import BackgroundSpec
    from fabricsim.training import checkpoint_bytes

    system = catalog.system(spec.system)
    nic = catalog.nic(spec.nic or system.nic)
    switch = resolve_switch(spec.link or nic.link, catalog)
    network = StorageNetworkSpec(network="converged", servers=servers,
                                 **({} if server is None else {"server": server.strip().lower()}))
    bill = storage_bill(catalog, system, spec.nodes, spec.nodes * system.gpus_per_node, switch, nic, network)
    injection = system.nics_per_node * nic.ports * min(nic.port_bytes_per_s, switch.port_bytes_per_s)
    size = checkpoint_bytes(load_model(model_name))
    return CheckpointTraffic(
        bill=bill, storage_nodes=max(1, math.ceil(bill.servers_write_bytes_per_s / injection - 1e-9)),
        checkpoint_bytes=size,
        background=BackgroundSpec("checkpoint_write", job, size / gpus),
        analytical_write_s=size / min(bill.write_bytes_per_s, gpus / system.gpus_per_node * injection))


def cap_storage_links(topo: Topology, ck: CheckpointTraffic) -> Topology:
    """The topology with the cables between the fabric and the storage nodes (its last ``ck.storage_nodes``
    nodes) scaled to carry the servers' write rate in all, not the nodes' full NIC rate."""
    import dataclasses


    first = topo.num_nodes - ck.storage_nodes
    node_of = topo.endpoint_node
    src, dst = node_of[topo.link_src], node_of[topo.link_dst]
    edge = ((src >= first) & (dst < 0)) | ((dst >= first) & (src < 0))  # storage node <-> fabric switch
    total = topo.link_capacity[edge & (dst < 0)].sum()
    if total <= 0:
        return topo
    capacity = topo.link_capacity.copy()
    capacity[edge] *= min(1.0, ck.bill.servers_write_bytes_per_s / total)
    return dataclasses.replace(topo, link_capacity=capacity)


def checkpoint_line(ck: CheckpointTraffic, simulated_s: float) -> str:
    """The simulated write against the goodput model's."""
    from fabricsim import units

    b = ck.bill
    return (f"checkpoint {units.format_bytes(ck.checkpoint_bytes)} to {b.servers} x {b.server} (converged, "
            f"{units.format_rate(b.write_bytes_per_s)} write; {ck.storage_nodes} storage node"
            f"{'s' if ck.storage_nodes != 1 else ''} at the fabric's end stand in): written in "
            f"{units.format_duration(simulated_s, digits=3)} beside the job's traffic, "
            f"{units.format_duration(ck.analytical_write_s, digits=3)} in the goodput model (alone)")
