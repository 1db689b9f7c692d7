"""Shared checks for the topology tests: path validity over many flows at once, max-flow between node sets, and a
fabric swap priced by `whatif`."""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import maximum_flow

from fabricsim.analysis import WhatIf
from fabricsim.topology import Routes, Topology


def all_pairs(topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    g = np.arange(topo.num_gpus)
    s, d = np.meshgrid(g, g, indexing="ij")
    return s.ravel(), d.ravel()


def assert_valid_routes(topo: Topology, src: np.ndarray, dst: np.ndarray, routes: Routes) -> None:
    """Every flow's links chain from its source GPU to its destination GPU without revisiting an endpoint."""
    links, lengths = routes.links, routes.lengths
    assert len(routes) == len(src)
    assert ((lengths > 0) == (src != dst)).all(), "a distinct GPU pair has no path (or a self pair has one)"
    assert (links >= 0).all() and (links < topo.num_links).all()
    flow = routes.flow_of_entry()
    has = lengths > 0
    first, last = routes.indptr[:-1][has], routes.indptr[1:][has] - 1
    gpu_ep = topo.gpu_endpoints()
    assert (topo.link_src[links[first]] == gpu_ep[src[has]]).all(), "a path does not start at its source GPU"
    assert (topo.link_dst[links[last]] == gpu_ep[dst[has]]).all(), "a path does not end at its destination GPU"
    same_flow = flow[1:] == flow[:-1]
    assert (topo.link_dst[links[:-1]][same_flow] == topo.link_src[links[1:]][same_flow]).all(), "a path is broken"
    visited = flow * topo.num_endpoints + topo.link_dst[links]
    assert len(np.unique(visited)) == len(visited), "a path visits an endpoint twice"


def max_flow_gbps(topo: Topology, nodes_a: np.ndarray, nodes_b: np.ndarray, unit: float = 0.5e9) -> float:
    """Max flow (bytes/s, one direction) from the GPUs of nodes_a to the GPUs of nodes_b through the topology."""
    n = topo.num_endpoints
    source, sink = n, n + 1
    gpu_ep = topo.gpu_endpoints().reshape(topo.num_nodes, topo.gpus_per_node)
    big = 10**8
    a_eps, b_eps = gpu_ep[nodes_a].ravel(), gpu_ep[nodes_b].ravel()
    caps = np.rint(topo.link_capacity / unit).astype(np.int64)
    assert np.allclose(caps * unit, topo.link_capacity), "capacity not a multiple of the max-flow unit"
    rows = np.concatenate([topo.link_src, np.full(len(a_eps), source), b_eps])
    cols = np.concatenate([topo.link_dst, a_eps, np.full(len(b_eps), sink)])
    data = np.concatenate([caps, np.full(len(a_eps), big), np.full(len(b_eps), big)])
    graph = sparse.csr_matrix((data.astype(np.int32), (rows, cols)), shape=(n + 2, n + 2))
    return float(maximum_flow(graph, source, sink).flow_value) * unit


def whatif_llama70b(*swaps: str) -> WhatIf:
    """`whatif` of Llama 3 70B (tp 8, pp 4, dp 128) on 4,096 DGX H100 GPUs with the given --swap texts."""
    from fabricsim.analysis import Scenario, parse_swap, what_if
    from fabricsim.catalog import default_catalog
    from fabricsim.model import load_model
    from fabricsim.training import ParallelPlan

    plan = ParallelPlan.build(tp=8, pp=4, dp=128, mbs=1, gbs=1024, seq=8192)
    return what_if(load_model("llama3-70b"), plan, Scenario("dgx-h100", 4096, None, 1.0, default_catalog()),
                   swaps=tuple(parse_swap(text) for text in swaps))
