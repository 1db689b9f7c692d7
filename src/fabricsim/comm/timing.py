"""Seconds of one collective on a process group of a cluster, by the analytical collective model or, for every
group of a kind at once, by the flow simulator on the built fabric; shapes and times are cached because a sizing
search times the same few collectives many times."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from math import ceil
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.caching import ByIdentity
from fabricsim.catalog import Catalog, System
from fabricsim.collectives import CollectiveModel, GroupShape, group_shape, scaled, sharp_refusal
from fabricsim.comm.cluster import DIRECT_FABRICS, Cluster

if TYPE_CHECKING:  # the flow simulator's side (topology, traffic, scipy) loads when a flow prediction asks for it
    from numpy.typing import NDArray

    from fabricsim.topology import Topology
    from fabricsim.traffic import Traffic


def cached_group_shape(cluster: Cluster, nranks: int, ppn: int) -> GroupShape:
    """Group shapes cached per catalog, system, fabric and group layout (clusters built alike share them). On a
    direct network (dragonfly, Slim Fly) the analytical model prices a fat tree whose all_to_all is tapered as the
    built network is for uniform traffic: the nodes' injection over the network's bisection (`direct_taper`)."""
    taper = 1.0
    if cluster.fabric_kind in DIRECT_FABRICS:
        nodes = max(ceil(nranks / max(ppn, 1)), cluster.fabric_nodes or 0)
        if nodes > _one_group(cluster):
            taper = direct_taper(_fabric(ByIdentity(cluster), nodes))
    shape = _shape(ByIdentity(cluster.catalog), cluster.system, cluster.fabric, cluster.oversubscription, nranks,
                   ppn, taper)
    if cluster.sharp and shape.sharp and shape.fabric_switch_id is not None and sharp_refusal(
            cluster.catalog.switch(shape.fabric_switch_id), cluster.sharp_jobs) is None:
        shape = replace(shape, collnet=True)  # a SHARP tree granted: NCCL's choice includes CollNet
    if cluster.network_fraction < 1.0 and shape.nnodes > 1:  # a slow NIC paces the rings and trees through it
        shape = scaled(shape, net=cluster.network_fraction)
    return shape


def _one_group(cluster: Cluster) -> int:
    """Consecutive nodes that share one switch group, where a group's traffic stays (a dragonfly+ group; 1 on a
    Slim Fly, whose every router pair is at most two hops apart)."""
    if cluster.fabric_kind != "dragonfly":
        return 1
    from fabricsim.topology import dragonfly_group_nodes, resolve_switch

    link = cluster.link
    return dragonfly_group_nodes(resolve_switch(link.id, cluster.catalog).radix, cluster.system.nics_per_node)


def direct_taper(topology: Topology) -> float:
    """How far below its NICs' rate a network carries uniform (all-to-all) traffic: what crosses the bisection
    when every node sends evenly to every other at the NIC rate (N_A N_B / (N - 1) nodes' worth) over the
    bisection, at least 1. A fat tree, a dragonfly+ and a Slim Fly with full global links give 1; a network
    with thinner links between its halves more."""
    n = topology.num_nodes
    if n < 2:
        return 1.0
    crossing = (n // 2) * (n - n // 2) / (n - 1) * topology.node.nics * topology.nic_link_bytes_per_s
    return max(1.0, crossing / topology.bisection_bytes_per_s)


@lru_cache(maxsize=65536)
def _shape(catalog: ByIdentity[Catalog], system: System, fabric: str | None, oversubscription: float,
           nranks: int, ppn: int, uniform_taper: float) -> GroupShape:
    return group_shape(system, nranks, ranks_per_node=ppn, fabric=fabric, oversubscription=oversubscription,
                       catalog=catalog.value, uniform_taper=uniform_taper)


def collective_time(shape: GroupShape | None, op: str, size: float, catalog: Catalog) -> tuple[float, str]:
    """Time of one collective on a group of ``shape`` (None: a group of one) and the link kind it loads most."""
    if shape is None or size <= 0:
        return 0.0, "nvlink"
    return _cached_comm(shape, op, size, ByIdentity(catalog))


def group_comm(cluster: Cluster, nranks: int, ranks_per_node: int, op: str, size: float) -> tuple[float, str]:
    """Seconds of one collective of ``size`` bytes (nccl-tests convention) on a group of ``nranks`` GPUs with at most
    ``ranks_per_node`` on a node, and the link kind it loads most; the group shape and the time are cached (the
    public form of the pricing training uses, for inference and other workloads)."""
    if nranks < 2 or size <= 0:
        return 0.0, "nvlink"
    return collective_time(cached_group_shape(cluster, nranks, ranks_per_node), op, size, cluster.catalog)


def groups_comm(cluster: Cluster, groups: NDArray[np.int64], world_size: int, op: str,
                size: float) -> tuple[float, str]:
    """``concurrent_groups_time`` of ``groups`` (rows of GPU indices of a job of ``world_size`` GPUs, placed first on
    the fabric) on the cluster's fat tree, with its other jobs and background traffic beside them."""
    cluster_ref = ByIdentity(cluster)
    job_nodes = ceil(world_size / cluster.system.gpus_per_node)
    nodes = max(job_nodes, cluster.fabric_nodes or 0)
    topology = _fabric(cluster_ref, nodes)
    others = _other_traffic(cluster_ref, nodes, world_size) if cluster.other_jobs else None
    from fabricsim.collectives import concurrent_groups_time
    from fabricsim.traffic import traffic_classes

    own = list(traffic_classes(dict(cluster.classes))).index(cluster.own_class)
    return concurrent_groups_time(topology, groups, op, size, cluster.routing, others, cluster.congestion,
                                  cluster.qos, own)


@lru_cache(maxsize=64)
def _fabric(cluster_ref: ByIdentity[Cluster], nodes: int) -> Topology:
    """The fabric of ``nodes`` nodes the cluster describes: its design (rail-optimized fat tree by default, rail-only,
    dragonfly), planes, link and oversubscription."""
    from fabricsim.topology import build_cluster

    cluster = cluster_ref.value
    link = cluster.link.id
    topology = build_cluster(cluster.system.id, nodes=nodes, fabric=cluster.fabric_kind, link=link,
                             oversubscription=cluster.oversubscription, planes=cluster.planes,
                             dragonfly_routing=cluster.dragonfly_routing, catalog=cluster.catalog)
    if cluster.degradation is not None and cluster.sim == "flow":
        from fabricsim.topology import degraded

        topology = degraded(topology, cluster.degradation)
    return topology


@lru_cache(maxsize=64)
def _other_traffic(cluster_ref: ByIdentity[Cluster], nodes: int, job_gpus: int) -> Traffic:
    """The other jobs and background transfers, placed on the fabric's GPUs after this job's first ``job_gpus``."""
    from fabricsim.traffic import build_traffic

    cluster = cluster_ref.value
    return build_traffic(_fabric(cluster_ref, nodes), list(cluster.other_jobs), list(cluster.background),
                         cluster.storage_nodes, reserved_gpus=job_gpus, classes=dict(cluster.classes))


@lru_cache(maxsize=65536)
def _cached_comm(shape: GroupShape, op: str, size: float, catalog_ref: ByIdentity[Catalog]) -> tuple[float, str]:
    """Collectives cached per group shape, operation and size (a sizing search times the same ones often)."""
    catalog = catalog_ref.value
    choice = CollectiveModel(shape, catalog=catalog).choose(op, size)
    kind = max(choice.cost.per_byte_s.items(), key=lambda kv: kv[1])[0] if choice.cost.per_byte_s else "nvlink"
    return choice.cost.time_s(size), kind
