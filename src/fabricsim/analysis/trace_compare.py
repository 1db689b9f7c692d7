"""A measured training step (a profiler trace's summary) against fabricsim's prediction of the same plan, quantity
by quantity: step time, compute, exposed and overlapped communication, idle time against the pipeline bubble, and
each collective's time per call against the model's price of the same operation, size and group on the cluster."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from fabricsim import units
from fabricsim.comm import Cluster, group_comm
from fabricsim.training import TrainingPrediction

COMM_LAYERS = ("nvlink", "pcie", "infiniband", "ethernet")
COMPUTE_LAYERS = ("compute", "hbm")
"""the prediction's layers that a trace shows as compute kernels: tensor-core work and memory-bound kernels"""


class MeasuredCollective(Protocol):
    """One collective group of a measured step (``fabricsim.traces.CollectiveStat``)."""

    @property
    def op(self) -> str: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def nranks(self) -> int: ...
    @property
    def count(self) -> float: ...
    @property
    def mean_time_s(self) -> float: ...


class MeasuredStep(Protocol):
    """What a measured step must say, seconds per step (``fabricsim.traces.DeviceSummary``)."""

    @property
    def step_time_s(self) -> float: ...
    @property
    def compute_s(self) -> float: ...
    @property
    def exposed_comm_s(self) -> float: ...
    @property
    def overlap_s(self) -> float: ...
    @property
    def idle_s(self) -> float: ...
    @property
    def collectives(self) -> Sequence[MeasuredCollective]: ...


@dataclass(frozen=True)
class CompareRow:
    """One quantity: measured and predicted seconds, and the prediction's relative error (None: nothing measured)."""

    quantity: str
    measured_s: float
    predicted_s: float
    error: float | None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _row(quantity: str, measured: float, predicted: float, note: str = "") -> CompareRow:
    error = (predicted - measured) / measured if measured > 0 else None
    return CompareRow(quantity, measured, predicted, error, note)


def compare_step(measured: MeasuredStep, prediction: TrainingPrediction,
                 cluster: Cluster | None = None) -> list[CompareRow]:
    """The table of measured against predicted quantities; per-collective rows need the cluster to price them."""
    exposed, hidden = prediction.breakdown.exposed, prediction.breakdown.overlapped
    rows = [
        _row("step time", measured.step_time_s, prediction.step_time_s),
        _row("compute", measured.compute_s, sum(exposed[k] + hidden[k] for k in COMPUTE_LAYERS),
             "kernels busy (union) vs the compute and hbm layers"),
        _row("exposed communication", measured.exposed_comm_s, sum(exposed[k] for k in COMM_LAYERS),
             "communication under no compute kernel"),
        _row("overlapped communication", measured.overlap_s, sum(hidden[k] for k in COMM_LAYERS),
             "communication under compute kernels"),
        _row("idle", measured.idle_s, exposed["pipeline_bubble"], "no kernel running vs the pipeline bubble"),
    ]
    if cluster is not None:
        rows += collective_rows(measured.collectives, cluster)
    return rows


def collective_rows(collectives: Sequence[MeasuredCollective], cluster: Cluster) -> list[CompareRow]:
    """Each collective of known size and group: measured seconds per call against the model's on the cluster
    (ranks packed on as few nodes as hold them)."""
    rows = []
    per_node = cluster.system.gpus_per_node
    for c in collectives:
        if c.size_bytes <= 0 or c.nranks < 2 or c.op == "unknown":
            continue
        predicted, layer = group_comm(cluster, c.nranks, min(c.nranks, per_node), c.op, c.size_bytes)
        rows.append(_row(f"{c.op} {units.format_size(c.size_bytes)} on {c.nranks} (per call)", c.mean_time_s,
                         predicted, f"{c.count:g} calls per step; model's bound: {layer}"))
    return rows
