"""The shape of a process group on a cluster: what the collective cost model needs to know, precomputed once.

A `GroupShape` summarises a set of GPUs: how many ranks and nodes, the per-GPU intra-node rate (NVLink through
NVSwitch, or PCIe), the per-node network rate usable by the group, and which in-network reductions exist.
Rates are per direction; `*_bytes_per_s` are what collectives achieve (line rate x link efficiency), `*_line_*`
the raw line rates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from math import ceil
from typing import TYPE_CHECKING, Literal

import numpy as np

from fabricsim.catalog import (
    NETWORK_KINDS,
    NIC,
    Catalog,
    LinkTech,
    Switch,
    System,
    default_catalog,
    is_switch_system,
    network_link_id,
)
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from fabricsim.topology import Topology

IntraKind = Literal["nvlink", "pcie", "none"]


@dataclass(frozen=True)
class GroupShape:
    nranks: int
    nnodes: int
    ranks_per_node: int
    intra_kind: IntraKind
    intra_bytes_per_s: float
    intra_line_bytes_per_s: float
    net_kind: str | None
    net_bytes_per_s_per_node: float
    net_line_bytes_per_s_per_node: float
    nics_used_per_node: int
    nvls: bool
    sharp: bool
    system_id: str
    fabric_link_id: str | None
    fabric_switch_id: str | None
    oversubscription: float = 1.0
    uniform_taper: float = 1.0
    """how far below the NICs' rate the scale-out network carries traffic spread over every node (all_to_all): 1 on
    fat trees; on a direct network what uniform traffic pushes across its bisection over the bisection, at least 1
    (`comm.direct_taper`; rings between neighbours do not feel it)"""
    notes: tuple[str, ...] = field(default_factory=tuple)
    collnet: bool = False
    """NCCL_COLLNET_ENABLE=1 with a SHARP tree granted: NCCL's automatic choice includes CollNet (SHARP)"""
    intra_link_id: str | None = None
    host_link_id: str | None = None
    min_ranks_per_node: int = 0
    min_nics_per_node: int = 0
    net_path_latency_s: float = 0.0
    net_switch_hops: int = 0
    switch_system: bool = False
    """the NVLink domain is a rack-scale NVLink Switch System: each of a GPU's links lands on its own switch chip"""
    intra_tuning_link_id: str | None = None
    """the catalog link whose per-generation tuning figures the intra-node link takes (`LinkTech.tuning_as`); None:
    its own"""
    intra_path_latency_s: float = 0.0
    """a switched scale-up domain's one-way GPU-switch-GPU path (two links and a switch: NVLink, UALink or
    scale-up Ethernet); 0 without a domain switch. Its difference from the NVLink path NCCL's figures were measured on
    is added to each scale-up hop (`collectives.algorithms`)"""
    hosts: int = 0
    """hosts (CPUs running one OS) the group's GPUs sit on: a server, or a compute tray of a rack-scale node
    (`host_gpus`); 0: one per node. One host can run nccl-tests from one thread (-g N), several cannot"""

    @property
    def tuning_link_id(self) -> str | None:
        """The link whose per-generation collective figures (NCCL's tables keyed by NVLink generation) this group's
        scale-up link takes: its ``tuning_as``, else itself (`intra_link_tuning`)."""
        return self.intra_tuning_link_id or self.intra_link_id

    @property
    def on_one_host(self) -> bool:
        """Whether every GPU of the group sits on one host, so one thread can launch them all."""
        return (self.hosts or self.nnodes) == 1

    @property
    def emptiest_ranks(self) -> int:
        """GPUs of the emptiest node (a partly filled last node); the fullest holds ranks_per_node."""
        return self.min_ranks_per_node or self.ranks_per_node

    @property
    def emptiest_nics(self) -> int:
        """NICs of the emptiest node: every node sends as much, so these bound the per-node network rate."""
        return self.min_nics_per_node or self.nics_used_per_node

    @property
    def nic_bytes_per_s(self) -> float:
        """Achievable rate of one NIC used by the group."""
        return self.net_bytes_per_s_per_node / max(1, self.emptiest_nics)

    def key(self) -> tuple[object, ...]:
        """Hashable identity for caching predictions by group shape."""
        return (
            self.nranks, self.nnodes, self.ranks_per_node, self.intra_kind, self.intra_bytes_per_s,
            self.net_kind, self.net_bytes_per_s_per_node, self.nics_used_per_node, self.nvls, self.sharp,
            self.intra_link_id, self.host_link_id, self.min_ranks_per_node, self.min_nics_per_node,
            self.net_path_latency_s, self.hosts, self.collnet, self.intra_path_latency_s, self.intra_tuning_link_id,
        )


def fabric_switch_for(catalog: Catalog, link: LinkTech) -> Switch | None:
    """The catalog switch whose ports run at this link technology (e.g. qm9700 for ib-ndr): the largest-radix
    shipping one, a roadmap one only where none ships (as `topology.resolve_switch` picks)."""
    return catalog.switch_running(link.id, NETWORK_KINDS)


def resolve_fabric_link(catalog: Catalog, system: System, fabric: str | None) -> LinkTech:
    """The network link technology: any network name (`catalog.network_id`: ndr, ib-ndr, 400g, eth-400g, a switch
    id) or, for None, the system NIC's own."""
    if fabric is None:
        return catalog.link(catalog.nic(system.nic).link)
    return catalog.link(network_link_id(catalog, fabric, field="--ib"))


def group_shape(
    system: str | System,
    gpus: int,
    *,
    ranks_per_node: int | None = None,
    fabric: str | None = None,
    oversubscription: float = 1.0,
    catalog: Catalog | None = None,
    rail_optimized: bool = True,
    crosses_leaves: bool | None = None,
    uniform_taper: float = 1.0,
) -> GroupShape:
    """Shape of a group of `gpus` ranks on `system` nodes.

    By default the group takes whole nodes in order (the first `gpus` GPUs, as CUDA_VISIBLE_DEVICES would);
    `ranks_per_node` spreads it instead (e.g. 1 for "the GPUs of one rail" across nodes). Leaf oversubscription
    only slows bytes that leave a leaf: consecutive nodes share their (rail) leaves while they fit under one
    (``crosses_leaves`` None: judged from the node count and the leaf's down-ports; a built topology knows).
    ``uniform_taper`` (>= 1) slows all_to_all's network bytes on a direct network (`GroupShape.uniform_taper`).
    """
    cat = catalog or default_catalog()
    sysm = cat.system(system) if isinstance(system, str) else system
    if gpus < 1:
        raise SpecError(f"need at least 1 GPU, got {gpus}", field="--gpus")
    if oversubscription < 1:
        raise SpecError(f"oversubscription must be >= 1, got {oversubscription}", field="--oversubscription")
    if uniform_taper < 1:
        raise SpecError(f"must be >= 1, got {uniform_taper}", field="uniform_taper")
    ppn = ranks_per_node if ranks_per_node is not None else min(gpus, sysm.gpus_per_node)
    if not 1 <= ppn <= sysm.gpus_per_node:
        raise SpecError(f"ranks per node must be 1..{sysm.gpus_per_node} on {sysm.id}, got {ppn}",
                        field="ranks_per_node")
    nnodes = ceil(gpus / ppn)
    gpu = cat.gpu(sysm.gpu)
    notes: list[str] = []
    intra_link: str | None = None
    if ppn == 1:
        intra_kind: IntraKind = "none"
        intra_line = intra_eff = 0.0
    elif gpu.nvlink is not None and (sysm.intra == "nvswitch" or ppn <= (sysm.nvlink_bridge_gpus or 0)):
        # NVSwitch, or a group inside one NVLink-bridged set (H100 NVL pairs): every GPU's NVLink links reach
        # its peers; larger groups on bridged systems are bound by PCIe between the sets.
        link = cat.link(gpu.nvlink)
        intra_kind = "nvlink"
        intra_link = link.id
        intra_line = gpu.nvlink_links * link.bytes_per_s
        intra_eff = intra_line * link.efficiency
    else:
        link = cat.link(sysm.pcie)
        intra_kind = "pcie"
        intra_link = link.id
        intra_line = link.bytes_per_s
        intra_eff = intra_line * link.efficiency
        notes.append("intra-node traffic over PCIe (no NVLink)")
    nvswitch = cat.switch(sysm.nvswitch) if sysm.nvswitch else None
    intra_path = 0.0
    if intra_kind == "nvlink" and sysm.intra == "nvswitch" and nvswitch is not None:
        intra_path = 2 * link.latency_s + nvswitch.latency_s
    last = gpus - (nnodes - 1) * ppn
    nvls = bool(intra_kind == "nvlink" and nvswitch is not None and nvswitch.sharp and last > 1)
    if 0 < last < ppn:
        notes.append(f"last node holds {last} of {ppn} GPUs; its NICs bound every node's network share")

    net_link = resolve_fabric_link(cat, sysm, fabric) if nnodes > 1 or fabric else None
    switch = fabric_switch_for(cat, net_link) if net_link else None
    leaf_nodes = nodes_per_leaf(switch, sysm, rail_optimized)
    if crosses_leaves is None:
        crosses_leaves = nnodes > leaf_nodes
    hops = 0 if nnodes < 2 or switch is None else (3 if crosses_leaves else 1)
    if oversubscription > 1 and nnodes > 1 and not crosses_leaves:
        notes.append(f"the group's nodes share their leaves: {oversubscription:g}:1 leaf oversubscription "
                     "does not slow it")
        oversubscription = 1.0
    nic = fabric_nic(cat, sysm, net_link)
    if nic.id != sysm.nic:
        notes.append(f"fabric {net_link.id if net_link else '-'} brings NIC {nic.id} ({nic.name})")
    nics_used = nics_for(sysm, ppn)
    min_nics = nics_for(sysm, last)
    if net_link is not None and nnodes > 1:
        port_line = min(nic.port_bytes_per_s, net_link.bytes_per_s, cat.link(sysm.pcie).bytes_per_s)
        if port_line < min(nic.port_bytes_per_s, net_link.bytes_per_s):
            notes.append(f"each NIC is bound by the system's {sysm.pcie} link")
        net_line = min_nics * port_line
        net_eff = net_line * net_link.efficiency / oversubscription
        net_kind: str | None = net_link.kind
    else:
        net_line = net_eff = 0.0
        net_kind = None
    return GroupShape(
        nranks=gpus,
        nnodes=nnodes,
        ranks_per_node=ppn,
        intra_kind=intra_kind,
        intra_bytes_per_s=intra_eff,
        intra_line_bytes_per_s=intra_line,
        net_kind=net_kind,
        net_bytes_per_s_per_node=net_eff,
        net_line_bytes_per_s_per_node=net_line,
        nics_used_per_node=nics_used,
        nvls=nvls,
        sharp=bool(switch is not None and switch.sharp and nnodes > 1),
        system_id=sysm.id,
        fabric_link_id=net_link.id if net_link else None,
        fabric_switch_id=switch.id if switch else None,
        oversubscription=oversubscription,
        uniform_taper=uniform_taper if nnodes > 1 else 1.0,
        notes=tuple(notes) + ((f"all_to_all across nodes at 1/{uniform_taper:.2f} of the NICs' rate: the direct "
                               "network's bisection",) if uniform_taper > 1 and nnodes > 1 else ()),
        intra_link_id=intra_link,
        intra_tuning_link_id=cat.link(intra_link).tuning_as if intra_link else None,
        host_link_id=sysm.cpu_link or sysm.cpu_gpu_link,
        min_ranks_per_node=last,
        min_nics_per_node=min_nics,
        net_path_latency_s=path_latency(net_link, switch, hops),
        net_switch_hops=hops,
        switch_system=intra_kind == "nvlink" and is_switch_system(sysm, gpu),
        intra_path_latency_s=intra_path,
        hosts=(nnodes - 1) * ceil(ppn / host_gpus(sysm)) + ceil(last / host_gpus(sysm)),
    )


def host_gpus(system: System) -> int:
    """GPUs of one host (one OS on its own CPUs): the whole node for a server; a rack-scale node's compute tray,
    the unit `spare_unit_gpus` names (GB200/GB300 NVL72: 2 Grace CPUs and 4 GPUs per tray, each tray its own
    host, DGX GB200 user guide, as the catalog's systems.yaml cites it)."""
    return min(system.spare_unit_gpus or system.gpus_per_node, system.gpus_per_node)


def nodes_per_leaf(switch: Switch | None, sysm: System, rail_optimized: bool) -> int:
    """Nodes whose NICs share one leaf: half its ports face nodes (the other half go up, NVIDIA SuperPOD
    reference design); rail-optimized, each rail has its own leaf so a leaf holds one NIC per node."""
    if switch is None:
        return 1
    down = switch.radix // 2
    return down if rail_optimized else max(1, down // sysm.nics_per_node)


def path_latency(link: LinkTech | None, switch: Switch | None, hops: int) -> float:
    """One-way latency of a node-to-node path: the NIC-switch link at each end and every switch on the way."""
    if link is None:
        return 0.0
    return 2 * link.latency_s + hops * (switch.latency_s if switch else 0.0)


def fabric_nic(cat: Catalog, sysm: System, link: LinkTech | None) -> NIC:
    """The NIC that runs the fabric: the system's own, or for another fabric generation the catalog NIC built for
    it (ConnectX-8 for XDR), as an upgrade would fit it."""
    own = cat.nic(sysm.nic)
    if link is None or own.link == link.id:
        return own
    matches = [n for n in cat.nics.values() if n.link == link.id]
    return max(matches, key=lambda n: n.port_bytes_per_s) if matches else own


def nics_for(sysm: System, gpus_on_node: int) -> int:
    """NICs a node contributes when the group holds `gpus_on_node` of its GPUs (NICs follow their GPUs)."""
    return max(1, round(sysm.nics_per_node * gpus_on_node / sysm.gpus_per_node))


def group_shape_on(topology: Topology, gpus: Sequence[int] | np.ndarray) -> GroupShape:
    """Shape of a group of GPUs (global indices) placed on a built topology: its system, fabric link and
    switches, realised oversubscription and SHARP support."""
    ids = np.asarray(gpus, dtype=np.int64)
    if ids.size < 1 or len(np.unique(ids)) != ids.size:
        raise SpecError("a group needs at least one GPU and no GPU twice", field="gpus")
    if ids.min() < 0 or ids.max() >= topology.num_gpus:
        raise SpecError(f"GPU indices must be 0..{topology.num_gpus - 1}", field="gpus")
    per_node = np.bincount(ids // topology.gpus_per_node)
    shape = group_shape(
        topology.system, int(ids.size), ranks_per_node=int(per_node.max()),
        fabric=topology.fabric_switch.link if topology.fabric_switch.kind in ("infiniband", "ethernet") else None,
        oversubscription=max(1.0, topology.oversubscription), catalog=topology.catalog,
        crosses_leaves=crosses_leaves(topology, ids),
    )
    per_host = host_gpus(topology.system)
    host_of = ids // topology.gpus_per_node * ceil(topology.gpus_per_node / per_host) \
        + ids % topology.gpus_per_node // per_host
    return replace(shape, sharp=bool(topology.sharp and shape.nnodes > 1),
                   fabric_switch_id=topology.fabric_switch.id, hosts=len(np.unique(host_of)))


def crosses_leaves(topology: Topology, gpus: np.ndarray) -> bool:
    """Whether the group's node-to-node traffic, as the topology routes it, climbs above the leaf tier: each GPU
    of the group to the group's GPU of the same local index on every other node (rail-aligned, as NCCL's rings
    and trees send), checked on the links' endpoints."""
    local = gpus % topology.gpus_per_node
    node = gpus // topology.gpus_per_node
    src, dst = [], []
    for index in np.unique(local):
        members = gpus[local == index]
        if len(np.unique(node[local == index])) > 1:
            src.append(np.repeat(members[:1], len(members) - 1))
            dst.append(members[1:])
    if not src:
        return False
    routes = topology.route(np.concatenate(src), np.concatenate(dst))
    ends = np.concatenate([topology.link_src[routes.links], topology.link_dst[routes.links]])
    return bool((topology.endpoint_tier[ends] > 0).any())


def scaled(shape: GroupShape, *, intra: float = 1.0, net: float = 1.0) -> GroupShape:
    """The same group with its intra-node and network rates multiplied (what-if analyses, property tests)."""
    return replace(
        shape,
        intra_bytes_per_s=shape.intra_bytes_per_s * intra,
        intra_line_bytes_per_s=shape.intra_line_bytes_per_s * intra,
        net_bytes_per_s_per_node=shape.net_bytes_per_s_per_node * net,
        net_line_bytes_per_s_per_node=shape.net_line_bytes_per_s_per_node * net,
    )
