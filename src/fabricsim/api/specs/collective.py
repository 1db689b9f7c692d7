"""The options of one collective's prediction (`collective`): the group (system, nodes, GPUs and their spread), the
nccl-tests sweep (operation, sizes, algorithm, protocol, element type) and the network it crosses."""

from __future__ import annotations

from typing import ClassVar

from fabricsim.api.specs.cluster import ROUTING_HELP
from fabricsim.api.specs.fields import ApiFunction, OptionGroup, opt
from fabricsim.api.specs.runs import TopologyCalibration
from fabricsim.api.specs.shared import (
    CongestionOption,
    DegradeOption,
    DesignOption,
    DragonflyRoutingOption,
    NetworkOption,
    NodesOption,
    OversubscriptionOption,
    PlanesOption,
    SharpJobsOption,
    SystemOption,
)


class CollectiveOptions(OptionGroup):
    """One collective over a size sweep, as nccl-tests runs it, on the group's GPUs and the network between them."""

    system: SystemOption
    nodes: NodesOption
    gpus: int | None = opt(None, "first N GPUs of the nodes (default: all)")
    ranks_per_node: int | None = opt(None, "spread the group: N GPUs per node (1 = one rail across nodes)")
    op: str = opt("all_reduce", "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv "
                  "(also allreduce, alltoall_perf, bcast: as `bench collective`)")
    min_size: str = opt("8", "smallest size (nccl-tests -b), e.g. 8, 1K, 1M", cli="--min", unit="bytes")
    max_size: str = opt("8G", "largest size (nccl-tests -e)", cli="--max", unit="bytes")
    step_factor: float = opt(2.0, "size multiplier between rows (nccl-tests -f)")
    algo: str = opt("auto", "auto, ring, tree, nvls, nvls_tree, collnet, hierarchical, halving_doubling, direct")
    proto: str = opt("auto", "auto, LL, LL128, Simple")
    ib: NetworkOption
    fabric_kind: DesignOption
    planes: PlanesOption
    dragonfly_routing: DragonflyRoutingOption
    dtype: str = opt("float", "element type for the count column")
    sim: str = opt("analytical", "analytical (NCCL-style closed forms) or flow (the algorithm's schedule on the "
                   "built fat tree, max-min flow simulation)")
    routing: str | None = opt(None, ROUTING_HELP)
    cc: CongestionOption
    degrade: DegradeOption
    sharp_jobs: SharpJobsOption
    background: float = opt(0.0, "share (0-1) of every network link a neighbour's traffic wants: the collective gets "
                            "what it leaves, or its class's weighted share when both want more (--qos-weights)")
    qos_weights: str | None = opt(None, "OWN:NEIGHBOUR arbitration weights of the collective's traffic class and the "
                                  "neighbour's (e.g. 4:1: service levels, ETS); without, both share one queue (1:1)")
    oversubscription: OversubscriptionOption


class CollectiveRun(TopologyCalibration, CollectiveOptions):
    """One collective's predicted nccl-tests rows: `fabricsim collective` and `fabricsim.collective`."""

    api: ClassVar[ApiFunction] = ApiFunction(
        "collective", "fabricsim.api.collective:run_collective", "fabricsim.api.collective:CollectiveResult",
        "fabricsim.api.coerce:fabric_alias",
        "Predict what nccl-tests would measure for one collective across message sizes (the options and defaults "
        "of `fabricsim collective`; sizes as its --min/--max text, e.g. ``\"1M\"``).")
