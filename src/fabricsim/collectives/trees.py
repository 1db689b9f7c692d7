"""NCCL's double binary tree (src/graph/trees.cc): each rank's parent and children in the first tree, and where a
rank of the first tree sits in the second, which is the first mirrored (even counts) or shifted by one (odd)."""

from __future__ import annotations


def btree(nranks: int, rank: int) -> tuple[int, list[int]]:
    """Parent and children of `rank` in NCCL's binary tree (src/graph/trees.cc ncclGetBtree)."""
    bit = 1
    while bit < nranks and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, ([bit >> 1] if nranks > 1 else [])
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    lowbit = bit >> 1
    children = [] if lowbit == 0 else [rank - lowbit]
    right = rank + lowbit
    while lowbit and right >= nranks:
        lowbit >>= 1
        right = rank + lowbit
    if lowbit:
        children.append(right)
    return up, children


def second_tree_rank(nranks: int, rank: int) -> int:
    """The rank of the second tree that plays the role ``rank`` plays in the first (ncclGetDtree)."""
    return nranks - 1 - rank if nranks % 2 == 0 else (rank - 1 + nranks) % nranks
