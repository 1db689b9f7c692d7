"""Node builders and the Topology array contract: rank order, link pairs, aggregation, kinds, latencies."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.catalog import Catalog
from fabricsim.topology import (
    ENDPOINT_KINDS,
    LINK_KINDS,
    build_cluster,
    build_node,
    endpoint_kind_name,
    link_kind_code,
    link_kind_name,
)

GPU, NIC, CPU = ENDPOINT_KINDS.index("gpu"), ENDPOINT_KINDS.index("nic"), ENDPOINT_KINDS.index("cpu")


def kinds(topo_links: np.ndarray, topo: object) -> list[str]:
    return [link_kind_name(k) for k in topo.link_kind[topo_links]]  # type: ignore[attr-defined]


def test_link_kind_names_round_trip() -> None:
    assert LINK_KINDS == ("nvlink", "nvswitch", "pcie", "infiniband", "ethernet")
    for i, name in enumerate(LINK_KINDS):
        assert link_kind_name(i) == name and link_kind_code(name) == i
    assert endpoint_kind_name(0) == "gpu"


def test_gpu_ranks_are_node_major() -> None:
    topo = build_cluster("dgx-h100", nodes=3)
    assert (topo.num_gpus, topo.gpus_per_node, topo.num_nodes) == (24, 8, 3)
    for g in range(24):
        ep = topo.gpu_endpoint(g)
        assert topo.endpoint_kind[ep] == GPU
        assert topo.node_of_gpu(g) == g // 8 == topo.endpoint_node[ep]
    assert np.array_equal(topo.gpu_endpoints(), [topo.gpu_endpoint(g) for g in range(24)])
    assert topo.endpoint_kind[topo.nic_endpoint(13)] == NIC


def test_links_come_in_reverse_pairs_and_parallel_links_are_aggregated() -> None:
    topo = build_cluster("dgx-h100", nodes=40, tiers=3)
    assert np.array_equal(topo.link_src[0::2], topo.link_dst[1::2])
    assert np.array_equal(topo.link_capacity[0::2], topo.link_capacity[1::2])
    keys = topo.link_src * topo.num_endpoints + topo.link_dst
    assert len(np.unique(keys)) == len(keys), "two links join the same endpoints one way"
    for link in (0, 17, topo.num_links - 1):
        assert topo.link_between(int(topo.link_src[link]), int(topo.link_dst[link])) == link
    assert topo.link_between(0, 1) == -1  # two GPUs have no direct link on an NVSwitch node
    assert topo.link_capacity.dtype == np.float64 and topo.link_latency.dtype == np.float64


def test_hgx_h100_node(catalog: Catalog) -> None:
    topo = build_cluster("dgx-h100", nodes=1)
    path = topo.path(0, 5)
    assert kinds(path, topo) == ["nvswitch", "nvswitch"]
    assert topo.link_capacity[path] == pytest.approx([450e9, 450e9])  # 18 x 25 GB/s per direction, one link
    assert topo.link_latency[path[0]] == pytest.approx(catalog.link("nvlink4").latency_s)
    assert topo.link_latency[path[1]] == pytest.approx(catalog.switch("nvswitch-gen3").latency_s)
    node = topo.node
    assert (node.nvswitch_chips, node.pcie_switches, node.cpus) == (4, 4, 2)
    assert topo.nvlink_domain_size == 8 and topo.nic_bytes_per_s_per_gpu == pytest.approx(50e9)
    assert topo.sharp and topo.fabric_switch.id == "qm9700" and topo.system.id == "dgx-h100"


def test_hgx_gpu_reaches_own_nic_through_its_pcie_switch_and_others_by_pxn() -> None:
    topo = build_cluster("dgx-h100", nodes=1)
    node = topo.node
    own = node.gpu_nic_path[3, node.gpu_nic[3]]
    own = own[own >= 0]
    assert kinds(own, topo) == ["pcie", "pcie"]
    assert topo.link_dst[own[-1]] == topo.nic_endpoint(3)
    assert topo.link_capacity[own] == pytest.approx([63e9, 63e9])
    far = node.gpu_nic_path[0, 7]
    far = far[far >= 0]  # NVLink to GPU 7, then its PCIe switch: NCCL's PXN, not through the CPUs
    assert kinds(far, topo) == ["nvswitch", "nvswitch", "pcie", "pcie"]
    assert CPU not in topo.endpoint_kind[topo.link_dst[far]]


def test_nvl72_rack_is_one_nvlink_domain() -> None:
    topo = build_cluster("gb200-nvl72", nodes=2)
    assert topo.gpus_per_node == 72 and topo.nvlink_domain_size == 72
    path = topo.path(0, 71)
    assert kinds(path, topo) == ["nvswitch", "nvswitch"]
    assert topo.link_capacity[path[0]] == pytest.approx(900e9)  # 18 x 50 GB/s per direction
    assert topo.node.nics == 72 and (topo.node.gpu_nic == np.arange(72)).all()
    out = topo.path(5, 72 + 5)
    assert kinds(out[:1], topo) == ["pcie"]  # GPU -> its NIC
    c2c = (topo.endpoint_kind[topo.link_src] == CPU) & (topo.endpoint_kind[topo.link_dst] == GPU)
    assert c2c.sum() == 2 * 72 and set(topo.link_kind[c2c]) == {LINK_KINDS.index("nvlink")}
    assert topo.link_capacity[c2c] == pytest.approx(450e9)


def test_pcie_only_server() -> None:
    topo = build_cluster("pcie-h100-8gpu", nodes=2)
    assert topo.nvlink_domain_size == 1
    assert not np.isin(topo.link_kind, [LINK_KINDS.index("nvlink"), LINK_KINDS.index("nvswitch")]).any()
    near = topo.path(0, 1)  # same PCIe switch: peer to peer through the switch
    assert kinds(near, topo) == ["pcie", "pcie"]
    assert ENDPOINT_KINDS[topo.endpoint_kind[topo.link_dst[near[0]]]] == "pcie_switch"
    far = topo.path(0, 4)  # other switch, other socket: root complex, UPI, root complex
    ends = topo.endpoint_kind[topo.link_dst[far]]
    assert list(ends).count(CPU) == 2
    upi = far[(topo.endpoint_kind[topo.link_src[far]] == CPU) & (topo.endpoint_kind[topo.link_dst[far]] == CPU)]
    assert len(upi) == 1 and topo.link_capacity[upi[0]] == pytest.approx(4 * 32e9)
    assert topo.nic_endpoint(0) == topo.nic_endpoint(1) != topo.nic_endpoint(2)  # two GPUs share a NIC
    assert topo.nic_bytes_per_s_per_gpu == pytest.approx(25e9)


def test_node_templates_are_consistent(catalog: Catalog) -> None:
    for system in catalog.systems.values():
        node = build_node(system, catalog)
        assert node.gpus == system.gpus_per_node and node.nics == system.nics_per_node
        assert (node.endpoint_kind[: node.gpus] == GPU).all()
        assert (node.endpoint_kind[node.gpus : node.gpus + node.nics] == NIC).all()
        diag = node.gpu_gpu_path[np.arange(node.gpus), np.arange(node.gpus)]
        assert (diag == -1).all()
        assert (node.gpu_nic_path[:, :, 0] >= 0).all() and (node.nic_gpu_path[:, :, 0] >= 0).all()
