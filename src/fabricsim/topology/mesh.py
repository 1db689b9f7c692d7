"""Full mesh for small clusters: nodes wired NIC to NIC, no switches.

With N nodes and n NICs each, every node pair gets ``n // (N - 1)`` direct cables (NICs left over stay unused):
NIC j of node a connects to node ``a + 1 + j % (N - 1)`` (mod N). A flow leaves by a NIC wired to its destination
node, reached inside the node over NVLink and the PCIe switch (PXN) or over PCIe; the hash picks among the
parallel cables that need the fewest hops inside the two nodes.
Bisection: floor(N/2) x ceil(N/2) x cables per pair x NIC rate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology.fabric import CableRun, Fabric, FabricContext, LinkBlock
from fabricsim.topology.routes import IntArray

if TYPE_CHECKING:
    pass

BoolArray = np.ndarray[tuple[Any, ...], np.dtype[np.bool_]]


class MeshRouter:
    """Routes over direct node-to-node cables. A node pair's parallel cables are equal-cost when they need the
    fewest hops inside the two nodes (a cable on the source GPU's own NIC, or on the destination GPU's, beats
    one reached by PXN on both sides); the choice indexes those."""

    def __init__(self, ctx: FabricContext, per_pair: int, link_of_nic: IntArray) -> None:
        self.ctx, self.per_pair, self.link_of_nic = ctx, per_pair, link_of_nic
        node = ctx.node
        self.up_hops = (node.gpu_nic_path >= 0).sum(axis=-1)  # [gpu, nic]
        self.down_hops = (node.nic_gpu_path >= 0).sum(axis=-1)  # [nic, gpu]

    def _candidates(self, src_gpu: IntArray, dst_gpu: IntArray) -> tuple[BoolArray, IntArray, IntArray]:
        """(is-best mask [F, cables per pair], source NIC [F, c], destination NIC [F, c])."""
        gpn, n = self.ctx.node.gpus, self.ctx.nodes
        peers = n - 1
        a, b = src_gpu // gpn, dst_gpu // gpn
        p = ((b - a - 1) % n)[:, None]
        r = np.arange(self.per_pair, dtype=np.int64)[None, :]
        src_nic, dst_nic = r * peers + p, r * peers + (n - 2 - p)
        hops = self.up_hops[(src_gpu % gpn)[:, None], src_nic] + self.down_hops[dst_nic, (dst_gpu % gpn)[:, None]]
        best: BoolArray = hops == hops.min(axis=1, keepdims=True)
        return best, src_nic, dst_nic

    def counts(self, src_gpu: IntArray, dst_gpu: IntArray) -> IntArray:
        best, _, _ = self._candidates(src_gpu, dst_gpu)
        counts: IntArray = np.count_nonzero(best, axis=1).astype(np.int64)
        return counts

    def route(self, src_gpu: IntArray, dst_gpu: IntArray, choice: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        best, src_nic, dst_nic = self._candidates(src_gpu, dst_gpu)
        rank = np.cumsum(best, axis=1) - 1  # index of each candidate among the best
        col = np.argmax(best & (rank == choice[:, None]), axis=1)
        rows = np.arange(len(src_gpu))
        s_nic, d_nic = src_nic[rows, col], dst_nic[rows, col]
        link = self.link_of_nic[(src_gpu // self.ctx.node.gpus) * self.ctx.nics + s_nic]
        return s_nic, d_nic, link[:, None]


def build_mesh(ctx: FabricContext) -> Fabric:
    """Direct NIC-to-NIC full mesh; a SpecError names the node limit (NICs per node + 1)."""
    spec, nics, n = ctx.spec, ctx.nics, ctx.nodes
    if spec.tiers is not None or spec.oversubscription != 1.0:
        raise SpecError("tiers and oversubscription apply to fat trees only", field="fabric")
    if n > nics + 1:
        raise SpecError(f"a full mesh of {ctx.node.system.id} nodes ({nics} NICs each) holds at most {nics + 1}"
                        f" nodes; asked for {n}", field="nodes")
    peers = max(n - 1, 1)
    per_pair = nics // peers
    block = LinkBlock(ctx.link_offset)
    link_of_nic = np.full(n * nics, -1, dtype=np.int64)
    rate = ctx.resolved.nic_link_bytes_per_s
    cables: list[CableRun] = []
    if n >= 2:
        a = np.repeat(np.arange(n, dtype=np.int64), per_pair * peers)
        j = np.tile(np.arange(per_pair * peers, dtype=np.int64), n)
        p, r = j % peers, j // peers
        b = (a + p + 1) % n
        j_peer = r * peers + (n - 2 - p)
        keep = a < b  # each cable once, from its lower-numbered node
        nic_ep = ctx.nic_endpoints()
        lat = ctx.resolved.link.latency_s
        ab, ba = block.cables(nic_ep[a[keep] * nics + j[keep]], nic_ep[b[keep] * nics + j_peer[keep]], rate,
                              ctx.resolved.link_kind, lat, lat)
        link_of_nic[a[keep] * nics + j[keep]] = ab
        link_of_nic[b[keep] * nics + j_peer[keep]] = ba
        cables.append(CableRun("node-node", int(keep.sum()), rate, spec.node_cable))
    bisection = (n // 2) * (n - n // 2) * per_pair * rate
    return Fabric(
        kind="mesh",
        description=f"full mesh of {n} nodes, {per_pair} cable(s) per node pair, no switches",
        tiers=0,
        oversubscription=1.0,
        tier_names=(),
        switch_tier=np.zeros(0, dtype=np.int64),
        switch_rail=np.zeros(0, dtype=np.int64),
        rails=0,
        links=block,
        cables=tuple(cables),
        bisection_bytes_per_s=float(bisection),
        router=MeshRouter(ctx, max(per_pair, 1), link_of_nic),
    )
