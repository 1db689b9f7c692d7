"""`Topology`: a cluster as numpy arrays of endpoints and directed links, with a router over them.

Layout (the contract other layers rely on):
- GPUs are ranks 0..G-1, node-major: GPU g is local GPU ``g % gpus_per_node`` of node ``g // gpus_per_node``.
- Endpoints: node n owns the block ``[n * E, (n + 1) * E)`` (E = endpoints per node: GPUs first, then NICs, then
  the NVSwitch, CPUs and PCIe switches), fabric switches follow all nodes. Links likewise: node n owns
  ``[n * L, (n + 1) * L)``, fabric links follow. Cable i is links 2i (one way) and 2i + 1 (the other way) within
  each block.
- Parallel physical links between two endpoints are one link of summed capacity (an H100's 18 NVLink links to the
  NVSwitch complex are one 450 GB/s link to one logical NVSwitch endpoint); the BOM keeps real chip and cable counts.
- Directed link latency: a link leaving a switch (NVSwitch, PCIe switch, fabric switch) carries the switch's
  port-to-port latency; a link leaving a GPU, NIC or CPU carries its link technology's nominal hop latency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.catalog import NIC, Catalog, Switch, System
from fabricsim.errors import SpecError
from fabricsim.topology.bom import BillOfMaterials, bom
from fabricsim.topology.fabric import Fabric
from fabricsim.topology.nodes import NodeTemplate
from fabricsim.topology.routes import IntArray, Routes, flow_hash, pick
from fabricsim.topology.spec import ClusterSpec

if TYPE_CHECKING:
    import numpy.typing as npt

ROUTE_CHUNK = 1 << 18
"""flows routed per vectorized pass; larger batches are split (same result, bounded memory)"""


@dataclass(frozen=True, eq=False)
class Topology:
    """A built cluster: endpoint and link arrays, the catalog entries used, and routing over them."""

    spec: ClusterSpec
    catalog: Catalog
    node: NodeTemplate
    fabric: Fabric
    fabric_switch: Switch
    """the catalog switch the fabric is built of (also named for a switchless mesh: its link sets the rate)"""
    nic: NIC
    """the compute NIC the fabric uses (the system's, or one that speaks the fabric's protocol)"""
    endpoint_kind: npt.NDArray[np.int8]
    """code into ENDPOINT_KINDS per endpoint"""
    endpoint_node: IntArray
    """node of each endpoint, -1 for fabric switches"""
    endpoint_tier: IntArray
    """fabric tier of each fabric switch (index into ``fabric.tier_names``), -1 for node endpoints"""
    endpoint_rail: IntArray
    """rail of each NIC, rail leaf and rail-pod spine (rail-optimized fat trees; else -1)"""
    link_src: IntArray
    link_dst: IntArray
    link_capacity: npt.NDArray[np.float64]
    """bytes/s per direction"""
    link_latency: npt.NDArray[np.float64]
    """seconds"""
    link_kind: npt.NDArray[np.int8]
    """code into LINK_KINDS per link"""

    # ---- sizes and quick analytical figures ----
    @property
    def system(self) -> System:
        return self.node.system

    @property
    def num_nodes(self) -> int:
        return self.spec.nodes

    @property
    def gpus_per_node(self) -> int:
        return self.node.gpus

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.node.gpus

    @property
    def num_endpoints(self) -> int:
        return len(self.endpoint_kind)

    @property
    def num_links(self) -> int:
        return len(self.link_src)

    @property
    def nvlink_domain_size(self) -> int:
        """GPUs that share one NVLink domain (1 on PCIe-only systems)."""
        return self.system.nvlink_domain_gpus

    @property
    def nic_bytes_per_s_per_gpu(self) -> float:
        """Scale-out bandwidth per GPU, one direction: NICs x NIC link rate / GPUs per node."""
        return self.node.nics * self.nic_link_bytes_per_s / self.node.gpus

    @property
    def nic_link_bytes_per_s(self) -> float:
        """Rate of one NIC's fabric link: the slowest of the NIC port, the switch port and the node's PCIe link."""
        return min(self.nic.port_bytes_per_s, self.fabric_switch.port_bytes_per_s,
                   self.catalog.link(self.system.pcie).bytes_per_s)

    @property
    def oversubscription(self) -> float:
        """Realized leaf oversubscription (node ports / uplinks); 1 for non-blocking, torus and mesh."""
        return self.fabric.oversubscription

    @property
    def tiers(self) -> int:
        """Switch tiers of a fat tree (1-3); 1 for a torus, 0 for a switchless mesh."""
        return self.fabric.tiers

    @property
    def sharp(self) -> bool:
        """Whether the fabric switches reduce in the network (SHARP); False for a switchless mesh."""
        return self.fabric.num_switches > 0 and self.fabric_switch.sharp

    @property
    def bisection_bytes_per_s(self) -> float:
        """Scale-out bisection, one direction (see `fabricsim.topology.bom` for the definition per fabric)."""
        return self.fabric.bisection_bytes_per_s

    # ---- ids ----
    def _check_gpu(self, g: npt.ArrayLike, name: str = "gpu") -> IntArray:
        arr = np.asarray(g, dtype=np.int64)
        if arr.size and (arr.min() < 0 or arr.max() >= self.num_gpus):
            raise SpecError(f"GPU rank out of range 0..{self.num_gpus - 1}", field=name)
        return arr

    def gpu_endpoint(self, g: int) -> int:
        """Endpoint id of GPU rank g."""
        self._check_gpu(g)
        return int((g // self.node.gpus) * self.node.num_endpoints + g % self.node.gpus)

    def gpu_endpoints(self) -> IntArray:
        """Endpoint ids of all GPUs, in rank order."""
        g = np.arange(self.num_gpus, dtype=np.int64)
        return (g // self.node.gpus) * self.node.num_endpoints + g % self.node.gpus

    def node_of_gpu(self, g: int) -> int:
        """Node of GPU rank g."""
        self._check_gpu(g)
        return int(g // self.node.gpus)

    def nic_endpoint(self, g: int) -> int:
        """Endpoint id of GPU g's own NIC (its rail NIC on rail-optimized fabrics)."""
        self._check_gpu(g)
        node, local = divmod(int(g), self.node.gpus)
        return node * self.node.num_endpoints + self.node.gpus + int(self.node.gpu_nic[local])

    def rail_of_gpu(self, g: int) -> int:
        """Rail of GPU g's own NIC (-1 where the fabric has no rails)."""
        return int(self.endpoint_rail[self.nic_endpoint(g)])

    def link_between(self, u: int, v: int) -> int:
        """Id of the directed link u -> v, or -1 when there is none."""
        keys, order = self._link_index
        key = int(u) * self.num_endpoints + int(v)
        i = int(np.searchsorted(keys, key))
        return int(order[i]) if i < len(keys) and keys[i] == key else -1

    @property
    def _link_index(self) -> tuple[IntArray, IntArray]:
        cached = self.__dict__.get("_link_index_cache")
        if cached is None:
            keys = self.link_src * self.num_endpoints + self.link_dst
            order = np.argsort(keys, kind="stable")
            cached = (keys[order], order)
            object.__setattr__(self, "_link_index_cache", cached)
        return cached

    # ---- routing ----
    def route(self, src: npt.ArrayLike, dst: npt.ArrayLike, flow_ids: npt.ArrayLike | None = None) -> Routes:
        """Paths of many flows at once (vectorized): flow i goes from GPU src[i] to GPU dst[i].

        Each flow takes one of its equal-cost paths, picked by `flow_hash(src, dst, flow_id)` (flow_ids default
        to 0). Inside a node the path is the node's fixed route; between nodes it is GPU -> own NIC (via the PCIe
        switch) -> fabric -> NIC -> GPU on fat trees and tori, and via the NIC wired to the peer on a mesh.
        A flow from a GPU to itself has an empty path.
        """
        s = np.atleast_1d(self._check_gpu(src, "src"))
        d = np.atleast_1d(self._check_gpu(dst, "dst"))
        if s.shape != d.shape:
            raise SpecError(f"src and dst differ in length ({len(s)} vs {len(d)})", field="dst")
        f = np.zeros_like(s) if flow_ids is None else np.broadcast_to(np.asarray(flow_ids, dtype=np.int64), s.shape)
        if len(s) > ROUTE_CHUNK:  # bound the padded temporaries (~0.6 KB a flow) on very large batches
            parts = [self.route(s[i : i + ROUTE_CHUNK], d[i : i + ROUTE_CHUNK], f[i : i + ROUTE_CHUNK])
                     for i in range(0, len(s), ROUTE_CHUNK)]
            return Routes.concatenate(parts)
        choice = np.zeros(len(s), dtype=np.int64)
        inter = (s // self.node.gpus) != (d // self.node.gpus)
        if inter.any():
            counts = self.fabric.router.counts(s[inter], d[inter])
            choice[inter] = pick(flow_hash(s[inter], d[inter], f[inter]), counts)
        return self.route_choices(s, d, choice)

    def route_choices(self, s: IntArray, d: IntArray, choice: IntArray) -> Routes:
        """Routes of flows s -> d, each taking equal-cost path number ``choice`` (modulo the path count): what
        `route` does after hashing, exposed for routings that pick paths themselves (spray, adaptive)."""
        gpn, node = self.node.gpus, self.node
        sn, dn = s // gpn, d // gpn
        sl, dl = s % gpn, d % gpn
        inter = sn != dn
        intra_paths = node.gpu_gpu_path[sl[~inter], dl[~inter]]
        intra_paths = np.where(intra_paths >= 0, intra_paths + (sn[~inter] * node.num_links)[:, None], -1)
        if inter.any():
            src_nic, dst_nic, fabric = self.fabric.router.route(s[inter], d[inter], choice[inter])
            up = node.gpu_nic_path[sl[inter], src_nic]
            up = np.where(up >= 0, up + (sn[inter] * node.num_links)[:, None], -1)
            down = node.nic_gpu_path[dst_nic, dl[inter]]
            down = np.where(down >= 0, down + (dn[inter] * node.num_links)[:, None], -1)
            inter_paths = np.concatenate([up, fabric, down], axis=1)
        else:
            inter_paths = np.zeros((0, 1), dtype=np.int64)
        width = max(intra_paths.shape[1], inter_paths.shape[1])
        padded = np.full((len(s), width), -1, dtype=np.int64)
        padded[~inter, : intra_paths.shape[1]] = intra_paths
        padded[inter, : inter_paths.shape[1]] = inter_paths
        return Routes.from_padded(padded)

    def path(self, src_gpu: int, dst_gpu: int, flow_id: int = 0) -> IntArray:
        """Link ids of the path of one flow; the ECMP hash of (src, dst, flow_id) picks among equal-cost paths."""
        return self.route([src_gpu], [dst_gpu], [flow_id])[0]

    def path_count(self, src_gpu: int, dst_gpu: int) -> int:
        """Equal-cost path choices between two GPUs (1 inside a node; torus choices may repeat a path)."""
        s, d = self._check_gpu([src_gpu]), self._check_gpu([dst_gpu])
        if s[0] // self.node.gpus == d[0] // self.node.gpus:
            return 1
        return int(self.fabric.router.counts(s, d)[0])

    def paths(self, src_gpu: int, dst_gpu: int, limit: int | None = None) -> list[IntArray]:
        """All distinct equal-cost paths between two GPUs, in choice order; `path()` always returns one of them.

        Fat trees have at most (radix/2)^2 of them (1,024 at radix 64); pass ``limit`` to take only the first
        ``limit`` choices on large fabrics.
        """
        n = self.path_count(src_gpu, dst_gpu)
        if limit is not None:
            n = min(n, max(limit, 1))
        s = np.full(n, src_gpu, dtype=np.int64)
        d = np.full(n, dst_gpu, dtype=np.int64)
        routes = self.route_choices(s, d, np.arange(n, dtype=np.int64))
        seen: set[bytes] = set()
        out: list[IntArray] = []
        for i in range(n):
            p = routes[i]
            key = p.tobytes()
            if key not in seen:
                seen.add(key)
                out.append(p)
        return out

    def bom(self) -> BillOfMaterials:
        """The bill of materials: counts, cables, cost, power, bisection (see `fabricsim.topology.bom`)."""
        return bom(self, self.spec.storage)
