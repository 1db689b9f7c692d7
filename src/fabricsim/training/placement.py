"""Placement: which GPUs form each process group (TP, CP, DP, PP, EP), and whether a group leaves NVLink.

Ranks are GPU indices 0..G-1, node-major: GPU g is local GPU g % gpus_per_node of node g // gpus_per_node, and
NVLink domain g // nvlink_domain_gpus. A rank's coordinates follow the plan's order string (Megatron-Core's
``--order``, default "tp-cp-ep-dp-pp"): the first dimension varies fastest, so TP groups are runs of consecutive
GPUs inside a node. As in Megatron-Core's RankGenerator, dense layers use sizes (tp, cp, dp, pp) and expert layers
re-fold the same GPUs as (expert tp = etp, ep, expert dp = tp * cp * dp / (etp * ep), pp) under the same order
(MoE parallel folding: with etp < tp an EP group spans the attention's TP ranks).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.training.plan import ParallelPlan, parse_order

if TYPE_CHECKING:
    from numpy.typing import NDArray

GroupKind = str
GROUP_KINDS: tuple[GroupKind, ...] = ("tp", "cp", "dp", "dp_cp", "pp", "ep", "etp", "edp")
_EXPERT_VARY = {"ep": ("ep",), "etp": ("tp",), "edp": ("dp",)}
_LATENCY_BOUND = ("tp", "cp", "ep", "etp")  # groups that talk inside every layer: leaving NVLink is worth a warning


def rank_groups(sizes: dict[str, int], order: tuple[str, ...], vary: tuple[str, ...]) -> NDArray[np.int64]:
    """Groups of ranks that differ only in the ``vary`` dimensions, as an (n_groups, group_size) array.

    ``order`` lists dimensions innermost first; a dimension missing from ``sizes`` has size 1. Each row is sorted.
    """
    for d in vary:
        if d not in order:
            raise SpecError(f"dimension {d!r} is not in the order {'-'.join(order)!r}", field="order")
    shape = [sizes.get(d, 1) for d in reversed(order)]  # C order: the last axis (innermost dim) varies fastest
    ranks = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    axis_of = {d: len(order) - 1 - i for i, d in enumerate(order)}
    group_axes = sorted(axis_of[d] for d in vary)  # outer ... inner, so each row comes out ascending
    fixed_axes = [a for a in range(len(order)) if a not in group_axes]
    group_size = int(np.prod([shape[a] for a in group_axes])) if group_axes else 1
    return np.transpose(ranks, fixed_axes + group_axes).reshape(-1, group_size)


@dataclass(frozen=True)
class Placement:
    """The process groups of one plan on GPUs 0..world_size-1."""

    plan: ParallelPlan
    order: tuple[str, ...]

    @property
    def dense_sizes(self) -> dict[str, int]:
        p = self.plan
        return {"tp": p.tp, "cp": p.cp, "ep": 1, "dp": p.dp, "pp": p.pp}

    @property
    def expert_sizes(self) -> dict[str, int]:
        p = self.plan
        return {"tp": p.expert_tp, "cp": 1, "ep": p.ep, "dp": p.expert_dp, "pp": p.pp}

    def groups(self, kind: GroupKind) -> NDArray[np.int64]:
        """GPU indices of every group of ``kind`` as an (n_groups, group_size) array.

        kinds: tp, cp, dp, pp; dp_cp (dense gradient reduction: dp x cp); ep, etp (expert tensor parallel) and edp
        (expert data parallel).
        """
        if kind in _EXPERT_VARY:
            return rank_groups(self.expert_sizes, self.order, _EXPERT_VARY[kind])
        vary = {"tp": ("tp",), "cp": ("cp",), "dp": ("dp",), "dp_cp": ("dp", "cp"), "pp": ("pp",)}.get(kind)
        if vary is None:
            raise SpecError(f"unknown group kind {kind!r}; allowed: {', '.join(GROUP_KINDS)}", field="group")
        return rank_groups(self.dense_sizes, self.order, vary)

    def first_group(self, kind: GroupKind) -> NDArray[np.int64]:
        """GPU indices of the first group of ``kind`` (the one holding GPU 0), without building every group.

        On uniform nodes every group of a kind has the same shape, so models price this one; it costs O(group
        size) instead of O(world size).
        """
        vary: tuple[str, ...]
        if kind in _EXPERT_VARY:
            sizes, vary = self.expert_sizes, _EXPERT_VARY[kind]
        else:
            lookup = {"tp": ("tp",), "cp": ("cp",), "dp": ("dp",), "dp_cp": ("dp", "cp"), "pp": ("pp",)}
            if kind not in lookup:
                raise SpecError(f"unknown group kind {kind!r}; allowed: {', '.join(GROUP_KINDS)}", field="group")
            sizes, vary = self.dense_sizes, lookup[kind]
        members = np.zeros(1, dtype=np.int64)
        stride = 1
        for dim in self.order:
            size = sizes.get(dim, 1)
            if dim in vary:
                members = (members[None, :] + stride * np.arange(size, dtype=np.int64)[:, None]).ravel()
            stride *= size
        return np.sort(members)

    def all_groups(self) -> dict[GroupKind, NDArray[np.int64]]:
        return {kind: self.groups(kind) for kind in GROUP_KINDS}


def place(plan: ParallelPlan, order: str | None = None) -> Placement:
    """Lay out ``plan`` on GPUs with ``order`` (default the plan's own, "tp-cp-ep-dp-pp")."""
    parts = parse_order(order or plan.order)
    if plan.ep > 1 and "ep" not in parts:
        raise SpecError(f"order {'-'.join(parts)!r} must name ep when ep > 1", field="order")
    if "ep" not in parts:
        parts = (*parts, "ep")  # size 1 on both layouts; its position does not matter
    return Placement(plan=plan, order=parts)


def node_of(gpus: NDArray[np.int64], gpus_per_node: int) -> NDArray[np.int64]:
    """Node index of each GPU (node-major numbering)."""
    return gpus // gpus_per_node


def domains_spanned(groups: NDArray[np.int64], nvlink_domain_gpus: int) -> NDArray[np.int64]:
    """For each group (row), how many NVLink domains its GPUs sit in (1 = all on NVLink)."""
    if nvlink_domain_gpus < 1:
        raise SpecError("must be at least 1", field="nvlink_domain_gpus")
    domains = np.sort(groups // nvlink_domain_gpus, axis=1)
    changes: NDArray[np.int64] = np.count_nonzero(np.diff(domains, axis=1), axis=1).astype(np.int64)
    return changes + 1


def leaves_nvlink(groups: NDArray[np.int64], nvlink_domain_gpus: int) -> NDArray[np.bool_]:
    """For each group, whether it spans more than one NVLink domain."""
    return domains_spanned(groups, nvlink_domain_gpus) > 1


def groups_aligned(placement: Placement, kind: GroupKind, block_gpus: int) -> bool:
    """Fast exact check that no group of a one-dimension kind (tp, cp, ep) leaves an aligned block of
    ``block_gpus`` GPUs (an NVLink domain, a node): its groups are runs base + k * stride (k < size) inside
    aligned blocks of stride * size GPUs, so when such a block divides ``block_gpus`` every group stays in one.
    False means "look at every group"."""
    sizes = placement.expert_sizes if kind in ("ep", "etp") else placement.dense_sizes
    dim_of = "tp" if kind == "etp" else kind
    stride = 1
    for dim in placement.order:
        if dim == dim_of:
            return block_gpus % (stride * sizes.get(dim, 1)) == 0
        stride *= sizes.get(dim, 1)
    return False


def widest_group(placement: Placement, kind: GroupKind, gpus_per_node: int) -> NDArray[np.int64]:
    """The group of ``kind`` that spans the most nodes (the one that sets the pace of a layer's collectives);
    the first group when the layout is aligned to nodes, so this stays O(group size) in the common case."""
    if kind in ("tp", "cp", "ep", "etp") and not groups_aligned(placement, kind, gpus_per_node):
        groups = placement.groups(kind)
        spans = domains_spanned(groups, gpus_per_node)
        widest: NDArray[np.int64] = groups[int(np.argmax(spans))]
        return widest
    return placement.first_group(kind)


def placement_warnings(placement: Placement, nvlink_domain_gpus: int) -> list[str]:
    """Warnings for TP, CP and EP groups (which communicate in every layer) that span NVLink domains."""
    return list(_placement_warnings(placement.plan, placement.order, nvlink_domain_gpus))


@lru_cache(maxsize=4096)
def _placement_warnings(plan: ParallelPlan, order: tuple[str, ...], nvlink_domain_gpus: int) -> tuple[str, ...]:
    placement = Placement(plan=plan, order=order)
    out = []
    for kind in _LATENCY_BOUND:
        if kind == "etp" and plan.expert_tp == plan.tp:  # the TP groups themselves: warned about once
            continue
        if groups_aligned(placement, kind, nvlink_domain_gpus):
            continue
        groups = placement.groups(kind)
        if groups.shape[1] < 2:
            continue
        spanned = int(domains_spanned(groups, nvlink_domain_gpus).max())
        if spanned > 1:
            out.append(f"{kind.upper()} group of {groups.shape[1]} GPUs spans {spanned} NVLink domains "
                       f"(domain = {nvlink_domain_gpus} GPUs): its traffic crosses the scale-out network")
    return tuple(out)
