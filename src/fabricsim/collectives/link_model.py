"""One model of a link for the analytical model and the flow simulator (issue 25).

The analytical model prices an algorithm at each link kind's achievable rate times the protocol's payload
fraction (and the algorithm's own efficiency: point-to-point, tree), plus NCCL's per-step latencies, fill and the
host's launch floor. The flow simulator moves the same schedule over the built fabric. For the two to agree
where nothing contends, the flow run gets the same link model: every link's capacity scaled by the ratio of the
analytical rate to the line rate of its kind (`kind_efficiencies`), no path latency of its own, and the analytical
fixed costs added after (`fixed_seconds`). What is left between them is congestion.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fabricsim.catalog import Tuning
from fabricsim.collectives.algorithms import ALGORITHMS
from fabricsim.collectives.cost import Cost
from fabricsim.collectives.group import GroupShape

# Topology link kinds (fabricsim.topology.kinds.LINK_KINDS order) and the cost's link kind each carries.
NVLINK_KINDS = ("nvlink", "nvswitch")


def line_tuning(tuning: Tuning) -> Tuning:
    """The tuning with every throughput factor at 1: protocols carry payload at line rate with no per-rank cap,
    trees and point-to-point run at the link rate."""
    protocols = {name: p.model_copy(update={"bandwidth_efficiency": 1.0, "max_busbw_bytes_per_s": None})
                 for name, p in tuning.protocols.items()}
    return tuning.model_copy(update={"protocols": protocols, "tree_efficiency": 1.0, "p2p_efficiency": 1.0,
                                     "nvls_efficiency": 1.0})


def line_shape(shape: GroupShape) -> GroupShape:
    """The group with its links at line rate (what the flow simulator's topology holds). The analytical network
    rate also divides by the leaf oversubscription, which the flow simulator meets in the built fabric itself: the
    line shape keeps that division, so the efficiency is the links' and the protocol's alone."""
    return replace(shape, intra_bytes_per_s=shape.intra_line_bytes_per_s,
                   net_bytes_per_s_per_node=shape.net_line_bytes_per_s_per_node / max(1.0, shape.oversubscription))


def kind_efficiencies(shape: GroupShape, tuning: Tuning, algorithm: str, op: str, proto: str) -> dict[str, float]:
    """Per cost link kind (nvlink, pcie, infiniband, ethernet): the analytical rate of ``algorithm`` as a fraction
    of the line rate, i.e. seconds per byte at line rate over seconds per byte as priced."""
    cost_fn = ALGORITHMS[algorithm].cost
    priced = cost_fn(op, shape, proto, tuning).per_byte_s
    line = cost_fn(op, line_shape(shape), proto, line_tuning(tuning)).per_byte_s
    return {kind: min(1.0, line[kind] / s) for kind, s in priced.items() if s > 0 and kind in line}


def capacity_scale(link_kinds: tuple[str, ...], codes: np.ndarray, efficiencies: dict[str, float],
                   net_kind: str | None) -> np.ndarray:
    """A factor per topology link: NVLink and NVSwitch links at the nvlink efficiency, network links at their
    kind's, PCIe at the pcie one where the group's intra-node kind is PCIe, else at the network's (it carries the
    GPU-NIC traffic)."""
    scale = np.ones(len(codes))
    for code, name in enumerate(link_kinds):
        if name in NVLINK_KINDS:
            factor = efficiencies.get("nvlink", 1.0)
        elif name == "pcie":
            factor = efficiencies.get("pcie", efficiencies.get(net_kind or "", 1.0))
        else:
            factor = efficiencies.get(name, 1.0)
        scale[codes == code] = factor
    return scale


def fixed_seconds(cost: Cost, size_bytes: float) -> float:
    """The analytical cost's fixed part at one size: latency and pipeline fill (the floor is applied after)."""
    return cost.latency_s + float(cost.fill(np.array([float(size_bytes)]))[0])
