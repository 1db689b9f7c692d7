"""Mechanisms of issue 9/10 (coll2): tree heads per NIC, NVLS-tree fill, NVLink bridges, partial nodes, path
latency, oversubscription by tier, fabric NICs; expectations computed by hand."""

from __future__ import annotations

import pytest

from fabricsim.catalog import default_catalog
from fabricsim.collectives import group_shape
from fabricsim.collectives.algorithms import tree_net_rate


def test_tree_crosses_racks_on_its_head_nics_only() -> None:
    """NVL72: 10 tree channels (tuning) of the rack's 72 NDR NICs: 10 x 50 GB/s x 0.94 link efficiency."""
    tuning = default_catalog().tuning("default")
    shape = group_shape("gb200-nvl72", 144)
    assert tree_net_rate(shape, tuning) == pytest.approx(10 * 50e9 * 0.94)


def test_h100_tree_uses_every_nic() -> None:
    """DGX H100: 8 NICs, 8 heads, no cap for nvlink4: 8 x 50 GB/s x 0.94."""
    tuning = default_catalog().tuning("default")
    shape = group_shape("dgx-h100", 16)
    assert tree_net_rate(shape, tuning) == pytest.approx(8 * 50e9 * 0.94)


def test_bridged_pair_runs_over_nvlink_larger_groups_over_pcie() -> None:
    """H100 NVL pair: 12 NVLink 4 links x 25 GB/s = 300 GB/s per direction (600 GB/s both ways, NVIDIA spec);
    four GPUs span two pairs and are bound by PCIe Gen5 x16 (63 GB/s per direction in the catalog)."""
    pair = group_shape("pcie-h100nvl-8gpu", 2)
    assert (pair.intra_kind, pair.intra_line_bytes_per_s) == ("nvlink", pytest.approx(300e9))
    assert not pair.nvls
    quad = group_shape("pcie-h100nvl-8gpu", 4)
    assert (quad.intra_kind, quad.intra_line_bytes_per_s) == ("pcie", pytest.approx(63e9))


def test_partly_filled_last_node_bounds_the_ring_and_forbids_nvls() -> None:
    """9 GPUs on 2 DGX H100: node 2 holds 1 GPU and 1 NIC, so the ring's per-rank rate is one NDR NIC:
    50 GB/s x 0.94 = 47 GB/s busbw (not 8 NICs' 376), and NVLS cannot run on a 1-GPU node."""
    from fabricsim.collectives import CollectiveModel
    from fabricsim.errors import SpecError

    shape = group_shape("dgx-h100", 9)
    assert (shape.ranks_per_node, shape.emptiest_ranks, shape.nics_used_per_node, shape.emptiest_nics) == (8, 1, 8, 1)
    assert not shape.nvls
    row = CollectiveModel(shape).predict("all_reduce", [8 * 2**30], algo="ring").rows[0]
    assert row.busbw_GBps == pytest.approx(47.0, rel=0.01)
    with pytest.raises(SpecError, match="every node"):
        CollectiveModel(shape).predict("all_reduce", [2**20], algo="nvls_tree")


def test_path_latency_enters_network_steps() -> None:
    """2 DGX H100 under one NDR leaf: path = 2 x 0.6 us links + 1 x 150 ns QM9700 = 1.35 us. An 8-byte tree/LL
    all-reduce crosses the network twice (up, down), so a fabric's time differs from NDR by 2 x the path gap."""
    from fabricsim.collectives import CollectiveModel

    ndr = group_shape("dgx-h100", 16, fabric="ndr")
    assert (ndr.net_switch_hops, ndr.net_path_latency_s) == (1, pytest.approx(1.35e-6))
    times = {}
    for fabric in ("ndr", "sdr", "eth-100g"):
        shape = group_shape("dgx-h100", 16, fabric=fabric)
        # beyond the reference HDR path (its 130 ns switch per hop is already in NCCL's NET figure)
        times[fabric] = (CollectiveModel(shape).time_s("all_reduce", 8, algo="tree", proto="LL"),
                         shape.net_path_latency_s - shape.net_switch_hops * 130e-9)
    for fabric in ("sdr", "eth-100g"):
        gap = times[fabric][0] - times["ndr"][0]
        assert gap == pytest.approx(2 * (times[fabric][1] - times["ndr"][1]), rel=1e-3)
        assert gap > 0


def test_xdr_brings_connectx8_bound_by_pcie() -> None:
    """--ib xdr on a DGX H100: ConnectX-8 (800G = 100 GB/s) replaces the 400G CX-7, but PCIe Gen5 x16 feeds each
    NIC only 63 GB/s, so 8 NICs carry 8 x 63 GB/s line (vs 8 x 50 GB/s on NDR)."""
    xdr = group_shape("dgx-h100", 16, fabric="xdr")
    ndr = group_shape("dgx-h100", 16, fabric="ndr")
    assert xdr.net_line_bytes_per_s_per_node == pytest.approx(8 * 63e9)
    assert ndr.net_line_bytes_per_s_per_node == pytest.approx(8 * 50e9)
    assert any("cx8" in note for note in xdr.notes) and any("pcie5" in note for note in xdr.notes)


def test_leaf_oversubscription_only_slows_traffic_that_leaves_the_leaf() -> None:
    """QM9700 leaves have 64 ports, 32 facing nodes: 8 DGX H100 nodes share their rail leaves (no slowdown at
    2:1), 64 nodes span two leaves per rail and their cross-leaf bytes see half the uplinks."""
    flat = group_shape("dgx-h100", 64, fabric="ndr")
    under_leaf = group_shape("dgx-h100", 64, fabric="ndr", oversubscription=2)
    across = group_shape("dgx-h100", 512, fabric="ndr", oversubscription=2)
    assert under_leaf.net_bytes_per_s_per_node == pytest.approx(flat.net_bytes_per_s_per_node)
    assert under_leaf.oversubscription == 1.0 and any("share their leaves" in n for n in under_leaf.notes)
    assert across.net_bytes_per_s_per_node == pytest.approx(flat.net_bytes_per_s_per_node / 2)
    # not rail-optimized: a leaf holds 32 NICs = 4 nodes, so 8 nodes already cross leaves
    plain = group_shape("dgx-h100", 64, fabric="ndr", oversubscription=2, rail_optimized=False)
    assert plain.net_bytes_per_s_per_node == pytest.approx(flat.net_bytes_per_s_per_node / 2)


def test_leaf_crossing_is_read_from_the_built_topology() -> None:
    from fabricsim.collectives import group_shape_on
    from fabricsim.topology import build_cluster

    topo = build_cluster("dgx-h100", nodes=8, fabric="fat-tree", oversubscription=2)
    rail0 = [node * 8 for node in range(8)]  # GPU 0 of each node: one rail, one leaf
    shape = group_shape_on(topo, rail0)
    assert shape.oversubscription == 1.0 and shape.net_switch_hops == 1
    big = build_cluster("dgx-h100", nodes=64, fabric="fat-tree", oversubscription=2)
    across = group_shape_on(big, [node * 8 for node in range(64)])
    assert across.oversubscription == 2.0 and across.net_switch_hops == 3


def test_rail_aligned_data_parallel_under_one_leaf_ignores_oversubscription() -> None:
    from fabricsim.catalog import load_catalog
    from fabricsim.comm.cluster import Cluster
    from fabricsim.model.presets import load_model
    from fabricsim.training.plan import ParallelPlan
    from fabricsim.training.step import predict_training

    cat = load_catalog()
    plan = ParallelPlan.build(gpus=64, tp=8, seq=4096, gbs=64, zero=0, overlap_grad_reduce=False)
    model = load_model("llama3-8b")
    times = [predict_training(model, plan, Cluster(cat.system("dgx-h100"), oversubscription=o, catalog=cat))
             .step_time_s for o in (1.0, 2.0)]
    assert times[0] == pytest.approx(times[1])
