"""Collective algorithms as closed-form alpha-beta costs on a group shape (NCCL-style, see DESIGN.md).

Each algorithm states which operations and protocols it serves, whether NCCL's tuner would consider it
(`nccl`), whether it reduces in the network (NVLS, SHARP), and why it cannot run on a given group.
Sizes follow nccl-tests: the per-rank buffer for all_reduce/broadcast/reduce/send_recv, the total for
all_gather/reduce_scatter, the per-rank send buffer for all_to_all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fabricsim.catalog import Tuning
from fabricsim.collectives.cost import Cost
from fabricsim.collectives.group import GroupShape
from fabricsim.collectives.trees import btree, second_tree_rank

CostFn = Callable[[str, GroupShape, str, Tuning], Cost]


@dataclass(frozen=True)
class Algorithm:
    name: str
    ops: tuple[str, ...]
    protocols: tuple[str, ...]
    nccl: bool
    in_network: bool
    requirement: Callable[[GroupShape], str | None]
    cost: CostFn
    description: str


def _hop_class(shape: GroupShape) -> str:
    return "nvlink" if shape.intra_kind == "nvlink" else "pcie"


def _hop(tuning: Tuning, hop_class: str, algo: str, proto: str) -> float:
    table = tuning.hop_latency_s.get(hop_class, {})  # type: ignore[call-overload]
    per_proto: dict[str, float] = table.get(algo, {})
    return per_proto.get(proto, 0.0)


def _local_hop(shape: GroupShape, tuning: Tuning, hop_class: str, algo: str, proto: str) -> float:
    """One step inside a node: NCCL's figure for its hop class and, in a switched scale-up domain, how much longer
    (or shorter) this domain's GPU-switch-GPU path is than the NVLink path that figure was measured on: NVLink,
    UALink and scale-up Ethernet domains are one mechanism with their own latencies."""
    hop = _hop(tuning, hop_class, algo, proto)
    reference = tuning.scale_up_reference_path_latency_s
    if hop_class != "nvlink" or not shape.intra_path_latency_s or not reference:
        return hop
    return max(0.0, hop + shape.intra_path_latency_s - reference)


def _net_hop(shape: GroupShape, tuning: Tuning, algo: str, proto: str) -> float:
    """One network-crossing step: NCCL's NET figure (measured on the reference fabric) plus how much longer this
    group's path (NIC-switch links at both ends, and its switch hops) takes than the same path on the reference."""
    reference = 2 * tuning.net_reference_link_latency_s + shape.net_switch_hops * tuning.net_reference_switch_latency_s
    return max(0.0, _hop(tuning, "net", algo, proto) + shape.net_path_latency_s - reference)


def _base(tuning: Tuning, algo: str, proto: str) -> float:
    per_proto: dict[str, float] = tuning.base_latency_s.get(algo, {})  # type: ignore[assignment]
    return per_proto.get(proto, 0.0)


def _proto_rate(rate: float, proto: str, tuning: Tuning, link_id: str | None = None) -> float:
    """A link rate as a protocol achieves it: payload fraction, then the protocol's per-rank cap (scaled to the
    GPU generation of `link_id` as NCCL's llMaxBws table scales it)."""
    params = tuning.protocols[proto]  # type: ignore[index]
    out = rate * params.bandwidth_efficiency
    if params.max_busbw_bytes_per_s is not None:
        scale = params.max_busbw_scale_by_link.get(link_id, 1.0) if link_id else 1.0
        out = min(out, params.max_busbw_bytes_per_s * scale)
    return out


def nvls_efficiency(shape: GroupShape, tuning: Tuning) -> float:
    """NVLS throughput relative to the NVLink rate for this NVLink generation (NCCL's per-architecture figure, for
    NVSwitch baseboards), or the rack-scale NVLink Switch System's figure where the domain is one (NVL72)."""
    link = shape.tuning_link_id or ""
    table: dict[str, float] = tuning.nvls_efficiency_by_nvlink
    baseboard = table.get(link, tuning.nvls_efficiency)
    if shape.switch_system:
        rack: dict[str, float] = tuning.nvls_efficiency_switch_system_by_nvlink
        return rack.get(link, baseboard)
    return baseboard


def launch_floor(shape: GroupShape, tuning: Tuning) -> float:
    """Host time per nccl-tests iteration: one kernel launch per GPU the launching thread drives, at the cost of
    this host's CPU (identified by its socket or CPU-GPU link, as NCCL tells CPU vendors apart). One thread drives
    every GPU only where the group sits on one host (-g N; `single_node_gpus_per_thread`); a group over several
    hosts (nodes, or the compute trays of one NVL72 rack) runs one process per GPU (mpirun -N <gpus> ... -g 1, as
    the nccl-tests README runs across hosts), so each thread launches one kernel."""
    scale: dict[str, float] = tuning.launch_scale_by_host_link
    return tuning.launch_s * scale.get(shape.host_link_id or "", 1.0) * gpus_per_launch_thread(shape, tuning)


def gpus_per_launch_thread(shape: GroupShape, tuning: Tuning) -> int:
    """GPUs whose kernels one host thread launches per nccl-tests iteration (see `launch_floor`)."""
    return shape.nranks if shape.on_one_host and tuning.single_node_gpus_per_thread == "all" else 1


def _edges(nranks: int, rank: int) -> int:
    parent, children = btree(nranks, rank)
    return len(children) + (parent >= 0)


def dtree_bytes_per_direction(nnodes: int) -> float:
    """Bytes each node sends (and receives) per byte of all-reduce in NCCL's double binary tree, the busiest node:
    each tree carries half the data up (reduce) and down (broadcast) over every tree edge, and a full-duplex link
    carries both directions at once. Tree 2 is tree 1 mirrored (even counts) or shifted by one (odd counts),
    as ncclGetDtree builds it. 2 nodes: 1.0; 3 nodes: 1.5; inner nodes of larger trees: 2.0."""
    if nnodes < 2:
        return 0.0
    worst = 0
    for r in range(nnodes):
        worst = max(worst, _edges(nnodes, r) + _edges(nnodes, second_tree_rank(nnodes, r)))
    return 0.5 * worst


def tree_net_rate(shape: GroupShape, tuning: Tuning) -> float:
    """Network rate per node that a tree or NVLS-tree achieves: its heads (one rank per network channel, each on
    its own NIC; NCCL src/graph/search.cc pairs each NVLS/tree channel with one NIC:GPU) carry all inter-node
    bytes, so only min(NICs of the group, channels) NICs' worth is usable."""
    return shape.net_bytes_per_s_per_node * tree_channels(shape, tuning) / max(1, shape.emptiest_nics)


def tree_channels(shape: GroupShape, tuning: Tuning) -> int:
    """Tree channels that cross the network, each from its own head GPU on its own NIC: min(NICs of the group,
    NCCL's tree channels for this NVLink generation)."""
    table: dict[str, int] = tuning.tree_net_channels_by_nvlink
    return max(1, min(shape.emptiest_nics, table.get(shape.tuning_link_id or "", shape.emptiest_nics)))


def _net_kind(shape: GroupShape) -> str:
    return shape.net_kind or "infiniband"


def _step_latency(shape: GroupShape, tuning: Tuning, algo: str, proto: str, steps: int, net_steps: int) -> float:
    """Steps of a pipeline, `net_steps` of which cross the network; the rest stay inside a node."""
    intra = _local_hop(shape, tuning, _hop_class(shape), algo, proto)
    if shape.nnodes > 1:
        intra = max(intra, tuning.net_overhead_s * (3 if proto == "Simple" else 1))
    net = _net_hop(shape, tuning, algo, proto)
    return _base(tuning, algo, proto) + (steps - net_steps) * intra + net_steps * net


# ---------------------------------------------------------------- requirements


def _always(shape: GroupShape) -> str | None:
    return None


def _need_nvls(shape: GroupShape) -> str | None:
    if not shape.nvls and shape.intra_kind == "nvlink" and shape.emptiest_ranks < 2:
        return f"NVLS needs at least 2 GPUs on every node; the last node holds {shape.emptiest_ranks}"
    if not shape.nvls:
        return (f"NVLS needs NVSwitch with NVLink SHARP (Hopper or later); {shape.system_id} has none"
                if shape.intra_kind != "none" else "NVLS needs at least 2 GPUs of one node in the group")
    return None


def _need_nvls_single_node(shape: GroupShape) -> str | None:
    return _need_nvls(shape) or ("nvls runs inside one NVLink domain; use nvls_tree across nodes"
                                 if shape.nnodes > 1 else None)


def _need_nvls_multi_node(shape: GroupShape) -> str | None:
    return _need_nvls(shape) or ("nvls_tree needs more than one node" if shape.nnodes < 2 else None)


def _need_sharp(shape: GroupShape) -> str | None:
    if shape.nnodes < 2:
        return "SHARP/CollNet reduces in the network switches: the group must span nodes"
    if not shape.sharp:
        return f"SHARP needs fabric switches that support it; {shape.fabric_switch_id or 'this fabric'} does not"
    return None


def _need_multi_node(shape: GroupShape) -> str | None:
    return "hierarchical needs more than one node" if shape.nnodes < 2 else None


def _need_power_of_two(shape: GroupShape) -> str | None:
    n = shape.nranks
    return None if n & (n - 1) == 0 else f"halving-doubling needs a power-of-two group, got {n} ranks"


def _need_two_ranks(shape: GroupShape) -> str | None:
    return None if shape.nranks >= 2 else "needs at least 2 ranks"


def _need_nodes_for_tree(shape: GroupShape) -> str | None:
    # NCCL builds its trees between nodes; inside one node the tree degenerates into a chain that rings beat.
    return None if shape.nnodes > 1 else "tree runs between nodes; a single node uses rings (or NVLS)"


# ---------------------------------------------------------------- costs


def _ring_rates(shape: GroupShape, proto: str, tuning: Tuning) -> dict[str, float]:
    """Per-rank ring rate limits by link kind: every GPU forwards to the next over NVLink/PCIe, and each node
    has one ring edge in and out per channel, so the node's NICs together carry the per-rank rate."""
    rates: dict[str, float] = {}
    if shape.ranks_per_node > 1:
        rates[shape.intra_kind] = _proto_rate(shape.intra_bytes_per_s, proto, tuning, shape.tuning_link_id)
    if shape.nnodes > 1:
        rates[_net_kind(shape)] = _proto_rate(shape.net_bytes_per_s_per_node, proto, tuning)
    return rates


def _ring(op: str, shape: GroupShape, proto: str, tuning: Tuning) -> Cost:
    n, nodes = shape.nranks, shape.nnodes
    if op == "all_reduce":
        wire, steps, net_steps = 2.0 * (n - 1) / n, 2 * (n - 1), 2 * (nodes - 1)
    elif op in ("all_gather", "reduce_scatter"):
        wire, steps, net_steps = (n - 1) / n, n - 1, nodes - 1
    else:  # broadcast, reduce: a pipelined chain
        wire, steps, net_steps = 1.0, n - 1, nodes - 1
    per_byte = {kind: wire / rate for kind, rate in _ring_rates(shape, proto, tuning).items()}
    return Cost(_step_latency(shape, tuning, "ring", proto, steps, net_steps), per_byte)


def _tree(op: str, shape: GroupShape, proto: str, tuning: Tuning) -> Cost:
    """Double binary tree across nodes, chain inside: reduce up then broadcast down, pipelined. Each direction of
    a link carries the tree's bytes once (dtree_bytes_per_direction); a chain GPU with neighbours on both sides
    sends half the data up and half down in each of the two trees. NCCL's tuner prices the tree at 2S per
    direction (algbw = busBw/2), so it picks by that figure."""
    rates = {k: r * tuning.tree_efficiency for k, r in _ring_rates(shape, proto, tuning).items()}
    if shape.nnodes > 1:
        rates[_net_kind(shape)] = _proto_rate(tree_net_rate(shape, tuning), proto, tuning) * tuning.tree_efficiency
    factors = {_net_kind(shape): dtree_bytes_per_direction(shape.nnodes),
               shape.intra_kind: 2.0 if shape.ranks_per_node > 2 else 1.0}
    per_byte = {kind: factors[kind] / rate for kind, rate in rates.items()}
    select = max(1.0 / tuning.nccl_tree_algbw_ratio / rate for rate in rates.values())
    depth = int(math.log2(shape.nnodes)) if shape.nnodes > 1 else 0
    latency = _base(tuning, "tree", proto) + 2 * (
        (shape.ranks_per_node - 1) * _local_hop(shape, tuning, _hop_class(shape), "tree", proto)
        + depth * _net_hop(shape, tuning, "tree", proto)
    )
    return Cost(latency, per_byte, select_per_byte_s=select)


def _nvls(op: str, shape: GroupShape, proto: str, tuning: Tuning) -> Cost:
    """NVLink SHARP: the switch reduces (multimem ld_reduce) and multicasts (st); all_reduce moves S(n+1)/n per
    GPU each way. all_gather/reduce_scatter move S one way, which is why NCCL prefers rings for them."""
    n = shape.nranks
    rate = shape.intra_bytes_per_s * nvls_efficiency(shape, tuning)
    wire = (n + 1) / n if op == "all_reduce" else 1.0
    fill_s, fill_bytes = _nvls_fill(shape, tuning, wire / rate)
    return Cost(_base(tuning, "nvls", proto) + _local_hop(shape, tuning, "nvlink", "nvls", proto),
                {"nvlink": wire / rate}, fill_s=fill_s, fill_bytes=fill_bytes)


def _nvls_fill(shape: GroupShape, tuning: Tuning, per_byte_s: float) -> tuple[float, float]:
    """NVLS pipeline fill: until the pipeline is full, the reduce (multimem ld_reduce) and the multicast
    (multimem st) of a chunk run one after the other, so the exposed second phase costs as much as the transfer
    itself; it is capped once the pipeline fills, which takes one step per rank of the NVLink domain."""
    fill_s = tuning.nvls_fill_per_rank_s * shape.ranks_per_node
    return fill_s, fill_s / per_byte_s


def _nvls_tree(op: str, shape: GroupShape, proto: str, tuning: Tuning) -> Cost:
    """NVLS inside each node, a tree between nodes (one rank per node per tree channel)."""
    p = shape.ranks_per_node
    nvls_rate = shape.intra_bytes_per_s * nvls_efficiency(shape, tuning)
    net_rate = tree_net_rate(shape, tuning) * tuning.tree_efficiency
    net_wire = dtree_bytes_per_direction(shape.nnodes)
    per_byte = {"nvlink": (p + 1) / p / nvls_rate, _net_kind(shape): net_wire / net_rate}
    depth = math.ceil(math.log2(shape.nnodes))
    latency = (_base(tuning, "nvls_tree", proto) + _local_hop(shape, tuning, "nvlink", "nvls_tree", proto)
               + 2 * depth * _net_hop(shape, tuning, "nvls_tree", proto))
    stage_fill_s, stage_fill_bytes = _nvls_fill(shape, tuning, per_byte["nvlink"])
    # Each of the 1 + 2 depth stages (NVLS, up and down the tree) fills like one NVLink domain: the pipeline is
    # full once a domain's worth of bytes is in flight in every stage, however many stages there are.
    return Cost(latency, per_byte, fill_s=stage_fill_s * (1 + 2 * depth), fill_bytes=stage_fill_bytes,
                fill_in_selection=False)


def _collnet(op: str, shape: GroupShape, proto: str, tuning: Tuning) -> Cost:
    """SHARP/CollNet: reduce-scatter inside the node, the switches reduce each shard, all-gather inside."""
    p = shape.ranks_per_node
    per_byte = {_net_kind(shape): 1.0 / (shape.net_bytes_per_s_per_node * tuning.tree_efficiency)}
    if p > 1:
        per_byte[shape.intra_kind] = 2.0 * (p - 1) / p / shape.intra_bytes_per_s
    latency = (_base(tuning, "collnet", proto)
               + 2 * (p - 1) * _local_hop(shape, tuning, _hop_class(shape), "collnet", proto)
               + _net_hop(shape, tuning, "collnet", proto))
    return Cost(latency, per_byte)


def _hierarchical(op: str, shape: GroupShape, proto: str, tuning: Tuning) -> Cost:
    """Reduce-scatter in the node, ring all-reduce of each 1/p shard across nodes on the GPU's own NIC share,
    all-gather in the node; the three phases run one after another."""
    p, nodes = shape.ranks_per_node, shape.nnodes
    per_byte: dict[str, float] = {}
    if p > 1:
        per_byte[shape.intra_kind] = 2.0 * (p - 1) / p / shape.intra_bytes_per_s
    per_byte[_net_kind(shape)] = 2.0 * (nodes - 1) / nodes / shape.net_bytes_per_s_per_node
    latency = (_base(tuning, "hierarchical", proto)
               + 2 * (p - 1) * _local_hop(shape, tuning, _hop_class(shape), "hierarchical", proto)
               + 2 * (nodes - 1) * _net_hop(shape, tuning, "hierarchical", proto))
    return Cost(latency, per_byte, combine="sum")


def _halving_doubling(op: str, shape: GroupShape, proto: str, tuning: Tuning) -> Cost:
    """Recursive halving (reduce-scatter) and doubling (all-gather): step k exchanges S/2^(k+1) with the rank
    2^k away; partners closer than a node's size stay on NVLink/PCIe, farther ones use the GPU's NIC share."""
    n, p = shape.nranks, shape.ranks_per_node
    nic_share = shape.net_bytes_per_s_per_node / p if shape.nnodes > 1 else 0.0
    per_byte: dict[str, float] = {}
    latency = _base(tuning, "halving_doubling", proto)
    passes = 2 if op == "all_reduce" else 1
    for k in range(int(math.log2(n))):
        fraction = passes / 2 ** (k + 1)
        kind: str
        if 2**k < p:
            kind, rate, hop = shape.intra_kind, shape.intra_bytes_per_s, _hop_class(shape)
        else:
            kind, rate, hop = _net_kind(shape), nic_share, "net"
        per_byte[kind] = per_byte.get(kind, 0.0) + fraction / rate
        latency += passes * _local_hop(shape, tuning, hop, "halving_doubling", proto)
    return Cost(latency, per_byte, combine="sum")


def _direct(op: str, shape: GroupShape, proto: str, tuning: Tuning) -> Cost:
    """Point-to-point: all_to_all sends S/n to every peer at once; send_recv sends S to the next rank."""
    n, p = shape.nranks, shape.ranks_per_node
    eff = tuning.p2p_efficiency
    per_byte: dict[str, float] = {}
    if op == "all_to_all":
        if p > 1:
            per_byte[shape.intra_kind] = (p - 1) / n / (shape.intra_bytes_per_s * eff)
        if shape.nnodes > 1:
            per_byte[_net_kind(shape)] = (n - p) / n * shape.uniform_taper / (shape.net_bytes_per_s_per_node / p * eff)
    else:  # send_recv: rank r -> r+1; the last rank of a node sends over its own NIC
        if p > 1:
            per_byte[shape.intra_kind] = 1.0 / (shape.intra_bytes_per_s * eff)
        if shape.nnodes > 1:
            per_byte[_net_kind(shape)] = 1.0 / (shape.nic_bytes_per_s * eff)
    latency = _base(tuning, "direct", proto) + max(
        _local_hop(shape, tuning, _hop_class(shape), "direct", proto) if p > 1 else 0.0,
        _net_hop(shape, tuning, "direct", proto) if shape.nnodes > 1 else 0.0,
    )
    return Cost(latency, per_byte)


_REDUCING = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
_PROTOS = ("LL", "LL128", "Simple")

ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("ring", _REDUCING, _PROTOS, True, False, _need_two_ranks, _ring,
                  "NCCL rings through every GPU, crossing nodes on each GPU's rail NIC"),
        Algorithm("tree", ("all_reduce",), _PROTOS, True, False, _need_nodes_for_tree, _tree,
                  "double binary tree between nodes, chains inside"),
        Algorithm("nvls", ("all_reduce", "all_gather", "reduce_scatter"), ("Simple",), True, True,
                  _need_nvls_single_node, _nvls, "NVLink SHARP: NVSwitch reduces and multicasts"),
        Algorithm("nvls_tree", ("all_reduce",), ("Simple",), True, True, _need_nvls_multi_node, _nvls_tree,
                  "NVLS inside nodes, tree between nodes"),
        # NCCL runs CollNet only with NCCL_COLLNET_ENABLE=1 and the SHARP plugin, so auto does not pick it.
        Algorithm("collnet", ("all_reduce",), ("Simple",), False, True, _need_sharp, _collnet,
                  "SHARP in-network reduction on the InfiniBand switches (opt-in, as in NCCL)"),
        Algorithm("hierarchical", ("all_reduce",), ("Simple",), False, False, _need_multi_node, _hierarchical,
                  "reduce-scatter in node, all-reduce across nodes, all-gather in node (phases in series)"),
        Algorithm("halving_doubling", ("all_reduce", "all_gather", "reduce_scatter"), ("Simple",), False, False,
                  _need_power_of_two, _halving_doubling, "recursive halving and doubling (Rabenseifner)"),
        Algorithm("direct", ("all_to_all", "send_recv"), ("Simple",), True, False, _need_two_ranks, _direct,
                  "point-to-point sends to every peer at once"),
    )
}
