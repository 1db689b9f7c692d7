"""Collective schedules timed on real topologies agree with the closed forms at line rate."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.catalog import default_catalog
from fabricsim.collectives import CollectiveModel, busbw_factor, group_shape_on, schedule
from fabricsim.collectives.schedule import ring_orders
from fabricsim.errors import SpecError
from fabricsim.network import AnalyticalNetwork, LinkLoadNetwork, schedule_time
from fabricsim.topology import build_cluster


@pytest.mark.parametrize(("system", "nodes", "line_busbw"), [("dgx-h100", 1, 450e9), ("dgx-h100", 2, 400e9),
                                                            ("dgx-a100", 2, 200e9)])
def test_multichannel_ring_on_topology_reaches_line_rate(system: str, nodes: int, line_busbw: float) -> None:
    """8 channels cross node boundaries on 8 different rails, so a ring reaches min(NVLink, 8 NICs)."""
    topo = build_cluster(system, nodes=nodes, fabric="fat-tree")
    n = topo.num_gpus
    size = 2.0**30
    phases = schedule("ring", "all_reduce", n, topo.gpus_per_node, size, channels=topo.gpus_per_node)
    total, _ = schedule_time(LinkLoadNetwork(), topo, np.arange(n), phases)
    busbw = size / total * busbw_factor("all_reduce", n)
    assert busbw == pytest.approx(line_busbw, rel=0.03)


def test_single_channel_ring_is_bound_by_one_nic() -> None:
    topo = build_cluster("dgx-h100", nodes=2, fabric="fat-tree")
    phases = schedule("ring", "all_reduce", 16, 8, 2.0**30, channels=1)
    _, timings = schedule_time(LinkLoadNetwork(), topo, np.arange(16), phases)
    assert {t.bottleneck_kind for t in timings} == {"infiniband"}


def test_ring_orders_use_every_rail_once_per_boundary() -> None:
    orders = ring_orders(32, 8, 8)
    exits = [{order[k] % 8 for order in orders} for k in (7, 15, 23)]
    assert all(e == set(range(8)) for e in exits)
    assert all(sorted(o) == list(range(32)) for o in orders)


def test_link_load_never_faster_than_congestion_unaware() -> None:
    topo = build_cluster("dgx-h100", nodes=4, fabric="fat-tree", oversubscription=2)
    phases = schedule("direct", "all_to_all", 32, 8, 2.0**26)
    slow, _ = schedule_time(LinkLoadNetwork(), topo, np.arange(32), phases)
    fast, _ = schedule_time(AnalyticalNetwork(), topo, np.arange(32), phases)
    assert slow >= fast


def test_in_network_schedules_need_the_flow_simulator() -> None:
    topo = build_cluster("dgx-h100", nodes=1, fabric="fat-tree")
    with pytest.raises(SpecError, match="flow simulator"):
        schedule_time(LinkLoadNetwork(), topo, np.arange(8), schedule("nvls", "all_reduce", 8, 8, 1024.0))


def test_group_on_topology_matches_system_shape() -> None:
    topo = build_cluster("dgx-h100", nodes=16, fabric="fat-tree", oversubscription=2)
    rail = np.arange(0, 128, 8)  # GPU 0 of every node: one rail
    shape = group_shape_on(topo, rail)
    assert (shape.nranks, shape.nnodes, shape.ranks_per_node) == (16, 16, 1)
    assert topo.oversubscription == 2 and shape.oversubscription == 1.0  # 16 nodes: one leaf per rail, no uplink
    assert shape.sharp
    row = CollectiveModel(shape, catalog=default_catalog()).predict("all_reduce", [2**30]).rows[0]
    assert row.bound == "infiniband"
    with pytest.raises(SpecError):
        group_shape_on(topo, [0, 0])
