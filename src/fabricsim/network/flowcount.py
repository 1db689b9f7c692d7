"""Counted flows: a row that stands for several flows between the same two GPUs, of the same size, in the same stage
(its members), routed as flow classes without building a path per member.

A member keeps its own flow id (its index in the per-flow form), so ECMP hashes it exactly as it would hash the
flow on its own: the members of a row are counted per equal-cost choice, chunk by chunk, and each (row, choice)
becomes one class with that many members. Members of a class share links, weights, size and stage, so they are
indistinguishable to the simulator (`fabricsim.network.flowclass`): per-link loads, rates and times equal the
per-flow run's. Spray and adaptive routing do not hash (outside UGAL): a row is one class, its load weighing its
members. Where routing needs every member on its own (multi-plane ECMP, UGAL, failed links), the rows are expanded
to their members and routed per flow, which is the same answer at the per-flow cost.
"""

from __future__ import annotations

import numpy as np

from fabricsim.network.flowroute import PATH_CHUNK, RoutedFlows, _latency, _route_choices, check_routing, route_flows
from fabricsim.network.maxmin import FloatArray, IntArray, index_dtype
from fabricsim.topology import Topology, flow_hash

MEMBER_CHUNK = 1 << 22
"""members hashed per pass (bounded temporaries: about 10 words a member)"""


def _hashes_only(topology: Topology, routing: str) -> bool:
    """Whether the routing takes one hashed path a flow with nothing else per flow (single-plane ECMP, no UGAL, no
    failed link): then members can be counted per choice."""
    multi_plane = topology.fabric.kind == "fat-tree" and topology.spec.planes > 1
    may_ugal = getattr(topology.fabric.router, "minimal_counts", None) is not None
    dead = bool((topology.link_capacity <= 0).any())
    return routing == "ecmp" and not multi_plane and not may_ugal and not dead


def _ecmp_classes(topology: Topology, s: IntArray, d: IntArray, count: IntArray, ids: IntArray
                  ) -> tuple[IntArray, IntArray, IntArray]:
    """(row, choice, members) of every class: the members of each row counted per hashed equal-cost choice."""
    gpn = topology.gpus_per_node
    inter = s // gpn != d // gpn
    ways = np.ones(len(s), dtype=np.int64)
    if inter.any():
        ways[inter] = topology.fabric.router.counts(s[inter], d[inter])
    ends = np.cumsum(count)
    rows_out, choice_out, many_out = [], [], []
    row0 = 0
    while row0 < len(s):  # rows whose members fit a chunk (a row larger than a chunk goes alone)
        row1 = max(int(np.searchsorted(ends, (ends[row0 - 1] if row0 else 0) + MEMBER_CHUNK, side="right")),
                   row0 + 1)
        c = count[row0:row1]
        lo = int(ends[row0 - 1]) if row0 else 0
        row = np.repeat(np.arange(row0, row1, dtype=np.int64), c)
        choice = np.zeros(len(row), dtype=np.int64)
        hop = inter[row]
        if hop.any():
            h = flow_hash(s[row[hop]], d[row[hop]], ids[lo:lo + len(row)][hop])
            choice[hop] = (h % ways[row[hop]].astype(np.uint64)).astype(np.int64)
        key = row * int(ways.max(initial=1)) + choice
        uniq, many = np.unique(key, return_counts=True)
        rows_out.append(uniq // int(ways.max(initial=1)))
        choice_out.append(uniq % int(ways.max(initial=1)))
        many_out.append(many)
        row0 = row1
    cat = np.concatenate
    if not rows_out:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return cat(rows_out), cat(choice_out), cat(many_out).astype(np.int64)


def route_counted(topology: Topology, src: IntArray, dst: IntArray, count: IntArray, ids: IntArray,
                  routing: str = "ecmp", sizes: FloatArray | None = None
                  ) -> tuple[RoutedFlows, IntArray, IntArray]:
    """Route rows of counted flows (row i: count[i] flows src[i] -> dst[i], member flow ids ``ids`` grouped by row in
    row order) as classes: (their routes, the row of every class, its members). See the module docstring."""
    name = check_routing(routing)
    s = np.asarray(src, dtype=np.int64)
    d = np.asarray(dst, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    ids = np.asarray(ids, dtype=np.int64)
    size = np.ones(len(s)) if sizes is None else np.asarray(sizes, dtype=np.float64)
    if _hashes_only(topology, name):
        row, choice, many = _ecmp_classes(topology, s, d, count, ids)
        dtype = index_dtype(topology.num_links)
        lengths, links, latency = [], [], []
        for i in range(0, max(len(row), 1), PATH_CHUNK):
            r = row[i:i + PATH_CHUNK]
            routes = _route_choices(topology, s[r], d[r], choice[i:i + PATH_CHUNK])
            lengths.append(routes.lengths)
            links.append(routes.links.astype(dtype))
            latency.append(_latency(topology, routes))
        indptr = np.zeros(len(row) + 1, dtype=np.int64)
        np.cumsum(np.concatenate(lengths), out=indptr[1:])
        return RoutedFlows(indptr, np.concatenate(links), np.zeros(0), np.concatenate(latency)), row, many
    may_ugal = getattr(topology.fabric.router, "minimal_counts", None) is not None
    if name != "ecmp" and not may_ugal:  # no hash: a row's members take the same paths with the same shares
        rows = np.arange(len(s), dtype=np.int64)
        return route_flows(topology, s, d, name, sizes=size * count), rows, count
    row = np.repeat(np.arange(len(s), dtype=np.int64), count)  # every member on its own (the per-flow answer)
    routed = route_flows(topology, s[row], d[row], name, sizes=size[row], flow_ids=ids)
    return routed, row, np.ones(len(row), dtype=np.int64)
