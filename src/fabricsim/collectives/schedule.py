"""Algorithms as schedules: phases of point-to-point transfers between group ranks.

The analytical model prices algorithms in closed form; these schedules spell out the same transfers so a
congestion-aware flow simulator can time them on a topology's real paths. Rank -1 (`SWITCH`) stands for the
in-network reduction engine (NVSwitch for NVLS, the InfiniBand switches for SHARP). Ranks are node-major:
rank r sits on node r // ranks_per_node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from fabricsim.collectives.conventions import check_op
from fabricsim.collectives.trees import btree, second_tree_rank
from fabricsim.errors import SpecError

SWITCH = -1


@dataclass(frozen=True)
class Phase:
    """Transfers that run concurrently; a phase starts when the previous one has finished."""

    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    label: str

    @staticmethod
    def of(pairs: list[tuple[int, int]], nbytes: float, label: str) -> Phase:
        arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        return Phase(arr[:, 0], arr[:, 1], np.full(len(arr), float(nbytes)), label)


def _ring_pairs(ranks: list[int]) -> list[tuple[int, int]]:
    return [(r, ranks[(i + 1) % len(ranks)]) for i, r in enumerate(ranks)]


def _ring(ranks: list[int], chunk: float, steps: int, label: str) -> list[Phase]:
    return [Phase.of(_ring_pairs(ranks), chunk, f"{label} step {k}") for k in range(steps)]


def ring_orders(n: int, p: int, channels: int) -> list[list[int]]:
    """NCCL-style rings, one per channel: each ring visits a node's ranks consecutively and leaves it from the
    local rank it will enter the next node on (same rail); channel c starts at local rank c, so the channels
    cross node boundaries on different rails and together use every NIC."""
    nodes = _node_groups(n, p)
    orders = []
    for c in range(channels):
        order: list[int] = []
        start = c % p
        for node in nodes:
            size = len(node)
            order += [node[(start + k) % size] for k in range(size)]
            start = (start + size - 1) % p
        orders.append(order)
    return orders


def _multi_ring(n: int, p: int, channels: int, size: float, steps: int) -> list[Phase]:
    chunk = size / n / channels
    pairs = [pair for order in ring_orders(n, p, channels) for pair in _ring_pairs(order)]
    return [Phase.of(pairs, chunk, f"ring step {k} ({channels} channels)") for k in range(steps)]


def _pipelined_chains(n: int, p: int, channels: int, size: float, toward_root: bool) -> Phase:
    """Broadcast (or reduce) as NCCL pipelines it: each channel's ring, opened at rank 0 into a chain, carries
    1/channels of the data, and in steady state every edge of every chain moves its share at once, so the whole
    transfer is one phase (a chunk-by-chunk schedule would add a chain's length of fill, which the analytical cost
    prices as latency)."""
    pairs: list[tuple[int, int]] = []
    for order in ring_orders(n, p, channels):
        start = order.index(0)
        chain = order[start:] + order[:start]
        edges = list(pairwise(chain))
        pairs += [(b, a) for a, b in edges] if toward_root else edges
    return Phase.of(pairs, size / channels, f"pipelined {'reduce' if toward_root else 'broadcast'} chains "
                    f"({channels} channels)")


def _double_tree(n: int, p: int, size: float, channels: int) -> Phase:
    """All-reduce on NCCL's double binary tree, pipelined: one phase in which every edge moves its share at once.
    Each of ``channels`` channels carries 1/channels of the data from its own head GPU (local rank c, on its own
    rail) of every node: across nodes, two binary trees of nodes (the second mirrored or shifted) carry half of it
    each, up (reduce) and down (broadcast) every edge; inside a node, the chain of the node's GPUs carries it up
    and down (an inner GPU sends 2S in all, as the analytical tree prices it)."""
    nodes = _node_groups(n, p)
    count = len(nodes)
    src: list[int] = []
    dst: list[int] = []
    sizes: list[float] = []

    def both_ways(a: int, b: int, nbytes: float) -> None:
        src.extend((a, b))
        dst.extend((b, a))
        sizes.extend((nbytes, nbytes))

    share = size / channels
    for c in range(channels):
        heads = [node[c % len(node)] for node in nodes]
        for tree in range(2):
            for r in range(1, count):
                parent = btree(count, r)[0]
                a, b = (r, parent) if tree == 0 else (second_tree_rank(count, r), second_tree_rank(count, parent))
                both_ways(heads[a], heads[b], share / 2)
        for node in nodes:
            for a, b in pairwise(node):
                both_ways(a, b, share)
    return Phase(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(sizes),
                 f"double binary tree, pipelined ({channels} channels)")


def _node_groups(n: int, p: int) -> list[list[int]]:
    return [list(range(start, min(n, start + p))) for start in range(0, n, p)]


def _rail_groups(n: int, p: int) -> list[list[int]]:
    return [list(range(local, n, p)) for local in range(p)]


def _merge(phase_lists: list[list[Phase]]) -> list[Phase]:
    """Run several independent schedules side by side (phase k of each together)."""
    out = []
    for k in range(max((len(x) for x in phase_lists), default=0)):
        parts = [x[k] for x in phase_lists if k < len(x)]
        out.append(Phase(np.concatenate([p.src for p in parts]), np.concatenate([p.dst for p in parts]),
                         np.concatenate([p.bytes for p in parts]), parts[0].label))
    return out


def schedule(algorithm: str, op: str, nranks: int, ranks_per_node: int, size_bytes: float,
             channels: int = 1) -> list[Phase]:
    """The transfers of one collective (`size_bytes` in nccl-tests convention) under `algorithm`.

    Rings run `channels` rings at once, each carrying 1/channels of the data (NCCL's channels).
    """
    name = check_op(op)
    n, p, s = nranks, min(ranks_per_node, nranks), float(size_bytes)
    ranks = list(range(n))
    if n < 2:
        raise SpecError("a schedule needs at least 2 ranks", field="nranks")
    if channels < 1:
        raise SpecError(f"channels must be at least 1, got {channels}", field="channels")
    if algorithm == "ring":
        if name == "all_reduce":
            return _multi_ring(n, p, channels, s, 2 * (n - 1))
        if name in ("all_gather", "reduce_scatter"):
            return _multi_ring(n, p, channels, s, n - 1)
        if name in ("broadcast", "reduce"):
            return [_pipelined_chains(n, p, channels, s, toward_root=name == "reduce")]
    if algorithm == "direct":
        if name == "all_to_all":
            return [Phase.of([(i, j) for i in ranks for j in ranks if i != j], s / n, "all-to-all")]
        if name == "send_recv":
            return [Phase.of(_ring_pairs(ranks), s, "send/recv")]
    if algorithm == "halving_doubling" and name in ("all_reduce", "all_gather", "reduce_scatter"):
        if n & (n - 1):
            raise SpecError(f"halving-doubling needs a power-of-two group, got {n}", field="nranks")
        steps = int(math.log2(n))
        halving = [Phase.of([(r, r ^ (1 << k)) for r in ranks], s / 2 ** (k + 1), f"halving {k}")
                   for k in range(steps)]
        doubling = [Phase.of([(r, r ^ (1 << k)) for r in ranks], s / 2 ** (k + 1), f"doubling {k}")
                    for k in reversed(range(steps))]
        if name == "all_reduce":
            return halving + doubling
        return halving if name == "reduce_scatter" else doubling
    if algorithm == "tree" and name == "all_reduce":
        return [_double_tree(n, p, s, channels)]
    if algorithm == "nvls" and name == "all_reduce":
        return [
            Phase.of([(r, SWITCH) for r in ranks], s, "ld_reduce: switch reads every GPU's buffer"),
            Phase.of([(SWITCH, r) for r in ranks], s / n, "ld_reduce: each GPU receives its reduced shard"),
            Phase.of([(r, SWITCH) for r in ranks], s / n, "multimem.st: each GPU writes its shard"),
            Phase.of([(SWITCH, r) for r in ranks], s, "multicast: every GPU receives all shards"),
        ]
    if algorithm == "nvls" and name in ("all_gather", "reduce_scatter"):
        return [Phase.of([(r, SWITCH) for r in ranks], s / n if name == "all_gather" else s, "to switch"),
                Phase.of([(SWITCH, r) for r in ranks], s if name == "all_gather" else s / n, "from switch")]
    if algorithm in ("hierarchical", "collnet", "nvls_tree") and name == "all_reduce":
        nodes = _node_groups(n, p)
        intra_rs = _merge([_ring(g, s / p, p - 1, "intra reduce-scatter") for g in nodes if len(g) > 1])
        intra_ag = _merge([_ring(g, s / p, p - 1, "intra all-gather") for g in nodes if len(g) > 1])
        rails = _rail_groups(n, p)
        nnodes = len(nodes)
        if algorithm == "hierarchical":
            inter = _merge([_ring(g, s / p / nnodes, 2 * (nnodes - 1), "inter all-reduce") for g in rails])
        else:
            inter = [Phase.of([(r, SWITCH) for r in ranks], s / p, "shard up to the switches"),
                     Phase.of([(SWITCH, r) for r in ranks], s / p, "reduced shard down")]
        return intra_rs + inter + intra_ag
    raise SpecError(f"{algorithm} has no schedule for {name}", field="--algo")


def schedule_size(algorithm: str, op: str, nranks: int, ranks_per_node: int, channels: int = 1) -> tuple[int, int]:
    """(transfers, phases) of `schedule(algorithm, op, nranks, ranks_per_node, size, channels)` in closed form,
    without building it: what a flow run must hold, known before a 32,768-rank ring spells out 17 billion
    transfers. tests/test_collective_schedules.py checks it against the built schedules."""
    name = check_op(op)
    n, p = nranks, min(ranks_per_node, nranks)
    if n < 2:
        raise SpecError("a schedule needs at least 2 ranks", field="nranks")
    if channels < 1:
        raise SpecError(f"channels must be at least 1, got {channels}", field="channels")
    if algorithm == "ring" and name in ("all_reduce", "all_gather", "reduce_scatter"):
        steps = 2 * (n - 1) if name == "all_reduce" else n - 1
        return steps * n * channels, steps
    if algorithm == "ring" and name in ("broadcast", "reduce"):
        return (n - 1) * channels, 1
    if algorithm == "direct" and name in ("all_to_all", "send_recv"):
        return (n * (n - 1) if name == "all_to_all" else n), 1
    if algorithm == "halving_doubling" and name in ("all_reduce", "all_gather", "reduce_scatter"):
        if n & (n - 1):
            raise SpecError(f"halving-doubling needs a power-of-two group, got {n}", field="nranks")
        steps = int(math.log2(n)) * (2 if name == "all_reduce" else 1)
        return steps * n, steps
    if algorithm == "tree" and name == "all_reduce":
        nnodes = -(-n // p)
        return channels * (4 * (nnodes - 1) + 2 * (n - nnodes)), 1
    if algorithm == "nvls" and name in ("all_reduce", "all_gather", "reduce_scatter"):
        steps = 4 if name == "all_reduce" else 2
        return steps * n, steps
    if algorithm in ("hierarchical", "collnet", "nvls_tree") and name == "all_reduce":
        nnodes = -(-n // p)
        intra = (n if n % p != 1 else n - 1) if p > 1 else 0  # ranks in nodes of more than one rank
        intra_phases = p - 1 if intra else 0
        inter_phases = 2 * (nnodes - 1) if algorithm == "hierarchical" else 2
        return 2 * intra_phases * intra + inter_phases * n, 2 * intra_phases + inter_phases
    raise SpecError(f"{algorithm} has no schedule for {name}", field="--algo")


def bytes_sent_per_rank(phases: list[Phase], nranks: int) -> np.ndarray:
    """Total bytes each rank puts on the wire over the schedule (switch-sourced bytes excluded)."""
    sent = np.zeros(nranks)
    for ph in phases:
        mask = ph.src >= 0
        np.add.at(sent, ph.src[mask], ph.bytes[mask])
    return sent
