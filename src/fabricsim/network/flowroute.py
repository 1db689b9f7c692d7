"""Path choice for the flow simulator: ECMP (one hashed path per flow), spray (an even split over the equal-cost
paths, per packet) and adaptive (a split over the equal-cost paths weighted away from loaded links).

The topology's router gives the equal-cost paths; spray and adaptive take up to `max_paths` of them per flow
(all of them on 2-tier fat trees; an even sample of the (spine, core) choices on large 3-tier ones) and turn a flow
into weighted incidence entries: weight w on a link means w of the flow's rate crosses it. Where a router's choices
are interchangeable links of one bundle (a dragonfly's global links, ``sample_per_flow``), each flow's sample starts
at its own hashed offset, so the flows of a group pair spread over all of them rather than one fixed few.

ECMP on a multi-plane fat tree stripes each flow between nodes over every plane (its hashed path in each, 1/N of
the bytes), as NCCL spreads a NIC's channels over its ports; under UGAL (dragonfly) each flow's class of paths,
minimal or not, is chosen by load first (`fabricsim.network.ugal`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.network.maxmin import FloatArray, IntArray, index_dtype
from fabricsim.network.ugal import ugal_classes
from fabricsim.topology import Routes, Topology, flow_hash

if TYPE_CHECKING:
    import numpy.typing as npt

ROUTINGS = ("ecmp", "adaptive", "spray")
MAX_PATHS = 16
"""equal-cost paths a sprayed or adaptive flow is split over, at most"""
ADAPTIVE_ROUNDS = 12
PATH_CHUNK = 1 << 18


@dataclass(frozen=True)
class RoutedFlows:
    """Weighted CSR incidence of flows (flow i: ``links[indptr[i]:indptr[i+1]]``) and their path latency."""

    indptr: IntArray
    links: IntArray
    weights: FloatArray
    """fraction of the flow on each entry's link; empty when every flow takes one path (ECMP: all 1)"""
    latency: FloatArray


def check_routing(routing: str) -> str:
    """The routing name, or a SpecError listing the allowed ones."""
    name = routing.strip().lower()
    if name not in ROUTINGS:
        raise SpecError(f"unknown routing {routing!r}; choose one of {', '.join(ROUTINGS)}", field="--routing")
    return name


def _route_choices(topology: Topology, s: IntArray, d: IntArray, choice: IntArray) -> Routes:
    """Paths of flows with their equal-cost choice given (not hashed), in chunks of bounded memory.

    Uses the topology's choice router (``Topology.route_choices``; `Topology.route` hashes the choice).
    """
    parts = [topology.route_choices(s[i:i + PATH_CHUNK], d[i:i + PATH_CHUNK], choice[i:i + PATH_CHUNK])
             for i in range(0, len(s), PATH_CHUNK)]
    return Routes.concatenate(parts) if parts else Routes(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))


def _latency(topology: Topology, routes: Routes) -> FloatArray:
    out: FloatArray = np.bincount(routes.flow_of_entry(), weights=topology.link_latency[routes.links],
                                  minlength=len(routes)).astype(np.float64, copy=False)
    return out


def path_counts(topology: Topology, s: IntArray, d: IntArray) -> IntArray:
    """Equal-cost path choices of every flow (1 inside a node)."""
    counts = np.ones(len(s), dtype=np.int64)
    inter = (s // topology.gpus_per_node) != (d // topology.gpus_per_node)
    if inter.any():
        counts[inter] = topology.fabric.router.counts(s[inter], d[inter])
    return counts


def _minimal_counts(topology: Topology, s: IntArray, d: IntArray, counts: IntArray) -> IntArray | None:
    """Choices of each flow that are minimal paths (the first ones), where the router offers non-minimal ones
    (a dragonfly under UGAL); None when every choice is minimal."""
    minimal_of = getattr(topology.fabric.router, "minimal_counts", None)
    if minimal_of is None:
        return None
    minimal = counts.copy()
    inter = (s // topology.gpus_per_node) != (d // topology.gpus_per_node)
    if inter.any():
        minimal[inter] = minimal_of(s[inter], d[inter])
    return minimal if (minimal < counts).any() else None


def split_paths(topology: Topology, s: IntArray, d: IntArray, routing: str, max_paths: int = MAX_PATHS
                ) -> IntArray | None:
    """Paths `route_flows` routes for each flow before merging them (its UGAL candidates included), or None
    when it routes one hashed path a flow (ECMP on a single-plane fabric without UGAL)."""
    counts = path_counts(topology, s, d)
    minimal = _minimal_counts(topology, s, d, counts)
    planes = topology.fabric.kind == "fat-tree" and topology.spec.planes > 1
    if check_routing(routing) == "ecmp" and minimal is None and not planes:
        return None
    k = _plane_ways(topology, s, d) if routing == "ecmp" else np.minimum(counts, max(1, max_paths))
    if minimal is not None:
        k = k + (counts > minimal)  # UGAL's minimal and non-minimal candidates, freed before the final paths
    out: IntArray = k.astype(np.int64)
    return out


def _plane_ways(topology: Topology, s: IntArray, d: IntArray) -> IntArray:
    """Planes each flow is striped over: every plane between nodes of a multi-plane fabric (NCCL spreads a
    NIC's channels over its ports, one per plane), 1 inside a node and on single-plane fabrics."""
    planes = topology.spec.planes if topology.fabric.kind == "fat-tree" else 1
    inter = (s // topology.gpus_per_node) != (d // topology.gpus_per_node)
    return np.where(inter, planes, 1).astype(np.int64)


def route_flows(topology: Topology, src: npt.ArrayLike, dst: npt.ArrayLike, routing: str = "ecmp",
                sizes: npt.ArrayLike | None = None, flow_ids: npt.ArrayLike | None = None,
                max_paths: int = MAX_PATHS) -> RoutedFlows:
    """Route flows from GPU src[i] to GPU dst[i]; `sizes` (bytes) weigh the load adaptive and UGAL steer by.

    ECMP on a multi-plane fabric stripes a flow evenly over the planes (the hashed path in each; a plane whose
    path has a dead link gets none of it), so a flow's rate can reach its NIC's, the sum of the plane ports.
    Under UGAL (dragonfly) every routing first picks each flow's class of paths, minimal or not
    (`fabricsim.network.ugal`), then spreads it over that class's choices.
    """
    name = check_routing(routing)
    s = np.atleast_1d(np.asarray(src, dtype=np.int64))
    d = np.atleast_1d(np.asarray(dst, dtype=np.int64))
    multi_plane = topology.fabric.kind == "fat-tree" and topology.spec.planes > 1
    may_ugal = getattr(topology.fabric.router, "minimal_counts", None) is not None  # a dragonfly's router
    # the flow ids the hashes take (ECMP, UGAL, a dragonfly's per-flow samples); not made where unused
    ids = np.zeros(0, dtype=np.int64) if name != "ecmp" and not may_ugal else \
        np.arange(len(s), dtype=np.int64) if flow_ids is None else np.asarray(flow_ids, dtype=np.int64)
    if name == "ecmp" and not multi_plane and not may_ugal:
        return _avoid_dead(topology, s, d, ids, _ecmp(topology, s, d, ids))
    if s.shape != d.shape:
        raise SpecError(f"src and dst differ in length ({len(s)} vs {len(d)})", field="dst")
    if len(s) and (min(s.min(), d.min()) < 0 or max(s.max(), d.max()) >= topology.num_gpus):
        raise SpecError(f"GPU rank out of range 0..{topology.num_gpus - 1}", field="src")
    counts = path_counts(topology, s, d)
    def size() -> FloatArray:  # made only where load steers (adaptive, UGAL)
        out: FloatArray = np.ones(len(s)) if sizes is None else \
            np.broadcast_to(np.asarray(sizes, dtype=np.float64), s.shape)
        return out

    base: IntArray | None = None  # the first choice of each flow's class (None: 0, every choice in it)
    span = counts
    minimal = _minimal_counts(topology, s, d, counts)
    if minimal is not None:
        base, span = ugal_classes(topology, s, d, ids, size(), counts, minimal,
                                  lambda a, b, c: _route_choices(topology, a, b, c))
    elif name == "ecmp" and not multi_plane:
        return _avoid_dead(topology, s, d, ids, _ecmp(topology, s, d, ids))
    if name == "ecmp":
        k = _plane_ways(topology, s, d)
        flow_of_path = np.repeat(np.arange(len(s), dtype=np.int64), k)
        j = np.arange(len(flow_of_path), dtype=np.int64) - np.repeat(np.cumsum(k) - k, k)
        ways = k[flow_of_path]
        sub = np.maximum(span[flow_of_path] // ways, 1).astype(np.uint64)
        h = flow_hash(s[flow_of_path], d[flow_of_path], ids[flow_of_path] * ways + j)
        # a multi-plane router's choice c takes plane c % planes and that plane's path c // planes
        choice = j + ways * (h % sub).astype(np.int64)
    else:
        k = np.minimum(span, max(1, max_paths))
        flow_of_path = np.repeat(np.arange(len(s), dtype=np.int64), k)
        j = np.arange(len(flow_of_path), dtype=np.int64) - np.repeat(np.cumsum(k) - k, k)
        stride = np.maximum(span // k, 1)[flow_of_path]
        choice = j * stride + j % stride
        if may_ugal and getattr(topology.fabric.router, "sample_per_flow", False):  # interchangeable: vary it
            choice += (flow_hash(s, d, ids) % np.maximum(span, 1).astype(np.uint64)).astype(np.int64)[flow_of_path]
        choice %= span[flow_of_path]
    if base is not None:
        choice += base[flow_of_path]
    paths = _route_choices(topology, s[flow_of_path], d[flow_of_path], choice)
    if len(flow_of_path) == len(s):  # one path a flow (UGAL under ECMP): no weights, nothing to merge
        return RoutedFlows(paths.indptr, paths.links.astype(index_dtype(topology.num_links)), np.zeros(0),
                           _latency(topology, paths))
    share = _live_planes(topology, paths, flow_of_path, 1.0 / k[flow_of_path])
    if name == "adaptive":
        share = _adaptive_split(topology, paths, flow_of_path, share, size())
    latency = np.zeros(len(s))
    np.maximum.at(latency, flow_of_path, _latency(topology, paths))
    return _merge(len(s), topology.num_links, paths, flow_of_path, share, latency)


def _ecmp(topology: Topology, s: IntArray, d: IntArray, ids: IntArray) -> RoutedFlows:
    """One hashed path a flow, routed in chunks whose links are kept as `index_dtype` (no weights: all 1)."""
    if s.shape != d.shape:
        raise SpecError(f"src and dst differ in length ({len(s)} vs {len(d)})", field="dst")
    dtype = index_dtype(topology.num_links)
    lengths, links, latency = [], [], []
    for i in range(0, max(len(s), 1), PATH_CHUNK):
        routes = topology.route(s[i:i + PATH_CHUNK], d[i:i + PATH_CHUNK], ids[i:i + PATH_CHUNK])
        lengths.append(routes.lengths)
        links.append(routes.links.astype(dtype))
        latency.append(_latency(topology, routes))
        del routes
    indptr = np.zeros(len(s) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(lengths), out=indptr[1:])
    return RoutedFlows(indptr, np.concatenate(links), np.zeros(0), np.concatenate(latency))


def _avoid_dead(topology: Topology, s: IntArray, d: IntArray, ids: IntArray, routed: RoutedFlows) -> RoutedFlows:
    """ECMP around failed (zero-capacity) links: a flow hashed onto a path through one takes the next of its
    equal-cost choices that avoids them, as a switch's hash skips a port whose link is down (a flow with no such
    choice keeps its path, and the simulator reports it stuck)."""
    dead_link = topology.link_capacity <= 0
    if not dead_link.any() or len(s) == 0:
        return routed
    old = Routes(routed.indptr, routed.links)
    hit = np.zeros(len(s), dtype=bool)
    np.logical_or.at(hit, old.flow_of_entry(), dead_link[old.links])
    todo = np.flatnonzero(hit)
    if len(todo) == 0:
        return routed
    counts = path_counts(topology, s[todo], d[todo]).astype(np.uint64)
    h = flow_hash(s[todo], d[todo], ids[todo]).astype(np.uint64)
    choice = np.full(len(todo), -1, dtype=np.int64)  # the first live choice after the hashed one (-1: none yet)
    for step in range(1, int(counts.max(initial=1))):
        left = np.flatnonzero((choice < 0) & (counts > step))
        if len(left) == 0:
            break
        tried = ((h[left] + np.uint64(step)) % counts[left]).astype(np.int64)
        found = _route_choices(topology, s[todo[left]], d[todo[left]], tried)
        bad = np.zeros(len(left), dtype=bool)
        np.logical_or.at(bad, found.flow_of_entry(), dead_link[found.links])
        choice[left[~bad]] = tried[~bad]
    moved = np.flatnonzero(choice >= 0)
    if len(moved) == 0:
        return routed
    flows = todo[moved]
    new = _route_choices(topology, s[flows], d[flows], choice[moved])
    keep = np.ones(len(s), dtype=bool)
    keep[flows] = False
    owner = old.flow_of_entry()
    kept = keep[owner]
    # every flow's entries in order: the kept flows' own, then the moved flows' new paths, by flow (stable)
    entry_flow = np.concatenate([owner[kept], np.repeat(flows, new.lengths)])
    order = np.argsort(entry_flow, kind="stable")
    links = np.concatenate([old.links[kept], new.links.astype(old.links.dtype)])[order]
    indptr = np.zeros(len(s) + 1, dtype=np.int64)
    np.cumsum(np.bincount(entry_flow, minlength=len(s)), out=indptr[1:])
    paths = Routes(indptr, links)
    return RoutedFlows(indptr, links, routed.weights, _latency(topology, paths))


def _live_planes(topology: Topology, paths: Routes, flow_of_path: IntArray, share: FloatArray) -> FloatArray:
    """Shares of a flow's paths (its planes, or its sprayed or adaptive paths), none on a path with a dead
    (zero-capacity: failed) link: its share moves to the others (a flow with every path dead keeps its split, and
    the simulator reports it stuck)."""
    dead = np.zeros(len(paths), dtype=bool)
    np.logical_or.at(dead, paths.flow_of_entry(), topology.link_capacity[paths.links] <= 0)
    if not dead.any():
        return share
    live = np.where(dead, 0.0, share)
    total = np.bincount(flow_of_path, weights=live)
    keep = total[flow_of_path] > 0
    out: FloatArray = np.where(keep, live / np.where(keep, total[flow_of_path], 1.0), share)
    return out


def _adaptive_split(topology: Topology, paths: Routes, flow_of_path: IntArray, share: FloatArray,
                    size: FloatArray) -> FloatArray:
    """Shift each flow's split towards its less loaded paths (load = bytes over capacity, all flows at once)."""
    entry_path = paths.flow_of_entry()
    lens = paths.lengths
    nonempty = lens > 0
    starts = paths.indptr[:-1][nonempty]
    w = share.copy()
    capacity = np.where(topology.link_capacity > 0, topology.link_capacity, np.nan)  # failed: no load figure
    for _ in range(ADAPTIVE_ROUNDS):
        load = np.nan_to_num(np.bincount(paths.links, weights=(size[flow_of_path] * w)[entry_path],
                                         minlength=topology.num_links) / capacity, nan=np.inf)
        cost = np.zeros(len(w))
        if len(starts):
            cost[nonempty] = np.maximum.reduceat(load[paths.links], starts)
        best = np.full(int(flow_of_path.max()) + 1 if len(flow_of_path) else 0, np.inf)
        np.minimum.at(best, flow_of_path, cost)
        with np.errstate(divide="ignore", invalid="ignore"):
            pref = np.where(cost > 0, (best[flow_of_path] / cost) ** 4, 1.0)
        target = w * np.nan_to_num(pref, nan=1.0)
        norm = np.bincount(flow_of_path, weights=target, minlength=len(best))
        w = 0.5 * w + 0.5 * target / norm[flow_of_path]
    return w


def _merge(flows: int, num_links: int, paths: Routes, flow_of_path: IntArray, share: FloatArray,
           latency: FloatArray) -> RoutedFlows:
    """One weighted entry per (flow, link): the shares of a flow's paths that cross the link, summed."""
    entry_path = paths.flow_of_entry()
    key = flow_of_path[entry_path] * num_links + paths.links
    uniq, inv = np.unique(key, return_inverse=True)
    weights = np.bincount(inv, weights=share[entry_path], minlength=len(uniq)).astype(np.float64)
    flow = uniq // num_links
    indptr = np.zeros(flows + 1, dtype=np.int64)
    np.cumsum(np.bincount(flow, minlength=flows), out=indptr[1:])
    return RoutedFlows(indptr, (uniq % num_links).astype(index_dtype(num_links)), weights, latency)
