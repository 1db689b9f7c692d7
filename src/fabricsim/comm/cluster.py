"""The cluster a workload runs on: a system preset, its scale-out network and how collectives are priced on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from fabricsim.catalog import Catalog, System, default_catalog
from fabricsim.errors import SpecError

if TYPE_CHECKING:  # only annotations: the traffic package (and the flow simulator) loads when a flow run needs it
    from fabricsim.catalog import CongestionControl, LinkTech
    from fabricsim.topology import Degradation
    from fabricsim.traffic import BackgroundSpec, JobSpec

SIMS = ("analytical", "flow")
FLOW_FABRICS = ("fat-tree", "rail-only", "dragonfly", "slim-fly")
DIRECT_FABRICS = ("dragonfly", "slim-fly")
"""fabrics the analytical model prices as a fat tree tapered to their bisection"""


@dataclass(frozen=True, eq=False)
class Cluster:
    """Where the job runs: a system preset, the network between nodes and its oversubscription; ``sim`` "flow"
    prices the data-parallel and expert-parallel collectives on the built fat tree, every group of a kind at once
    (``fabricsim.collectives.flow.concurrent_groups_time``), instead of each group alone on a perfect fabric."""

    system: System
    fabric: str | None = None
    oversubscription: float = 1.0
    catalog: Catalog = field(default_factory=default_catalog)
    sim: str = "analytical"
    routing: str = "ecmp"
    other_jobs: tuple[JobSpec, ...] = ()
    """with sim "flow": other jobs on the same fabric, placed after this job's GPUs"""
    background: tuple[BackgroundSpec, ...] = ()
    storage_nodes: int = 0
    fabric_nodes: int | None = None
    """nodes of the whole fabric (default: this job's): with sim "flow" the fabric built, on a direct network the
    analytical all_to_all taper's"""
    fabric_kind: str = "fat-tree"
    """the scale-out design (fat-tree, rail-only, dragonfly, slim-fly): built by the flow simulator; the analytical
    model prices a rail-optimized fat tree, which rail-only and multi-plane fabrics match for NCCL's rail-local
    traffic (PXN), tapered to the bisection of a direct network (dragonfly, Slim Fly)"""
    planes: int = 1
    dragonfly_routing: str = "minimal"
    congestion: CongestionControl | None = None
    """with sim "flow": the fabric's flow and rate control (None: ideal max-min sharing)"""
    qos: bool = True
    """with sim "flow": traffic classes each in their own queue at their weight (else one shared queue)"""
    classes: tuple[tuple[str, float], ...] = ()
    """with sim "flow": the other jobs' traffic classes and weights (the jobs file's `classes`)"""
    own_class: str = "default"
    """with sim "flow": this job's traffic class"""
    network_fraction: float = 1.0
    """the analytical model's network between nodes at this share of its rate: the slowest NIC link among the
    job's nodes (`--degrade link=F@nodeN`), which paces every ring and tree crossing nodes"""
    degradation: Degradation | None = None
    """with sim "flow": the degraded links of the fabric built"""
    sharp: bool = False
    """NCCL_COLLNET_ENABLE=1: groups across nodes may reduce in the switches (SHARP) where they get a tree"""
    sharp_jobs: int = 1
    """jobs (this one included) that want SHARP trees through the same leaf switches"""

    @cached_property
    def link(self) -> LinkTech:
        """The network between nodes as its catalog link (the system NIC's own when ``fabric`` is None), resolved
        once: the layers below take this object, not the name."""
        from fabricsim.collectives import resolve_fabric_link

        return resolve_fabric_link(self.catalog, self.system, self.fabric)

    def __post_init__(self) -> None:
        if self.sim not in SIMS:
            raise SpecError(f"unknown simulator {self.sim!r}; choose {' or '.join(SIMS)}", field="--sim")
        if self.fabric_kind not in FLOW_FABRICS:
            raise SpecError(f"unknown fabric {self.fabric_kind!r}; choose {', '.join(FLOW_FABRICS)}", field="--fabric")
        larger = self.fabric_nodes and self.fabric_kind not in DIRECT_FABRICS  # direct: the analytical taper's
        if self.sim != "flow" and self.congestion is not None:
            raise SpecError("a fabric's congestion behaviour acts on the flow simulator; add --sim flow (the "
                            "analytical model shares no links)", field="--cc")
        if self.sim != "flow" and (self.other_jobs or self.background or larger):
            raise SpecError("other jobs and a larger fabric need --sim flow", field="--jobs")
