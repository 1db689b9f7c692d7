"""What every fabric builder gets (the context) and returns (a `Fabric`: links, counts, bisection, router)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from fabricsim.catalog import Catalog
from fabricsim.topology.nodes import NodeTemplate
from fabricsim.topology.resolve import Resolved
from fabricsim.topology.routes import IntArray
from fabricsim.topology.spec import ClusterSpec

if TYPE_CHECKING:
    import numpy.typing as npt


@dataclass(frozen=True)
class FabricContext:
    """The cluster a fabric connects: identical nodes laid out node-major, fabric ids after theirs."""

    spec: ClusterSpec
    node: NodeTemplate
    nodes: int
    resolved: Resolved
    catalog: Catalog | None = None
    """for prices when a builder weighs designs (fat tree); None: builders fall back to port counts"""

    @property
    def nics(self) -> int:
        return self.node.nics

    @property
    def radix(self) -> int:
        return self.resolved.switch.radix

    @property
    def port_bytes_per_s(self) -> float:
        return self.resolved.switch.port_bytes_per_s

    @property
    def endpoint_offset(self) -> int:
        """Endpoint id of the first fabric switch."""
        return self.nodes * self.node.num_endpoints

    @property
    def link_offset(self) -> int:
        """Link id of the first fabric link."""
        return self.nodes * self.node.num_links

    def nic_endpoints(self) -> IntArray:
        """Endpoint id of every NIC, indexed by global NIC number node * nics + local NIC."""
        node = np.repeat(np.arange(self.nodes, dtype=np.int64), self.nics)
        local = np.tile(np.arange(self.nics, dtype=np.int64), self.nodes)
        return node * self.node.num_endpoints + self.node.gpus + local

    def own_nic(self, gpu: IntArray) -> tuple[IntArray, IntArray]:
        """(local NIC index, global NIC number) of each GPU's own NIC."""
        local = self.node.gpu_nic[gpu % self.node.gpus]
        return local, (gpu // self.node.gpus) * self.nics + local


class LinkBlock:
    """Accumulates cables (each two directed links, a->b at an even offset, b->a right after) with their ids."""

    def __init__(self, first_link_id: int) -> None:
        self.first = first_link_id
        self.count = 0
        self._parts: list[tuple[IntArray, IntArray, npt.NDArray[np.float64], npt.NDArray[np.float64], int]] = []

    def cables(self, a: IntArray, b: IntArray, capacity: float | npt.NDArray[np.float64], kind: int,
               latency_ab: float, latency_ba: float) -> tuple[IntArray, IntArray]:
        """Add cables a[i] <-> b[i]; returns the link ids of the a->b and b->a directions."""
        n = len(a)
        src = np.empty(2 * n, dtype=np.int64)
        dst = np.empty(2 * n, dtype=np.int64)
        src[0::2], src[1::2] = a, b
        dst[0::2], dst[1::2] = b, a
        cap = np.repeat(np.broadcast_to(np.asarray(capacity, dtype=np.float64), (n,)), 2)
        lat = np.tile(np.array([latency_ab, latency_ba], dtype=np.float64), n)
        self._parts.append((src, dst, cap, lat, kind))
        ab = self.first + self.count + 2 * np.arange(n, dtype=np.int64)
        self.count += 2 * n
        return ab, ab + 1

    def extend(self, other: LinkBlock) -> None:
        """Append another block's cables, whose ids must start where this block's end (planes built in turn)."""
        if other.first != self.first + self.count:
            raise ValueError("link blocks are not contiguous")  # a builder bug, not user input
        self._parts.extend(other._parts)
        self.count += other.count

    def arrays(self) -> tuple[IntArray, IntArray, npt.NDArray[np.float64], npt.NDArray[np.float64],
                              npt.NDArray[np.int8]]:
        """(src, dst, capacity, latency, kind) of every link added, in id order."""
        if not self._parts:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty.copy(), np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int8)
        return (np.concatenate([p[0] for p in self._parts]), np.concatenate([p[1] for p in self._parts]),
                np.concatenate([p[2] for p in self._parts]), np.concatenate([p[3] for p in self._parts]),
                np.concatenate([np.full(len(p[0]), p[4], dtype=np.int8) for p in self._parts]))


class FabricRouter(Protocol):
    """Routes inter-node flows through a fabric. GPU arguments are global GPU ranks on different nodes."""

    def counts(self, src_gpu: IntArray, dst_gpu: IntArray) -> IntArray:
        """Number of equal-cost fabric paths of each flow (>= 1)."""
        ...

    def route(self, src_gpu: IntArray, dst_gpu: IntArray, choice: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """(local NIC the flow leaves by, local NIC it arrives at, fabric link ids padded with -1)."""
        ...


@dataclass(frozen=True)
class CableRun:
    """Cables of one fabric segment, all of one speed; the bill of materials picks their catalog class."""

    segment: str
    count: int
    bytes_per_s: float
    medium: str


@dataclass(frozen=True)
class Fabric:
    """A built scale-out fabric: its switches, links (global ids), cables, bisection and router."""

    kind: str
    description: str
    tiers: int
    oversubscription: float
    tier_names: tuple[str, ...]
    switch_tier: IntArray
    """tier index (into tier_names) of every fabric switch, in endpoint order"""
    switch_rail: IntArray
    """rail of every fabric switch (-1 where it serves no single rail)"""
    rails: int
    """rails of a rail-optimized fabric (NIC i of a node is on rail i % rails); 0 where there are none"""
    links: LinkBlock
    cables: tuple[CableRun, ...]
    bisection_bytes_per_s: float
    router: FabricRouter
    notes: tuple[str, ...] = ()
    """design choices and warnings the bill of materials repeats (an idle tier, an ignored ratio)"""

    @property
    def num_switches(self) -> int:
        return len(self.switch_tier)

    def switches_by_tier(self) -> dict[str, int]:
        counts = np.bincount(self.switch_tier, minlength=len(self.tier_names))
        return {name: int(c) for name, c in zip(self.tier_names, counts, strict=True)}


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
