"""Symmetric traffic as a quotient: one flow class per kind of flow, one representative link per kind of link.

When a fabric looks the same from every link of a kind (a full fat tree: every leaf uplink, every NIC, every GPU
alike) and the traffic looks the same from every GPU of a kind (an all-to-all over every GPU), and every flow is
split evenly over its equal-cost paths, the max-min rates, and every event of the simulation, are the same for
every flow of a kind and every link of a kind carries the same bytes (the unique max-min allocation is invariant
under the fabric's automorphisms, and so is each step of the event loop). So the simulator can run on the
quotient, exactly: the flows of one representative source GPU of each kind (each standing for every GPU of its
kind: multiplicity), each crossing the representative link of each link kind on its path with weight
``hops / links of the kind`` (the load one link of the kind carries from all of them, averaged: equal, by
symmetry). Flows of a representative source with the same size, stage and kinds of hops merge into one class.

Kinds come from colour refinement (1-dimensional Weisfeiler-Leman) of the topology graph, starting from endpoint
kind and tier and link kind, capacity and latency: the coarsest partition where every endpoint of a colour has
the same number of links of each colour to each neighbour colour. On the fat trees it is used on (equal leaves,
pods and rails) every colour is one orbit of the fabric's automorphisms; the runtime checks that a flow's
equal-cost paths all cross the same kinds of links, and tests/test_flow_symmetry.py checks the quotient against
every flow routed and simulated one by one (split evenly over all its paths) on small fabrics, ideal and under a
fabric's congestion control.

Hashed ECMP is not symmetric (each flow takes one hashed path; the hash's imbalance is the point), so this is its
expectation, not its realisation: `fabricsim.traffic` uses it only where the per-flow run cannot be held
(`SYMMETRIC_FROM_FLOWS`) and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.network.flowclass import flow_classes
from fabricsim.network.flowroute import _route_choices, path_counts
from fabricsim.network.flowsim import FlowResult, FlowSet
from fabricsim.network.maxmin import FloatArray, IntArray
from fabricsim.topology import Topology, flow_hash

REFINE_ROUNDS = 32
"""colour-refinement rounds at most (a fat tree is stable after its diameter, ~10)"""
PATH_SAMPLES = 3
"""equal-cost paths of every representative flow checked to cross the same kinds of links (first, middle, last)"""


@dataclass(frozen=True)
class LinkKinds:
    """The colour (kind) of every link and GPU, and the representative (lowest-numbered) link of each link kind."""

    link_kind: IntArray
    gpu_kind: IntArray
    representative: IntArray
    members: IntArray
    """links of each kind"""


def _mix(a: IntArray, b: IntArray, c: IntArray) -> IntArray:
    out: IntArray = flow_hash(a, b, c).view(np.int64)
    return out


def _dense(values: IntArray) -> tuple[IntArray, int]:
    _, inv = np.unique(values, return_inverse=True)
    inv = inv.ravel().astype(np.int64)
    return inv, int(inv.max(initial=-1)) + 1


def link_kinds(topology: Topology) -> LinkKinds:
    """Colour refinement of the topology graph (see the module docstring)."""
    src, dst = topology.link_src.astype(np.int64), topology.link_dst.astype(np.int64)
    ep, _ = _dense(_mix(topology.endpoint_kind.astype(np.int64), topology.endpoint_tier.astype(np.int64),
                        np.zeros(topology.num_endpoints, dtype=np.int64)))
    gpus = topology.gpu_endpoints()
    is_gpu = np.zeros(topology.num_endpoints, dtype=np.int64)
    is_gpu[gpus] = 1
    ep, _ = _dense(_mix(ep, is_gpu, np.ones_like(ep)))
    lk, _ = _dense(_mix(topology.link_kind.astype(np.int64), topology.link_capacity.view(np.int64),
                        topology.link_latency.view(np.int64)))
    classes = -1
    for _ in range(REFINE_ROUNDS):
        lk, nl = _dense(_mix(lk, ep[src], ep[dst]))
        out_sig = np.zeros(topology.num_endpoints, dtype=np.int64)  # multiset hashes: sums of mixed codes
        in_sig = np.zeros(topology.num_endpoints, dtype=np.int64)
        np.add.at(out_sig, src, _mix(lk, ep[dst], np.full(len(lk), 7, dtype=np.int64)))
        np.add.at(in_sig, dst, _mix(lk, ep[src], np.full(len(lk), 11, dtype=np.int64)))
        ep, ne = _dense(_mix(ep, out_sig, in_sig))
        if nl + ne == classes:
            break
        classes = nl + ne
    lk, nl = _dense(_mix(lk, ep[src], ep[dst]))
    rep = np.full(nl, len(lk), dtype=np.int64)
    np.minimum.at(rep, lk, np.arange(len(lk), dtype=np.int64))
    return LinkKinds(lk, ep[gpus], rep, np.bincount(lk, minlength=nl).astype(np.int64))


def representative_gpus(kinds: LinkKinds) -> tuple[IntArray, IntArray]:
    """(the lowest-numbered GPU of each GPU kind, GPUs of that kind)."""
    uniq, first, count = np.unique(kinds.gpu_kind, return_index=True, return_counts=True)
    del uniq
    return first.astype(np.int64), count.astype(np.int64)


def symmetric_flowset(topology: Topology, kinds: LinkKinds, src: IntArray, dst: IntArray, size: FloatArray,
                      stage: IntArray, multiplicity: FloatArray, stage_release: FloatArray,
                      dep_before: IntArray | None = None, dep_after: IntArray | None = None) -> FlowSet:
    """The quotient flow set of representative flows (src[i] -> dst[i], each standing for multiplicity[i] flows of
    its kind; see the module docstring): over representative links, each class with its row (`FlowSet.origin`).

    Raises SpecError when a flow's equal-cost paths cross different kinds of links (the fabric is not symmetric)."""
    s, d = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    counts = path_counts(topology, s, d)
    paths = _route_choices(topology, s, d, np.zeros(len(s), dtype=np.int64))
    owner = paths.flow_of_entry()
    kind = kinds.link_kind[paths.links]
    signature = np.zeros(len(s), dtype=np.int64)
    np.add.at(signature, owner, _mix(kind, np.zeros_like(kind), np.zeros_like(kind)))
    for k in range(1, PATH_SAMPLES):
        other = _route_choices(topology, s, d, (counts - 1) * k // (PATH_SAMPLES - 1))
        sig = np.zeros(len(s), dtype=np.int64)
        k_other = kinds.link_kind[other.links]
        np.add.at(sig, other.flow_of_entry(), _mix(k_other, np.zeros_like(k_other), np.zeros_like(k_other)))
        if (sig != signature).any():
            raise SpecError("this fabric is not symmetric: equal-cost paths cross different kinds of links, so "
                            "the traffic cannot be simulated by kinds", field="fabric")
    links = kinds.representative[kind].astype(np.int64)
    weights = 1.0 / kinds.members[kind].astype(np.float64)
    latency: FloatArray = np.bincount(owner, weights=topology.link_latency[paths.links],
                                      minlength=len(s)).astype(np.float64)
    release = np.asarray(stage_release, dtype=np.float64)
    empty = np.zeros(0, dtype=np.int64)
    before = empty if dep_before is None else np.asarray(dep_before, dtype=np.int64)
    after = empty if dep_after is None else np.asarray(dep_after, dtype=np.int64)
    stages = np.asarray(stage, dtype=np.int64)
    sizes = np.asarray(size, dtype=np.float64)
    many = np.asarray(multiplicity, dtype=np.float64)
    merged = flow_classes(paths.indptr, links, weights, sizes, stages)
    if merged is None:
        return FlowSet(paths.indptr, links, weights, sizes, latency, stages, release, before, after, many,
                       origin=np.arange(len(s), dtype=np.int64))
    first, cls = merged
    lens = np.diff(paths.indptr)[first]
    indptr = np.zeros(len(first) + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])
    rows = np.concatenate([np.arange(paths.indptr[f], paths.indptr[f + 1]) for f in first]) if len(first) else empty
    top = np.zeros(len(first))
    np.maximum.at(top, cls, latency)
    return FlowSet(indptr, links[rows], weights[rows], sizes[first], top, stages[first], release, before, after,
                   np.bincount(cls, weights=many, minlength=len(first)).astype(np.float64), origin=first)


def expand_links(kinds: LinkKinds, result: FlowResult) -> FlowResult:
    """A quotient run's result with every link given its representative's bytes (each carries as much)."""
    from dataclasses import replace

    return replace(result, link_bytes=result.link_bytes[kinds.representative[kinds.link_kind]])
