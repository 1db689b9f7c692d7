"""Flow classes: flows with the same path (links and weights), size and stage get the same max-min rate at every
moment (the filling cannot tell them apart), so the simulator runs one flow per class with its multiplicity and
hands every member the class's times; each member keeps its own path latency (its finish) and its bytes on every
link. Exact, not an approximation: tests/test_flow_classes.py checks it against the per-flow run.

Classes are found by a 64-bit hash of each flow's (stage, size, path) and then checked entry by entry against the
class's first flow, so a hash collision only costs a class split, never a wrong merge.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from fabricsim.network.maxmin import IntArray

WORTH = 0.9
"""aggregate only when the classes are at most this share of the flows (else the per-flow run is as fast)"""

@cache
def _kernels() -> tuple[Any, Any]:
    import numba

    @numba.njit(cache=True, nogil=True)
    def row_hash(indptr: Any, links: Any, weights: Any, size: Any, stage: Any) -> Any:
        unit = weights.shape[0] == 0
        n = indptr.shape[0] - 1
        out = np.empty(n, dtype=np.uint64)
        prime = np.uint64(1099511628211)
        for f in range(n):
            h = np.uint64(14695981039346656037)
            h = (h ^ np.uint64(stage[f])) * prime
            h = (h ^ np.float64(size[f]).view(np.uint64)) * prime
            for k in range(indptr[f], indptr[f + 1]):
                h = (h ^ np.uint64(links[k])) * prime
                if not unit:
                    h = (h ^ np.float64(weights[k]).view(np.uint64)) * prime
            out[f] = h
        return out

    @numba.njit(cache=True, nogil=True)
    def same_row(indptr: Any, links: Any, weights: Any, size: Any, stage: Any, rep: Any) -> Any:
        unit = weights.shape[0] == 0
        n = indptr.shape[0] - 1
        out = np.ones(n, dtype=np.bool_)
        for f in range(n):
            r = rep[f]
            if r == f:
                continue
            a, b = indptr[f], indptr[r]
            length = indptr[f + 1] - a
            if length != indptr[r + 1] - b or size[f] != size[r] or stage[f] != stage[r]:
                out[f] = False
                continue
            for k in range(length):
                if links[a + k] != links[b + k] or (not unit and weights[a + k] != weights[b + k]):
                    out[f] = False
                    break
        return out

    return row_hash, same_row



def flow_classes(indptr: IntArray, links: IntArray, weights: Any, size: Any, stage: IntArray
                 ) -> tuple[IntArray, IntArray] | None:
    """(first flow of each class, class of each flow), or None when the classes would be more than `WORTH` of the
    flows. Flows of one class share stage, size, links and weights exactly."""
    n = len(indptr) - 1
    if n < 2:
        return None
    row_hash, same_row = _kernels()
    h = row_hash(indptr, links, weights, size, stage)
    _, first, cls = np.unique(h, return_index=True, return_inverse=True)
    del h
    if len(first) > WORTH * n:
        return None
    cls = cls.astype(np.int64, copy=False).ravel()
    ok = same_row(indptr, links, weights, size, stage, first[cls])
    if not ok.all():  # a hash collision: the flows unlike their class's first become classes of their own
        odd = np.flatnonzero(~ok)
        cls[odd] = len(first) + np.arange(len(odd))
        first = np.concatenate([first, odd])
        if len(first) > WORTH * n:
            return None
    reps: IntArray = first.astype(np.int64, copy=False)
    return reps, cls
