"""Slim Fly (issue 27: the fabric of DeepSeek's ISCA 2025 cost table): routers of a McKay-Miller-Siran graph of
diameter 2, NICs spread evenly, minimal routing (ECMP over common neighbours). Small instances use switches of 8-14
ports so every GPU pair is checked and max flows are cheap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from scipy.sparse.csgraph import shortest_path

from fabricsim.catalog import Catalog, default_catalog
from fabricsim.comm import direct_taper
from fabricsim.errors import SpecError
from fabricsim.topology import Topology, build_cluster
from fabricsim.topology.slimfly import mms_edges, pick_q, router_degree
from topology_checks import all_pairs, assert_valid_routes, max_flow_gbps

BASE = default_catalog()


def _catalog(radix: int) -> Catalog:
    tiny = BASE.switch("qm9700").model_copy(update={"id": "tiny", "radix": radix})
    return BASE.model_copy(update={"switches": {**BASE.switches, "tiny": tiny}})


def _tiny(nodes: int, radix: int) -> Topology:
    return build_cluster("pcie-h100-8gpu", nodes=nodes, fabric="slim-fly", link="tiny", catalog=_catalog(radix))


@pytest.mark.parametrize("q", [3, 5, 7, 11, 13, 29])
def test_mms_graph_is_regular_of_diameter_two(q: int) -> None:
    a, b = mms_edges(q)
    routers = 2 * q * q
    degree = np.bincount(np.concatenate([a, b]), minlength=routers)
    assert (degree == router_degree(q)).all() and router_degree(q) == (3 * q - (1 if q % 4 == 1 else -1)) // 2
    assert len(set(zip(a.tolist(), b.tolist(), strict=True))) == len(a) and (a != b).all()
    adjacency = sparse.coo_matrix((np.ones(len(a)), (a, b)), shape=(routers, routers))
    assert shortest_path(adjacency + adjacency.T, unweighted=True).max() == 2


@pytest.mark.parametrize(("nodes", "radix"), [(9, 8), (12, 8), (40, 11), (50, 11)])
def test_every_pair_routes_and_counting(nodes: int, radix: int) -> None:
    """Every GPU pair routes within two router hops; every NIC on one cable; no router past its radix; the
    BOM's cables are the links."""
    topo = _tiny(nodes, radix)
    s, d = all_pairs(topo)
    for salt in (0, 7919):
        routes = topo.route(s, d, np.arange(len(s)) * 13 + salt)
        assert_valid_routes(topo, s, d, routes)
    first = topo.num_nodes * topo.node.num_links
    src = topo.link_src[first:]
    ports = np.bincount(src, minlength=topo.num_endpoints)
    assert (ports[topo.endpoint_node < 0] <= radix).all()
    nic = topo.endpoint_kind[topo.nic_endpoint(0)]
    nic_ends = src[topo.endpoint_kind[src] == nic]
    assert len(nic_ends) == len(np.unique(nic_ends)) == nodes * 4
    bill = topo.bom()
    assert bill.cables_total == len(src) // 2


@pytest.mark.parametrize("nodes", [40, 50])
def test_bisection_matches_max_flow_between_node_halves(nodes: int) -> None:
    """Where the node halves sit on the router halves the builder cuts (q = 5, 4 NICs a router), the reported
    bisection is the max flow between them."""
    topo = _tiny(nodes, 11)
    half = np.arange(nodes // 2)
    assert max_flow_gbps(topo, half, np.arange(nodes // 2, nodes)) == pytest.approx(topo.bisection_bytes_per_s)


def test_q_is_the_smallest_prime_that_holds_the_nics_within_the_radix() -> None:
    assert pick_q(32928, 64) == (29, 21)  # DeepSeek's SF row: 32,928 endpoints (their q = 28 is not buildable)
    assert pick_q(19044, 64) == (23, 18)
    with pytest.raises(SpecError, match="no Slim Fly of radix-8"):
        pick_q(1000, 8)


def test_uniform_traffic_runs_at_full_rate_on_a_full_slim_fly() -> None:
    """With ceil(k'/2) NICs a router, a Slim Fly carries uniform traffic at the NICs' rate (Besta and Hoefler): the
    analytical model's all_to_all taper is 1, and the flow simulator's all_to_all matches a fat tree's closely."""
    assert direct_taper(build_cluster("dgx-h100", nodes=4116, fabric="slim-fly")) == 1.0
    from fabricsim.collectives import concurrent_groups_time

    cat = _catalog(11)
    sf = build_cluster("pcie-h100-8gpu", nodes=50, fabric="slim-fly", link="tiny", catalog=cat)
    ft = build_cluster("pcie-h100-8gpu", nodes=50, link="tiny", catalog=cat)
    everyone = np.arange(sf.num_gpus)[None, :]
    t_sf, _ = concurrent_groups_time(sf, everyone, "all_to_all", 64 * 2**20)
    t_ft, _ = concurrent_groups_time(ft, everyone, "all_to_all", 64 * 2**20)
    assert t_ft * 0.95 <= t_sf <= t_ft * 1.25, (t_sf, t_ft)
