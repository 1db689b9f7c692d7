"""The cluster `topo` and `traffic` describe (a ClusterSpec: system, nodes, scale-out design, network, switch
tiers, cables) and the storage network `topo` bills beside it; the scale-out design and flow simulation options of
a training run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fabricsim.api.specs.fields import OptionGroup, opt
from fabricsim.api.specs.goodput import STORAGE_HELP, STORAGE_NETWORK_HELP, StorageBw, StorageServer, StorageServers
from fabricsim.api.specs.shared import (
    CongestionOption,
    DegradeOption,
    DesignOption,
    DragonflyRoutingOption,
    NetworkOption,
    NodesOption,
    OversubscriptionOption,
    PlanesOption,
    QosOption,
    RailOptimizedOption,
    SharpJobsOption,
    SharpOption,
    SystemOption,
)

ROUTING_HELP = ("ecmp (a hashed path per flow), adaptive (split by load) or spray (per packet) [default: ecmp]; "
                "flow simulation only (collective and train: with --sim flow)")
"""--routing's one help text: `collective` declares it optional (refused without --sim flow), `traffic` always
simulates flows."""


RoutingOption = Annotated[str, opt("ecmp", ROUTING_HELP)]


class ClusterOptions(OptionGroup):
    """The cluster: its system, node count, scale-out design, network, switch tiers and cables."""

    system: SystemOption
    nodes: NodesOption
    fabric: DesignOption
    ib: NetworkOption
    eth: str | None = opt(None, "Ethernet fabric, 400g or 800g (older spelling of --ib eth-400g)")
    switch: str | None = opt(None, "fabric switch id instead (qm9700, sn5600, ...)")
    tiers: int | None = opt(None, "fat-tree tiers 1-3 (default: fewest that fit)")
    rail_optimized: RailOptimizedOption
    oversubscription: OversubscriptionOption
    node_cable: str = opt("optical", "optical or copper NIC-to-switch cables")
    torus_dims: str | None = opt(None, "torus switches per dimension, e.g. 4x4x2")
    nodes_per_switch: int = opt(1, "torus: nodes per torus switch")
    planes: PlanesOption
    dragonfly_routing: DragonflyRoutingOption
    nvlink_domain: int | None = opt(None, "join rack-scale nodes into NVLink domains of this many GPUs through a "
                                    "second NVLink switch tier (144 or 576 on gb200-nvl72; a roadmap design; the "
                                    "same as --system gb200-nvl72@144)", unit="GPUs")


class TopologyStorage(OptionGroup):
    """The storage network `topo` bills with the cluster (none unless asked)."""

    storage_network: str = opt("none", STORAGE_NETWORK_HELP)
    storage: str | None = opt(None, STORAGE_HELP)
    storage_bw: StorageBw
    storage_server: StorageServer
    storage_servers: StorageServers
    storage_switch: str | None = opt(None, "separate storage fabric: switch id or link [default: the compute "
                                     "fabric's]")


class DesignOptions(OptionGroup):
    """The scale-out design a training run's network is priced (analytical) or built (flow) as."""

    fabric_kind: DesignOption
    planes: PlanesOption
    dragonfly_routing: DragonflyRoutingOption


class FlowOptions(OptionGroup):
    """Flow simulation of a training step's collectives on the built fabric, with other jobs beside it."""

    sim: str = opt("analytical", "analytical, or flow: data- and expert-parallel collectives of every group at once "
                   "on the built fat tree (flow simulation)")
    routing: RoutingOption
    cc: CongestionOption
    jobs: str | Path | None = opt(None, "with --sim flow: other jobs and background traffic (the `traffic --jobs` "
                                  "YAML), placed after this job's GPUs")
    qos: QosOption
    cluster_nodes: int | None = opt(None, "with --sim flow: nodes of the whole fabric (default: this job's)")


class TrafficOptions(OptionGroup):
    """`traffic`'s workload on the cluster (the command has no API function: the flow simulator's own API is
    `fabricsim.network`)."""

    pattern: str = opt("all_to_all", "permutation, all_to_all, ring, incast, all_reduce, all_gather, "
                       "reduce_scatter, or a CSV matrix of bytes (rank x rank)")
    nbytes: str = opt("1G", "bytes each GPU sends (K/M/G powers of 1024)", cli="--bytes", unit="bytes")
    gpus: int | None = opt(None, "GPUs in the job (default: all)")
    placement: str = opt("packed", "packed, scattered or random")
    seed: int = opt(0, "seed of random placements and permutations")
    routing: RoutingOption
    cc: CongestionOption
    qos: QosOption
    degrade: DegradeOption
    jobs_file: Path | None = opt(None, "YAML of several jobs and background traffic (replaces "
                                 "--pattern/--bytes/--gpus/--placement)", cli="--jobs")
    checkpoint: str | None = opt(None, "a model (preset or file) whose checkpoint the job writes, at its start, to "
                                 "converged storage at the fabric's end: simulated beside the job's traffic and "
                                 "compared with the goodput model")
    storage_server: StorageServer
    storage_servers: StorageServers


class DegradeOptions(OptionGroup):
    """Parts of the cluster running below their rating (stragglers, throttled nodes, slow or failed links) and
    SHARP in-network reduction with its limited trees."""

    degrade: DegradeOption
    sharp: SharpOption
    sharp_jobs: SharpJobsOption
