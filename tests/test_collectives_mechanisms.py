"""Hand-computed expectations for the launch floor, NVLS latency and fill, and the double binary tree's bytes."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.catalog import default_catalog
from fabricsim.collectives import CollectiveModel, group_shape
from fabricsim.collectives.algorithms import ALGORITHMS, dtree_bytes_per_direction, launch_floor, nvls_efficiency


def test_dtree_bytes_per_direction_by_node_count() -> None:
    """2 nodes: each node is root of one tree and leaf of the other, S/2 each way per tree -> S per direction."""
    assert dtree_bytes_per_direction(1) == 0.0
    assert dtree_bytes_per_direction(2) == 1.0
    assert dtree_bytes_per_direction(3) == 1.5
    assert all(dtree_bytes_per_direction(n) == 2.0 for n in (4, 8, 33, 64))


def test_tree_two_nodes_one_gpu_moves_s_per_direction() -> None:
    """Tree on 2 nodes x 1 GPU: net time per byte is 1 / (node rate x tree efficiency), not twice that."""
    cat = default_catalog()
    shape = group_shape("dgx-h100", 2, ranks_per_node=1, catalog=cat)
    tuning = cat.tuning("default")
    cost = ALGORITHMS["tree"].cost("all_reduce", shape, "Simple", tuning)
    rate = shape.net_bytes_per_s_per_node * tuning.tree_efficiency
    assert cost.per_byte_s[shape.net_kind or ""] == pytest.approx(1.0 / rate)
    assert cost.select_per_byte_s == pytest.approx(2.0 / rate)  # NCCL's tuner prices 2S (algbw = busBw / 2)


def test_nvls_small_message_near_its_latency() -> None:
    """NVLS at 8 B costs its ~25 us latency (or the launch floor), not the old 85 us."""
    cat = default_catalog()
    shape = group_shape("dgx-h100", 8, catalog=cat)
    t = CollectiveModel(shape, catalog=cat).time_s("all_reduce", 8, algo="nvls")
    tuning = cat.tuning("default")
    expected = max(tuning.hop_latency_s["nvlink"]["nvls"]["Simple"], launch_floor(shape, tuning))
    assert t == pytest.approx(expected, rel=0.01)
    assert t < 40e-6


def test_launch_floor_single_node_counts_gpus_multi_node_one() -> None:
    """nccl-tests -g N on one node launches N kernels per iteration; one process per GPU across nodes launches 1."""
    cat = default_catalog()
    tuning = cat.tuning("default")
    assert launch_floor(group_shape("dgx-h100", 8, catalog=cat), tuning) == pytest.approx(8 * tuning.launch_s)
    assert launch_floor(group_shape("dgx-h100", 16, catalog=cat), tuning) == pytest.approx(tuning.launch_s)
    amd = tuning.launch_scale_by_host_link["xgmi-2"]  # dgx-a100's AMD EPYC host: NCCL's AMD/Intel host-cost ratio
    assert launch_floor(group_shape("dgx-a100", 8, catalog=cat), tuning) == pytest.approx(8 * amd * tuning.launch_s)


def test_nvls_fill_grows_with_domain_ranks() -> None:
    """The NVLS pipeline fill is one step per rank: 72 ranks pay 9x the fill of 8 at large sizes."""
    cat = default_catalog()
    tuning = cat.tuning("default")
    h100 = ALGORITHMS["nvls"].cost("all_reduce", group_shape("dgx-h100", 8, catalog=cat), "Simple", tuning)
    nvl72 = ALGORITHMS["nvls"].cost("all_reduce", group_shape("gb200-nvl72", 72, catalog=cat), "Simple", tuning)
    assert nvl72.fill_s == pytest.approx(9 * h100.fill_s)
    # below the cap the exposed phase costs as much as the transfer: fill(S) = S * per_byte
    small = 1e6
    assert float(h100.fill(np.array([small]))[0]) == pytest.approx(small * h100.total_per_byte_s)


def test_blackwell_nvls_efficiency_is_its_own() -> None:
    """NVLink 5 NVLS efficiency differs from Hopper's 0.85 (NCCL: 0.74 Blackwell; catalog: fitted)."""
    cat = default_catalog()
    tuning = cat.tuning("default")
    assert tuning.nvls_efficiency_by_nvlink["nvlink4"] == pytest.approx(0.85)
    assert tuning.nvls_efficiency_by_nvlink["nvlink5"] < 0.85


def test_two_racks_use_nvls_tree_between_racks() -> None:
    """An NVL72 pair of racks is 2 nodes of 72: NVLS inside each rack, a tree over the racks' NICs."""
    cat = default_catalog()
    shape = group_shape("gb200-nvl72", 144, catalog=cat)
    assert (shape.nnodes, shape.ranks_per_node, shape.nics_used_per_node) == (2, 72, 72)
    row = CollectiveModel(shape, catalog=cat).predict("all_reduce", [8 * 2**30]).rows[0]
    assert row.algorithm == "nvls_tree"


def test_blackwell_baseboard_runs_nvls_and_the_rack_keeps_its_own_figure() -> None:
    """8x B200 (NVSwitch baseboard): NCCL's Blackwell NVLS figure, so auto picks NVLS over the ring at 8 GB, near
    the ~830 GB/s busbw users measure; the NVL72 rack (each GPU link on its own switch chip) keeps its figure."""
    cat = default_catalog()
    tuning = cat.tuning("default")
    b200 = group_shape("dgx-b200", 8, catalog=cat)
    rack = group_shape("gb200-nvl72", 72, catalog=cat)
    partial = group_shape("gb200-nvl72/64", 64, catalog=cat)
    assert (b200.switch_system, rack.switch_system, partial.switch_system) == (False, True, True)
    assert nvls_efficiency(b200, tuning) == pytest.approx(0.74)
    assert nvls_efficiency(rack, tuning) < nvls_efficiency(b200, tuning)
    row = CollectiveModel(b200, catalog=cat).predict("all_reduce", [8 * 2**30]).rows[0]
    assert row.algorithm == "nvls"
    assert 750 < row.busbw_GBps < 900
    ring = CollectiveModel(b200, catalog=cat).predict("all_reduce", [8 * 2**30], algo="ring").rows[0]
    assert ring.busbw_GBps < row.busbw_GBps
