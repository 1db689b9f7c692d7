"""UGAL (Singh, PhD thesis, Stanford 2005; on dragonflies Kim, Dally, Scott, Abts, "Technology-Driven,
Highly-Scalable Dragonfly Topology", ISCA 2008) for the flow simulator: a flow between dragonfly groups takes its
minimal path unless a non-minimal (Valiant) one is less loaded, so UGAL is never worse than minimal routing by
the load it sees.

Flow-level form, all flows at once: every flow starts on its hashed minimal path (the path minimal routing's ECMP
gives it); each round, a flow compares the busiest link of its current path (load in seconds: bytes over capacity,
all flows summed) with the busiest link of its other candidate counting its own bytes there; the flows that would
gain move, a deterministic half of them a round (all moving at once would overshoot). When the rounds end with a
busier busiest link than all-minimal, every flow goes back to minimal. The choice is the class of paths (minimal
or not); the routing (ECMP, spray, adaptive) then spreads the flow over that class's choices.
Loads sum every flow of the run, whatever its stage: exact for one stage (a permutation), an approximation when
stages run one after another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.network.maxmin import FloatArray, IntArray
from fabricsim.topology import Routes, Topology, flow_hash

if TYPE_CHECKING:
    import numpy.typing as npt

ROUNDS = 16
"""decision rounds (each moves about half of the flows that would gain)"""
MOVE_SHARE = 0.5
"""share of the flows that would gain that move in a round"""
_SALT = 0x5A17
"""flow-id offset of the hashes of UGAL's per-round move draws"""


def _busiest(load: FloatArray, routes: Routes, flow: IntArray, add: FloatArray, own: FloatArray) -> FloatArray:
    """Per flow, the highest load on its (non-empty) path, counting ``add[i]`` times its own load `own` (per
    entry; `flow`: the flow of each entry) there."""
    on_link = load[routes.links] + add[flow] * own
    out: FloatArray = np.maximum.reduceat(on_link, routes.indptr[:-1])
    return out


def _on_both(a: Routes, b: Routes, flow_a: IntArray, flow_b: IntArray) -> npt.NDArray[np.bool_]:
    """For every entry of `a`, whether flow i's path in `b` crosses the same link (paths are short: compared
    column by column on padded copies)."""
    def padded(r: Routes, flow: IntArray, fill: int) -> tuple[IntArray, IntArray]:
        col = np.arange(len(r.links), dtype=np.int64) - np.repeat(r.indptr[:-1], r.lengths)
        out = np.full((len(r), int(r.lengths.max(initial=1))), fill, dtype=np.int64)
        out[flow, col] = r.links
        return out, col

    pa, col = padded(a, flow_a, -1)
    pb, _ = padded(b, flow_b, -2)
    both = np.zeros(pa.shape, dtype=bool)
    for j in range(pb.shape[1]):
        both |= pa == pb[:, j:j + 1]
    out: npt.NDArray[np.bool_] = both[flow_a, col]
    return out


def _hashed(s: IntArray, d: IntArray, ids: IntArray, counts: IntArray) -> IntArray:
    out: IntArray = (flow_hash(s, d, ids) % np.maximum(counts, 1).astype(np.uint64)).astype(np.int64)
    return out


def ugal_classes(topology: Topology, s: IntArray, d: IntArray, ids: IntArray, size: FloatArray, counts: IntArray,
                 minimal: IntArray, route: Callable[[IntArray, IntArray, IntArray], Routes]
                 ) -> tuple[IntArray, IntArray]:
    """(first choice, choices) of the class each flow takes: ``(0, minimal)`` or ``(minimal, counts - minimal)``.

    `minimal` is how many of a flow's `counts` choices are minimal (the first ones); `size` its bytes; `route`
    gives the paths of flows for explicit choices (`flowroute`'s chunked router).
    """
    base = np.zeros(len(s), dtype=np.int64)
    span = minimal.copy()
    far = np.flatnonzero(counts > minimal)
    if len(far) == 0:
        return base, span
    fs, fd, fid, nbytes = s[far], d[far], ids[far], size[far]
    others = (counts - minimal)[far]
    paths_m = route(fs, fd, _hashed(fs, fd, fid, minimal[far]))
    # the non-minimal candidate is the path ECMP takes in that class (the same hash): what is weighed is what runs
    paths_v = route(fs, fd, minimal[far] + _hashed(fs, fd, fid, others))
    cap = topology.link_capacity
    links = topology.num_links
    rest = np.flatnonzero(counts <= minimal)  # no choice to make: their load stays where ECMP puts it
    fixed: FloatArray = np.zeros(links)
    if len(rest):
        r = route(s[rest], d[rest], _hashed(s[rest], d[rest], ids[rest], counts[rest]))
        fixed = np.bincount(r.links, weights=size[rest][r.flow_of_entry()], minlength=links).astype(np.float64)

    def seconds(total: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore", invalid="ignore"):
            out: FloatArray = np.where(cap > 0, total / cap, np.where(total > 0, np.inf, 0.0))
        return out

    fm, fv = paths_m.flow_of_entry(), paths_v.flow_of_entry()
    bytes_m, bytes_v = nbytes[fm], nbytes[fv]

    def load_of(valiant: npt.NDArray[np.bool_]) -> FloatArray:
        return seconds(fixed + np.bincount(paths_m.links, weights=np.where(valiant[fm], 0.0, bytes_m),
                                           minlength=links)
                       + np.bincount(paths_v.links, weights=np.where(valiant[fv], bytes_v, 0.0), minlength=links))

    # a link on both paths (the NIC's, a leaf's uplink) carries the flow either way: it never counts twice
    with np.errstate(divide="ignore", invalid="ignore"):
        own_m = np.where(_on_both(paths_m, paths_v, fm, fv), 0.0, bytes_m / cap[paths_m.links])
        own_v = np.where(_on_both(paths_v, paths_m, fv, fm), 0.0, bytes_v / cap[paths_v.links])
    on_v = np.zeros(len(far), dtype=bool)
    minimal_load = load = load_of(on_v)
    for k in range(ROUNDS):
        busy_m = _busiest(load, paths_m, fm, np.where(on_v, 1.0, 0.0), own_m)
        busy_v = _busiest(load, paths_v, fv, np.where(on_v, 0.0, 1.0), own_v)
        gain = np.where(on_v, busy_m < busy_v, busy_v < busy_m)
        if not gain.any():
            break
        draw = flow_hash(fs, fd, fid + _SALT + 1 + k).astype(np.float64) / 2.0**64
        move = gain & (draw < MOVE_SHARE)
        on_v = on_v ^ (move if move.any() else gain)
        load = load_of(on_v)
    if load.max(initial=0.0) >= minimal_load.max(initial=0.0):
        on_v[:] = False
    base[far] = np.where(on_v, minimal[far], 0)
    span[far] = np.where(on_v, others, minimal[far])
    return base, span
