"""Routed flows as one compressed array (CSR), the flow hash that picks among equal-cost paths, and helpers.

A `Routes` holds the paths of many flows at once: flow i crosses links ``links[indptr[i]:indptr[i + 1]]`` in order.
That is the form a flow simulator wants (it becomes a sparse flows x links incidence matrix in one call), and it is
what the vectorized routers produce without a Python loop per flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # scipy loads when a flow simulation builds its incidence matrix, not with every topology
    import numpy.typing as npt
    from scipy import sparse

IntArray = np.ndarray[tuple[Any, ...], np.dtype[np.int64]]

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """SplitMix64 finalizer: a fixed, well-mixed 64-bit hash (numpy uint64 arithmetic wraps, as intended)."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK64
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK64
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK64
    return x ^ (x >> np.uint64(31))


def flow_hash(src: npt.ArrayLike, dst: npt.ArrayLike, flow_id: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """A deterministic 64-bit hash of (source GPU, destination GPU, flow id), the ECMP / adaptive-routing key.

    It is the same on every run and platform (no Python ``hash``), so a flow always takes the same path, and
    different flow ids between the same pair spread over the equal-cost paths.
    """
    s = np.asarray(src, dtype=np.int64).astype(np.uint64)
    d = np.asarray(dst, dtype=np.int64).astype(np.uint64)
    f = np.asarray(flow_id, dtype=np.int64).astype(np.uint64)
    h = _splitmix64(np.atleast_1d(s))
    h = _splitmix64(h ^ np.atleast_1d(d))
    return _splitmix64(h ^ np.atleast_1d(f))


def pick(hashes: npt.NDArray[np.uint64], counts: IntArray) -> IntArray:
    """The equal-cost path index each hash selects: ``hash % count`` (count >= 1)."""
    return (hashes % counts.astype(np.uint64)).astype(np.int64)


@dataclass(frozen=True)
class Routes:
    """Paths of many flows: flow i crosses ``links[indptr[i]:indptr[i + 1]]`` (link ids, in order)."""

    indptr: IntArray
    links: IntArray

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def __getitem__(self, i: int) -> IntArray:
        return self.links[self.indptr[i] : self.indptr[i + 1]]

    @property
    def lengths(self) -> IntArray:
        """Links crossed by each flow (0 for a flow from a GPU to itself)."""
        return np.diff(self.indptr)

    def flow_of_entry(self) -> IntArray:
        """For every entry of ``links``, the flow it belongs to."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.lengths)

    def incidence(self, num_links: int) -> sparse.csr_matrix:
        """The flows x links 0/1 matrix (CSR): entry (i, l) is 1 when flow i crosses link l."""
        from scipy import sparse

        data = np.ones(len(self.links), dtype=np.float64)
        return sparse.csr_matrix((data, self.links, self.indptr), shape=(len(self), num_links))

    @staticmethod
    def concatenate(parts: list[Routes]) -> Routes:
        """The flows of several Routes, in order."""
        offsets = np.cumsum([0] + [len(p.links) for p in parts[:-1]])
        indptr = np.concatenate([np.zeros(1, dtype=np.int64)] + [p.indptr[1:] + o for p, o in zip(parts, offsets,
                                                                                              strict=True)])
        return Routes(indptr=indptr.astype(np.int64), links=np.concatenate([p.links for p in parts]))

    @staticmethod
    def from_padded(padded: IntArray) -> Routes:
        """Compress a flows x width array of link ids padded with -1 (entries kept in row order)."""
        mask = padded >= 0
        lengths = mask.sum(axis=1)
        indptr = np.zeros(len(padded) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        return Routes(indptr=indptr, links=padded[mask].astype(np.int64))
