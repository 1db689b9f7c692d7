"""Node builders: what is inside one server (or rack-scale system) and how its GPUs, NICs and CPUs connect.

Three shapes, chosen from the catalog System:
- `hgx_node`: HGX/DGX 8-GPU NVSwitch server. Every GPU has one aggregated NVLink link to a logical NVSwitch (its
  NVLink links summed: 18 x 25 GB/s = 450 GB/s per direction on H100); GPUs and NICs sit in pairs under PCIe
  switches (the rail layout: GPU g beside its own NIC g); PCIe switches hang off the two CPU sockets, which are
  joined by UPI/xGMI.
- `nvl72_rack`: GB200 NVL72, one 72-GPU NVLink domain behind one logical NVLink switch, one NIC per GPU modelled one
  PCIe hop from its GPU, Grace CPUs on NVLink-C2C (two GPUs each).
- `pcie_node`: PCIe-only 8-GPU server: GPUs talk through their PCIe switch, through the CPU root complex when on
  different switches, and across the socket link when those switches hang off different CPUs; NICs are shared by
  the GPUs of their switch.

Local endpoint order: GPUs 0..G-1, NICs G..G+N-1, then the logical NVSwitch (if any), CPUs and PCIe switches.
GPU g uses NIC g * N // G (its own, rail NIC). The real NVSwitch chip count is kept for the bill of materials.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.caching import ByIdentity
from fabricsim.catalog import Catalog, System
from fabricsim.topology.kinds import CPU, GPU, NIC, NVLINK, NVSWITCH, NVSWITCH_CHIP, PCIE, PCIE_SWITCH
from fabricsim.topology.localgraph import LocalGraph, route_tables
from fabricsim.topology.routes import IntArray

if TYPE_CHECKING:
    import numpy.typing as npt


@dataclass(frozen=True)
class NodeTemplate:
    """One node's endpoints, links and routes in local ids; a cluster repeats it once per node."""

    system: System
    shape: str
    gpus: int
    nics: int
    endpoint_kind: npt.NDArray[np.int8]
    link_src: IntArray
    link_dst: IntArray
    link_capacity: npt.NDArray[np.float64]
    link_latency: npt.NDArray[np.float64]
    link_kind: npt.NDArray[np.int8]
    gpu_nic: IntArray
    """own (rail) NIC of each GPU, as a local NIC index 0..nics-1"""
    gpu_gpu_path: IntArray
    """[G, G, width] local link ids, -1 padded (empty on the diagonal)"""
    gpu_nic_path: IntArray
    """[G, N, width] local link ids from a GPU to any NIC of the node"""
    nic_gpu_path: IntArray
    """[N, G, width] local link ids from a NIC to any GPU of the node"""
    nvswitch_chips: int
    pcie_switches: int
    cpus: int

    @property
    def num_endpoints(self) -> int:
        return len(self.endpoint_kind)

    @property
    def num_links(self) -> int:
        return len(self.link_src)

    def nic_endpoint(self, nic: int) -> int:
        """Local endpoint id of local NIC index ``nic``."""
        return self.gpus + nic


def _owner(i: int, count: int, groups: int) -> int:
    """Group of item i when ``count`` items are split into ``groups`` equal consecutive blocks."""
    return i * groups // count


class _Parts:
    """The catalog facts a node builder needs, looked up once."""

    def __init__(self, system: System, catalog: Catalog) -> None:
        self.system = system
        self.gpu = catalog.gpu(system.gpu)
        self.nic = catalog.nic(system.nic)
        self.host_pcie = catalog.link(system.pcie)
        self.gpu_pcie = catalog.link(self.gpu.pcie)
        self.nic_pcie = catalog.link(self.nic.host_pcie)
        self.pcie_switch = catalog.switch(system.pcie_switch) if system.pcie_switch else None
        self.nvswitch = catalog.switch(system.nvswitch) if system.nvswitch else None
        self.nvlink = catalog.link(self.gpu.nvlink) if self.gpu.nvlink else None
        self.cpu_link = catalog.link(system.cpu_link) if system.cpu_link else None
        self.cpu_gpu_link = catalog.link(system.cpu_gpu_link) if system.cpu_gpu_link else None


def _pcie(a: float, b: float) -> float:
    """A PCIe link runs at the slower of its two ends' generations."""
    return min(a, b)


def _start(parts: _Parts) -> tuple[LocalGraph, list[int], list[int]]:
    graph = LocalGraph()
    gpus = [graph.endpoint(GPU) for _ in range(parts.system.gpus_per_node)]
    nics = [graph.endpoint(NIC) for _ in range(parts.system.nics_per_node)]
    return graph, gpus, nics


def _nvswitch(parts: _Parts, graph: LocalGraph, gpus: list[int]) -> None:
    """One logical NVSwitch; each GPU's NVLink links to the switch chips become one aggregated link. A domain that
    spans racks (``nvlink_rack_gpus``) has one such switch per rack and a second-tier switch above them, each rack
    joined to it at its GPUs' whole NVLink bandwidth (non-blocking: any GPU keeps its rate to any other)."""
    assert parts.nvswitch is not None and parts.nvlink is not None  # guaranteed by Catalog.check_references
    per_gpu = parts.gpu.nvlink_links * parts.nvlink.bytes_per_s
    rack = parts.system.nvlink_rack_gpus or len(gpus)
    tier2 = graph.endpoint(NVSWITCH_CHIP, parts.nvswitch.latency_s) if rack < len(gpus) else None
    for start in range(0, len(gpus), rack):
        nvs = graph.endpoint(NVSWITCH_CHIP, parts.nvswitch.latency_s)
        members = gpus[start : start + rack]
        for g in members:
            graph.cable(g, nvs, per_gpu, NVSWITCH, parts.nvlink.latency_s)
        if tier2 is not None:
            graph.cable(nvs, tier2, per_gpu * len(members), NVSWITCH, parts.nvlink.latency_s)


def _cpus(parts: _Parts, graph: LocalGraph) -> list[int]:
    """CPU sockets, every pair joined by ``cpu_links`` socket links (filed under the pcie/host layer)."""
    cpus = [graph.endpoint(CPU) for _ in range(parts.system.cpus_per_node)]
    if parts.cpu_link is not None and parts.system.cpu_links > 0:
        for i, a in enumerate(cpus):
            for b in cpus[i + 1 :]:
                graph.cable(a, b, parts.system.cpu_links * parts.cpu_link.bytes_per_s, PCIE, parts.cpu_link.latency_s)
    return cpus


def _pcie_tree(parts: _Parts, graph: LocalGraph, gpus: list[int], nics: list[int], cpus: list[int]) -> None:
    """GPUs and NICs under PCIe switches (consecutive blocks), switches under CPUs; or on the CPUs directly."""
    host, lat = parts.host_pcie.bytes_per_s, parts.host_pcie.latency_s
    gpu_rate = _pcie(parts.gpu_pcie.bytes_per_s, host)
    nic_rate = _pcie(parts.nic_pcie.bytes_per_s, host)
    count = parts.system.pcie_switches
    if count == 0:
        for i, g in enumerate(gpus):
            graph.cable(g, cpus[_owner(i, len(gpus), len(cpus))], gpu_rate, PCIE, lat)
        for i, n in enumerate(nics):
            graph.cable(n, cpus[_owner(i, len(nics), len(cpus))], nic_rate, PCIE, lat)
        return
    assert parts.pcie_switch is not None
    switches = [graph.endpoint(PCIE_SWITCH, parts.pcie_switch.latency_s) for _ in range(count)]
    for i, g in enumerate(gpus):
        graph.cable(g, switches[_owner(i, len(gpus), count)], gpu_rate, PCIE, lat)
    for i, n in enumerate(nics):
        graph.cable(n, switches[_owner(i, len(nics), count)], nic_rate, PCIE, lat)
    for s, sw in enumerate(switches):
        graph.cable(sw, cpus[_owner(s, count, len(cpus))], host, PCIE, lat)


def hgx_node(system: System, catalog: Catalog) -> NodeTemplate:
    """HGX/DGX NVSwitch server: full-bisection NVLink domain, GPU-NIC pairs under PCIe switches, two sockets."""
    parts = _Parts(system, catalog)
    graph, gpus, nics = _start(parts)
    _nvswitch(parts, graph, gpus)
    cpus = _cpus(parts, graph)
    _pcie_tree(parts, graph, gpus, nics, cpus)
    return _finish(parts, graph, gpus, nics, "hgx")


def nvl72_rack(system: System, catalog: Catalog) -> NodeTemplate:
    """Rack-scale NVLink system (GB200 NVL72): one NVLink domain, a NIC beside every GPU, CPUs on NVLink-C2C.

    The NIC is modelled one PCIe hop from its GPU (the GPUDirect RDMA path); the tray's actual PCIe wiring through
    the Grace CPU is not modelled.
    """
    parts = _Parts(system, catalog)
    graph, gpus, nics = _start(parts)
    _nvswitch(parts, graph, gpus)
    cpus = _cpus(parts, graph)
    lat = parts.host_pcie.latency_s
    nic_rate = _pcie(_pcie(parts.nic_pcie.bytes_per_s, parts.gpu_pcie.bytes_per_s), parts.host_pcie.bytes_per_s)
    for i, n in enumerate(nics):
        graph.cable(n, gpus[_owner(i, len(nics), len(gpus))], nic_rate, PCIE, lat)
    for i, g in enumerate(gpus):
        cpu = cpus[_owner(i, len(gpus), len(cpus))]
        if parts.cpu_gpu_link is not None:
            graph.cable(g, cpu, parts.cpu_gpu_link.bytes_per_s, NVLINK, parts.cpu_gpu_link.latency_s)
        else:
            graph.cable(g, cpu, _pcie(parts.gpu_pcie.bytes_per_s, parts.host_pcie.bytes_per_s), PCIE, lat)
    return _finish(parts, graph, gpus, nics, "nvl72")


def pcie_node(system: System, catalog: Catalog) -> NodeTemplate:
    """PCIe-only server: no NVLink; GPUs and shared NICs under PCIe switches on two CPU sockets."""
    parts = _Parts(system, catalog)
    graph, gpus, nics = _start(parts)
    cpus = _cpus(parts, graph)
    _pcie_tree(parts, graph, gpus, nics, cpus)
    return _finish(parts, graph, gpus, nics, "pcie")


def build_node(system: System, catalog: Catalog) -> NodeTemplate:
    """The node template of a catalog system: PCIe-only, HGX (NVSwitch + PCIe switches) or rack-scale NVLink.
    Cached per system and catalog (routing an NVL72 rack's tables takes ~50 ms, and a sizing search builds a
    cluster per candidate); its arrays are read-only, so the template can be shared."""
    return _cached_node(system, ByIdentity(catalog))


@lru_cache(maxsize=64)
def _cached_node(system: System, catalog_ref: ByIdentity[Catalog]) -> NodeTemplate:
    node = _new_node(system, catalog_ref.value)
    for f in fields(node):
        value = getattr(node, f.name)
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return node


def _new_node(system: System, catalog: Catalog) -> NodeTemplate:
    if system.intra == "pcie":
        return pcie_node(system, catalog)
    if system.pcie_switches > 0:
        return hgx_node(system, catalog)
    return nvl72_rack(system, catalog)


def _finish(parts: _Parts, graph: LocalGraph, gpus: list[int], nics: list[int], shape: str) -> NodeTemplate:
    n_gpus, n_nics = len(gpus), len(nics)
    # the GPU each NIC serves: its first GPU, or (more NICs than GPUs, e.g. three per GPU) the GPU of its block
    owner = [_owner(n, n_nics, n_gpus) if n_nics > n_gpus else
             next(g for g in range(n_gpus) if _owner(g, n_gpus, n_nics) == n) for n in range(n_nics)]
    gpu_gpu, gpu_nic, nic_gpu = route_tables(graph, gpus, nics, owner)
    return NodeTemplate(
        system=parts.system,
        shape=shape,
        gpus=n_gpus,
        nics=n_nics,
        endpoint_kind=np.array(graph.endpoint_kind, dtype=np.int8),
        link_src=np.array(graph.src, dtype=np.int64),
        link_dst=np.array(graph.dst, dtype=np.int64),
        link_capacity=np.array(graph.capacity, dtype=np.float64),
        link_latency=np.array(graph.latency, dtype=np.float64),
        link_kind=np.array(graph.kind, dtype=np.int8),
        gpu_nic=np.array([_owner(g, n_gpus, n_nics) for g in range(n_gpus)], dtype=np.int64),
        gpu_gpu_path=gpu_gpu,
        gpu_nic_path=gpu_nic,
        nic_gpu_path=nic_gpu,
        nvswitch_chips=parts.system.nvswitch_chips,
        pcie_switches=parts.system.pcie_switches,
        cpus=parts.system.cpus_per_node,
    )
