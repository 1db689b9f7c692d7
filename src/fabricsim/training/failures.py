"""How often a training job is interrupted: the catalog's per-component rates (`catalog.failures`) times the
parts of the job's cluster (GPUs, nodes, NICs, fabric cables from its bill of materials), plus the job-level
rates (software, planned maintenance). Any failure stops the whole job: synchronous training restarts every rank
from the last checkpoint, whatever failed (an NVL72 rack's fault and an HGX node's cost the same restart; the rack
has more GPUs, so it fails more often)."""

from __future__ import annotations

from dataclasses import dataclass

from fabricsim.catalog import Catalog, FailureUnit, System
from fabricsim.comm import Cluster

HOUR_S = 3600.0


@dataclass(frozen=True)
class JobParts:
    """Counts of each failing part kind a job depends on."""

    gpus: int
    nodes: int
    nics: int
    cables: float
    """fabric cables as failures count them (`BillOfMaterials.cable_failure_exposure`)"""
    cpus: int = 0
    cables_estimated: bool = False
    """True when no fat tree of the catalog's switches holds the job (cables: 3 per NIC, a full 3-tier tree's)"""

    def count(self, per: FailureUnit) -> float:
        return {"gpu": self.gpus, "cpu": self.cpus, "node": self.nodes, "nic": self.nics, "cable": self.cables,
                "job": 1}[per]


@dataclass(frozen=True)
class InterruptionRates:
    """Interruptions per second by catalog component, unplanned and planned (planned ones lose no work)."""

    unplanned_per_s: dict[str, float]
    planned_per_s: dict[str, float]
    node_loss_per_s: float = 0.0
    """of the unplanned ones, those that take a node out until it is repaired (``FailureRate.replaces_node``)"""

    @property
    def unplanned_total_per_s(self) -> float:
        return sum(self.unplanned_per_s.values())

    @property
    def planned_total_per_s(self) -> float:
        return sum(self.planned_per_s.values())

    def per_day(self) -> float:
        """Every interruption, planned or not, per day."""
        return (self.unplanned_total_per_s + self.planned_total_per_s) * 86400.0


def job_parts(cluster: Cluster, gpus: int) -> JobParts:
    """The parts of a job of ``gpus`` GPUs on whole nodes of ``cluster``: its nodes, their CPUs and NICs and the
    fabric cables between them (the bill of materials of a fat tree of those nodes)."""
    from fabricsim.errors import SpecError
    from fabricsim.topology import build_cluster

    system = cluster.system
    nodes = max(1, -(-gpus // system.gpus_per_node))
    nics = nodes * system.nics_per_node
    if nodes == 1:
        return parts_of(system, gpus, nics, 0)
    try:
        bill = build_cluster(system.id, nodes=nodes, link=cluster.fabric, oversubscription=cluster.oversubscription,
                             catalog=cluster.catalog).bom()
    except SpecError:  # beyond what the switches can build: count a full 3-tier tree's cables
        return parts_of(system, gpus, nics, 3 * nics, cables_estimated=True)
    return parts_of(system, gpus, bill.nics, bill.cable_failure_exposure)


def parts_of(system: System, gpus: int, nics: int, cables: float, cables_estimated: bool = False) -> JobParts:
    """A job's parts given the NICs and fabric cables of its bill of materials: its whole nodes of ``system`` and
    their CPU sockets (what every caller with a BOM at hand counts from)."""
    nodes = max(1, -(-gpus // system.gpus_per_node))
    return JobParts(gpus, nodes, nics, cables, nodes * system.cpus_per_node, cables_estimated)


def interruption_rates(parts: JobParts, catalog: Catalog, mtbf_scale: float = 1.0) -> InterruptionRates:
    """Each catalog component's interruptions per second for these parts; ``mtbf_scale`` multiplies the mean
    time between unplanned failures (2: half as many; planned maintenance keeps its schedule)."""
    unplanned: dict[str, float] = {}
    planned: dict[str, float] = {}
    node_loss = 0.0
    for rate in catalog.failures.values():
        per_s = rate.rate_per_hour / HOUR_S * parts.count(rate.per)
        if rate.planned:
            planned[rate.id] = per_s
        else:
            unplanned[rate.id] = per_s / mtbf_scale
            node_loss += unplanned[rate.id] if rate.replaces_node else 0.0
    return InterruptionRates(unplanned, planned, node_loss)
