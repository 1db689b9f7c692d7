"""A small mutable graph used while building one node, and the shortest-path search that routes inside it.

Nodes are tiny (8 GPUs and ~25 endpoints for an HGX server, 181 for an NVL72 rack), so routes inside a node are
found once per system with a plain Dijkstra and stored as tables; every node of a cluster reuses them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fabricsim.topology.kinds import CPU, GPU, NIC, NVLINK, NVSWITCH, PCIE
from fabricsim.topology.routes import IntArray

# Path costs inside a node, in the order NCCL ranks its path types (NVLink < PCIe switch < CPU root complex < across
# sockets): an NVLink hop costs 1, a PCIe hop 2, and a hop into or out of a CPU 4 more. So GPU pairs on an NVSwitch
# talk over NVLink, and a GPU reaches a NIC under another PCIe switch through the GPU next to it over NVLink (NCCL's
# PXN) rather than through the CPUs.
_KIND_COST = {NVLINK: 1.0, NVSWITCH: 1.0, PCIE: 2.0}
_CPU_HOP_COST = 4.0


@dataclass
class LocalGraph:
    """Endpoints and links of one node; link 2i and 2i + 1 are the two directions of cable i."""

    endpoint_kind: list[int] = field(default_factory=list)
    endpoint_latency: list[float | None] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    capacity: list[float] = field(default_factory=list)
    latency: list[float] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    _out: list[list[int]] = field(default_factory=list, repr=False)

    def endpoint(self, kind: int, switch_latency_s: float | None = None) -> int:
        """Add an endpoint; a switch passes its port-to-port latency, charged on links that leave it."""
        self.endpoint_kind.append(kind)
        self.endpoint_latency.append(switch_latency_s)
        return len(self.endpoint_kind) - 1

    def cable(self, a: int, b: int, capacity: float, kind: int, link_latency_s: float) -> None:
        """Connect a and b both ways. A direction leaving a switch costs the switch latency, else the link's."""
        for u, v in ((a, b), (b, a)):
            switch_latency = self.endpoint_latency[u]
            self.src.append(u)
            self.dst.append(v)
            self.capacity.append(capacity)
            self.latency.append(link_latency_s if switch_latency is None else switch_latency)
            self.kind.append(kind)

    def cost(self, link: int) -> float:
        extra = _CPU_HOP_COST if CPU in (self.endpoint_kind[self.src[link]], self.endpoint_kind[self.dst[link]]) else 0
        return _KIND_COST[self.kind[link]] + extra

    def _out_links(self) -> list[list[int]]:
        if len(self._out) != len(self.endpoint_kind) or sum(map(len, self._out)) != len(self.src):
            self._out = [[] for _ in self.endpoint_kind]
            for link, u in enumerate(self.src):
                self._out[u].append(link)
        return self._out

    def shortest_paths(self, source: int, may_transit: Callable[[int, int], bool]) -> list[int]:
        """Dijkstra from source; returns the predecessor link of every endpoint (-1 if unreached).

        ``may_transit(endpoint, in_link)`` says whether a path may continue through an endpoint it entered over
        ``in_link``. Ties break on endpoint id, so the tables are deterministic.
        """
        n = len(self.endpoint_kind)
        out = self._out_links()
        dist = [float("inf")] * n
        pred = [-1] * n
        dist[source] = 0.0
        heap: list[tuple[float, int]] = [(0.0, source)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            if u != source and not may_transit(u, pred[u]):
                continue
            for link in out[u]:
                v = self.dst[link]
                nd = d + self.cost(link)
                if nd < dist[v]:
                    dist[v] = nd
                    pred[v] = link
                    heapq.heappush(heap, (nd, v))
        return pred

    def path_to(self, pred: list[int], target: int) -> list[int]:
        """Link ids from the search source to target, in order."""
        links: list[int] = []
        v = target
        while pred[v] >= 0:
            links.append(pred[v])
            v = self.src[pred[v]]
        return links[::-1]


def pad(paths: list[list[int]], shape: tuple[int, ...]) -> IntArray:
    """Stack paths into an array of the given leading shape, padded with -1 to the longest path."""
    width = max((len(p) for p in paths), default=0)
    out = np.full((len(paths), max(width, 1)), -1, dtype=np.int64)
    for i, p in enumerate(paths):
        out[i, : len(p)] = p
    return out.reshape(*shape, out.shape[1])


def route_tables(graph: LocalGraph, gpus: list[int], nics: list[int],
                 nic_owner: list[int] | None = None) -> tuple[IntArray, IntArray, IntArray]:
    """Local routes: GPU to GPU, GPU to NIC and NIC to GPU (padded link-id arrays, -1 where none).

    GPU-to-GPU paths never pass through another GPU or a NIC. GPU-to-NIC paths may pass through one other GPU when
    they enter it over NVLink (PXN: NVLink to the GPU beside the NIC, then its PCIe path); with ``nic_owner`` (the
    index of the GPU each NIC serves) that relay is the NIC's own GPU, as NCCL pairs each NIC with its GPU, so two
    NICs under one PCIe switch are not both relayed through its first GPU. NIC-to-GPU paths are the GPU-to-NIC paths
    reversed.
    """
    kinds = graph.endpoint_kind

    def no_gpu_transit(v: int, in_link: int) -> bool:
        return kinds[v] not in (GPU, NIC)

    def pxn_transit(v: int, in_link: int) -> bool:
        if kinds[v] == NIC:
            return False
        return kinds[v] != GPU or graph.kind[in_link] in (NVLINK, NVSWITCH)

    gpu_gpu: list[list[int]] = []
    gpu_nic: list[list[int]] = []
    direct = [graph.shortest_paths(g, no_gpu_transit) for g in gpus]
    for gi, g in enumerate(gpus):
        gpu_gpu.extend([] if h == g else graph.path_to(direct[gi], h) for h in gpus)
        pred = graph.shortest_paths(g, pxn_transit)
        for ni, n in enumerate(nics):
            path = graph.path_to(pred, n)
            relay = None if nic_owner is None else nic_owner[ni]
            transit = [graph.dst[link] for link in path[:-1] if kinds[graph.dst[link]] == GPU]
            if relay is not None and transit and transit[0] != gpus[relay]:  # relay through the NIC's own GPU
                path = graph.path_to(direct[gi], gpus[relay]) + graph.path_to(direct[relay], n)
            gpu_nic.append(path)
    nic_gpu = [[link ^ 1 for link in reversed(gpu_nic[gi * len(nics) + ni])] for ni in range(len(nics))
               for gi in range(len(gpus))]
    if sum(1 for p in gpu_gpu if not p) != len(gpus) or any(not p for p in gpu_nic):
        raise RuntimeError("node graph is disconnected")  # a builder bug, not user input
    return (pad(gpu_gpu, (len(gpus), len(gpus))), pad(gpu_nic, (len(gpus), len(nics))),
            pad(nic_gpu, (len(nics), len(gpus))))
