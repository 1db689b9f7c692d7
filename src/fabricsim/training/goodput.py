"""Goodput of a training run: the fraction of wall-clock time spent on training that is kept, given how often the
job is interrupted (`training.failures`), what a checkpoint costs and what a restart costs.

Model (first order in the failure rate, as Meta's E[ETTR] for its RSC clusters, Kokolis et al. 2025):
    goodput = (1 - lam_u (restart + lost) - lam_p restart) / (1 + blocking / interval)
- lam_u, lam_p: unplanned and planned interruptions per second; a planned one checkpoints first (no lost work);
- restart: detection, rescheduling, start-up and warm-up (`data/recovery.yaml`) plus reading the checkpoint back
  at the storage tier's read rate;
- lost: work since the last complete checkpoint, on average interval / 2 (plus the background write in flight
  when checkpoints are asynchronous);
- blocking: the training time one checkpoint stops: the whole write when synchronous; asynchronous (Megatron-Core
  ``--async-save``, PyTorch DCP ``async_save``), only the copy of each GPU's shard to host memory over its PCIe;
  in memory (Gemini's "redundant in-memory copies of the model state", Gemini Team 2023 sec. 3; GEMINI, Wang et
  al., SOSP 2023), the same copy, then each shard goes to a peer node's host memory over the NICs and a restart
  reads it back from there instead of from storage (a failure that takes out a shard and its peer copy at once,
  and the storage checkpoints still kept for it, are not modelled).
The write goes at the slowest of the storage tier (per scalable unit), its per-GPU rate and the GPUs' PCIe.
The optimal interval maximises this goodput: d/dt = 0 gives t* = -b + sqrt(b^2 + 2 A b / lam_u) (A: the numerator
without lost work, b: blocking), Young's sqrt(2 b / lam_u) when b is small (Young 1974); an asynchronous interval
never undercuts the write it waits for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fabricsim.catalog import Catalog, System
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.inputs import load_packaged_yaml
from fabricsim.model import ModelSpec
from fabricsim.topology import DEFAULT_STORAGE_SERVER, DEFAULT_STORAGE_TIER, StorageBill, StorageNetworkSpec
from fabricsim.training.failures import InterruptionRates, JobParts, interruption_rates
from fabricsim.training.memory import OPTIMIZER_BYTES, WEIGHT_BYTES

if TYPE_CHECKING:
    import numpy.typing as npt

CheckpointMode = Literal["sync", "async", "memory"]
StorageNetworkChoice = Literal["separate", "converged", "none"]
DEFAULT_STORAGE = DEFAULT_STORAGE_TIER


class GoodputSpec(BaseModel):
    """The user's goodput options: storage tier, checkpoint mode and interval, failure-rate scale, restart."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    storage: str = Field(DEFAULT_STORAGE, description="catalog storage tier the checkpoints go to")
    storage_write_bytes_per_s: float | None = Field(None, gt=0, allow_inf_nan=False,
                                                    description="aggregate write rate instead of the tier's")
    storage_scale: float = Field(1.0, gt=0, allow_inf_nan=False,
                                 description="the storage's read and write rates x this (whatif storage=2x)")
    checkpoint: CheckpointMode = Field("sync", description="sync (Megatron-LM's default), async (--async-save) or "
                                       "memory (to peers' host memory, restored from them)")
    interval_s: float | None = Field(None, gt=0, allow_inf_nan=False, description="None: the optimal interval")
    mtbf_scale: float = Field(1.0, gt=0, allow_inf_nan=False)
    restart_s: float | None = Field(None, ge=0, allow_inf_nan=False, description="None: data/recovery.yaml")
    storage_network: StorageNetworkChoice = Field(
        "separate", description="storage servers sized to the tier on a separate storage fabric (billed), converged "
        "on the compute fabric (billed), or none (the tier's rates, not billed)")
    storage_network_given: bool = Field(True, description="False: storage_network is the default, separate, which "
                                        "converges (with a note) on a system without storage ports")
    storage_server: str = Field(DEFAULT_STORAGE_SERVER, description="catalog storage server id")
    storage_servers: int | None = Field(None, ge=1, description="None: the fewest that meet the tier")
    spares: int | None = Field(None, ge=0, description="hot spare units (nodes, or a rack's compute trays); None: "
                               "spare_fraction of the job's units")
    spare_fraction: float | None = Field(None, ge=0, le=1, allow_inf_nan=False,
                                         description="None: data/recovery.yaml's")

    def network_spec(self) -> StorageNetworkSpec | None:
        """The storage network these options buy (None: the tier's rates, unbilled)."""
        if self.storage_network == "none":
            return None
        return StorageNetworkSpec(network=self.storage_network, tier=self.storage, server=self.storage_server,
                                  servers=self.storage_servers, write_bytes_per_s=self.storage_write_bytes_per_s,
                                  scale=self.storage_scale,
                                  converge_without_ports=not self.storage_network_given)

    def spare_units(self, units: int) -> int:
        """Hot spare units kept beside a job of ``units`` replaceable units (nodes, or a rack's compute trays; at
        least one for any positive fraction)."""
        if self.spares is not None:
            return self.spares
        fraction = recovery_default("spare_fraction") if self.spare_fraction is None else self.spare_fraction
        return math.ceil(units * fraction - 1e-9)

    def spares_for(self, system: System, gpus: int) -> tuple[int, int]:
        """(hot spare units, GPUs per unit) beside a job of ``gpus`` GPUs on ``system`` (`spare_unit_gpus`)."""
        unit = spare_unit_gpus(system)
        return self.spare_units(math.ceil(gpus / unit)), unit


@dataclass(frozen=True)
class Goodput:
    """What failures and checkpoints leave of a run's throughput, and why."""

    goodput: float
    interruptions_per_day: float
    unplanned_by_component_per_day: dict[str, float]
    checkpoint_bytes: float
    checkpoint_write_s: float
    checkpoint_blocking_s: float
    checkpoint_interval_s: float
    checkpoint_overhead: float
    """fraction of time checkpoints stop training: blocking / (interval + blocking)"""
    restart_s: float
    lost_work_s: float
    """work lost per unplanned interruption, on average"""
    effective_tokens_per_s: float
    storage: str
    mode: CheckpointMode
    optimal_interval: bool
    cables_estimated: bool
    spare_units: int = 0
    """hot spare units beside the job (nodes, or a rack's compute trays)"""
    spare_unit_gpus: int = 8
    """GPUs of one spare unit"""
    spare_wait_s: float = 0.0
    """mean wait for a repaired node per unplanned interruption (0 while a spare is free)"""
    storage_bill: StorageBill | None = None
    """the storage servers and network the checkpoints go over (None: the tier's rates, unbilled)"""


def spare_unit_gpus(system: System) -> int:
    """GPUs of the unit a hot spare stands in for: the system's field-replaceable unit (a rack's compute tray), else
    the node."""
    return system.spare_unit_gpus or system.gpus_per_node


def spare_fields(text: str | None, field: str) -> dict[str, float | int]:
    """GoodputSpec's spare fields from a node count ('4') or a share of the job's nodes ('2%')."""
    if text is None:
        return {}
    value = text.strip()
    try:
        if value.endswith("%"):
            fraction = float(value[:-1]) / 100.0
            if not 0.0 <= fraction <= 1.0:
                raise ValueError
            return {"spare_fraction": fraction}
        count = int(value)
        if count < 0:
            raise ValueError
        return {"spares": count}
    except ValueError:
        raise SpecError(f"{text!r}: give a node count (4) or a share of the job's nodes (2%), from 0 to 100%",
                        field=field) from None


@lru_cache(maxsize=1)
def _recovery_table() -> dict[str, Any]:
    """data/recovery.yaml's ``recovery`` table, parsed once (libyaml's parser where PyYAML has it)."""
    text = resources.files("fabricsim.training").joinpath("data/recovery.yaml").read_text()
    table: dict[str, Any] = load_packaged_yaml(text, "recovery.yaml")["recovery"]
    return table


def recovery_default(name: str) -> float:
    """A packaged recovery parameter (data/recovery.yaml): restart_s, repair_s, spare_fraction."""
    return float(_recovery_table()[name]["value"])


def restart_default_s() -> float:
    """The packaged restart overhead (data/recovery.yaml)."""
    return recovery_default("restart_s")


def checkpoint_bytes(model: ModelSpec) -> float:
    """Bytes of one checkpoint: every parameter's BF16 weight and its FP32 master copy and Adam moments (what
    Megatron-Core's distributed checkpoint writes once, however ZeRO shards it; FP8 copies are derived, not
    saved)."""
    return float(model.parameters().total) * (WEIGHT_BYTES + OPTIMIZER_BYTES)


def _storage_rates(spec: GoodputSpec, cluster: Cluster, parts: JobParts,
                   injection: float) -> tuple[float, float, StorageBill | None]:
    """(write, read) bytes/s the checkpoint reaches, and the storage network's bill when the options buy one."""
    from fabricsim.topology import check_reachable, resolve_switch, storage_bill, tier_targets

    catalog, system = cluster.catalog, cluster.system
    network = spec.network_spec()
    if network is None:  # the tier's rates for the job's GPUs, unbilled
        read, write = tier_targets(catalog.storage_tier(spec.storage), parts.gpus, spec.storage_write_bytes_per_s,
                                   spec.storage_scale)
        check_reachable(write, parts.nodes, injection, "all their NICs")
        return write, read, None
    nic = catalog.nic(system.nic)
    bill = storage_bill(catalog, system, parts.nodes, parts.gpus, resolve_switch(cluster.fabric or nic.link, catalog),
                        nic, network)  # refuses a write rate beyond what the nodes can send
    return bill.write_bytes_per_s, bill.read_bytes_per_s, bill


def spare_wait_s(node_loss_per_s: float, spares: int, repair_s: float) -> float:
    """Mean wait for a node after a node-removing failure with ``spares`` hot spares: repairs of mean
    ``repair_s`` (exponential) arrive as a Poisson process, so the nodes in repair at a failure are Poisson with
    mean m = rate x repair; with k >= spares of them no spare is free and the job waits for the first of the k + 1
    repairs, repair / (k + 1) on average."""
    m = node_loss_per_s * repair_s
    if m <= 0.0:
        return repair_s if spares == 0 else 0.0
    k = np.arange(spares, spares + math.ceil(m + 12.0 * math.sqrt(m) + 30.0))
    return float(np.sum(poisson_pmf(k, m) * repair_s / (k + 1)))


# ln Gamma(x) for x >= 13 by Stirling's series as Cephes' lgam (S. L. Moshier; scipy.special.gammaln runs it):
# (x - 1/2) ln x - x + ln sqrt(2 pi) + A(1/x^2) / x, A Cephes' minimax fit of the series 1/12 - 1/(360 x^2) + ...
# (below x = 1000), the series' own first three terms from there. The same operations give the same doubles,
# so the Poisson sum below prints what scipy.stats printed (tests/test_startup.py compares them).
_LN_SQRT_2PI = 0.91893853320467274178
_STIRLING_FIT = (8.11614167470508450300e-4, -5.95061904284301438324e-4, 7.93650340457716943945e-4,
                 -2.77777777730099687205e-3, 8.33333333333331927722e-2)


def log_factorial(k: int) -> float:
    """ln(k!) for an integer k >= 0: the log of the exact integer below 12! (as Cephes' recurrence there),
    Stirling's series beyond (see above); within a few ulps of the true value."""
    if k < 12:
        return math.log(math.factorial(k))
    x = k + 1.0
    q = (x - 0.5) * math.log(x) - x + _LN_SQRT_2PI
    if x > 1.0e8:
        return q
    p = 1.0 / (x * x)
    if x >= 1000.0:
        return q + ((p * (1.0 / 1260.0) - 1.0 / 360.0) * p + 1.0 / 12.0) / x
    a = _STIRLING_FIT[0]
    for c in _STIRLING_FIT[1:]:
        a = a * p + c
    return q + a / x


def poisson_pmf(k: npt.NDArray[np.int64], mu: float) -> npt.NDArray[np.float64]:
    """P(X = k) for X Poisson with mean ``mu`` > 0, k >= 0: exp(k ln mu - ln k! - mu), scipy.stats.poisson.pmf's
    formula without importing scipy.stats (half a second of start-up for this one sum)."""
    log_k_factorial = np.array([log_factorial(int(i)) for i in k], dtype=np.float64)
    return np.exp(k * math.log(mu) - log_k_factorial - mu)


def predict_goodput(model: ModelSpec, cluster: Cluster, parts: JobParts, step_time_s: float, tokens_per_s: float,
                    spec: GoodputSpec | None = None) -> Goodput:
    """Goodput and effective throughput of a run of ``step_time_s`` steps on these parts (see the module)."""
    spec = spec or GoodputSpec()
    catalog: Catalog = cluster.catalog
    nic = catalog.nic(cluster.system.nic)
    injection = parts.nodes * cluster.system.nics_per_node * nic.ports * nic.port_bytes_per_s
    rates = interruption_rates(parts, catalog, spec.mtbf_scale)
    size = checkpoint_bytes(model)
    write_bw, read_bw, bill = _storage_rates(spec, cluster, parts, injection)
    pcie = catalog.link(catalog.gpu(cluster.system.gpu).pcie).bytes_per_s
    copy_s = size / parts.gpus / pcie  # each GPU's share to host memory, all GPUs at once
    if spec.checkpoint == "memory":  # to and from a peer node's host memory, every node's NICs at once
        write_s, read_s = max(size / injection, copy_s), size / injection
    else:
        write_s, read_s = max(size / write_bw, copy_s), size / read_bw
    blocking = write_s if spec.checkpoint == "sync" else copy_s
    in_flight = 0.0 if spec.checkpoint == "sync" else write_s
    restart = (restart_default_s() if spec.restart_s is None else spec.restart_s) + read_s
    spares, unit = spec.spares_for(cluster.system, parts.gpus)
    lam_u = rates.unplanned_total_per_s
    wait = 0.0 if lam_u <= 0 else \
        rates.node_loss_per_s / lam_u * spare_wait_s(rates.node_loss_per_s, spares, recovery_default("repair_s"))
    floor = max(step_time_s, in_flight)
    interval = spec.interval_s if spec.interval_s is not None else \
        optimal_interval_s(rates, restart, blocking, in_flight, floor, wait)
    if spec.interval_s is not None and spec.interval_s < floor:
        raise SpecError(f"a checkpoint every {spec.interval_s:g} s is shorter than "
                        f"{'one step' if floor == step_time_s else 'the background write it waits for'} "
                        f"({floor:.3g} s)", field="--checkpoint-interval")
    value = goodput_at(rates, restart, blocking, in_flight, interval, wait)
    return Goodput(
        goodput=value,
        interruptions_per_day=rates.per_day(),
        unplanned_by_component_per_day={k: v * 86400.0 for k, v in rates.unplanned_per_s.items()},
        checkpoint_bytes=size,
        checkpoint_write_s=write_s,
        checkpoint_blocking_s=blocking,
        checkpoint_interval_s=interval,
        checkpoint_overhead=blocking / (interval + blocking),
        restart_s=restart,
        lost_work_s=interval / 2 + in_flight,
        effective_tokens_per_s=tokens_per_s * value,
        storage=spec.storage,
        mode=spec.checkpoint,
        optimal_interval=spec.interval_s is None,
        cables_estimated=parts.cables_estimated,
        spare_units=spares,
        spare_unit_gpus=unit,
        spare_wait_s=wait,
        storage_bill=bill,
    )


def goodput_at(rates: InterruptionRates, restart_s: float, blocking_s: float, in_flight_s: float,
               interval_s: float, wait_s: float = 0.0) -> float:
    """Goodput with a checkpoint every ``interval_s`` seconds of training (0 when failures outpace progress);
    ``wait_s``: the mean wait for a repaired node per unplanned interruption (`spare_wait_s`)."""
    lam_u, lam_p = rates.unplanned_total_per_s, rates.planned_total_per_s
    lost = lam_u * (restart_s + wait_s + in_flight_s + interval_s / 2) if lam_u > 0 else 0.0
    kept = 1.0 - lost - lam_p * restart_s
    return max(0.0, kept / (1.0 + blocking_s / interval_s))


def optimal_interval_s(rates: InterruptionRates, restart_s: float, blocking_s: float, in_flight_s: float,
                       floor_s: float, wait_s: float = 0.0) -> float:
    """The interval that maximises `goodput_at`, at least ``floor_s`` (one step; an asynchronous write)."""
    lam_u = rates.unplanned_total_per_s
    if lam_u <= 0.0:
        return math.inf if blocking_s > 0 else floor_s
    a = 1.0 - lam_u * (restart_s + wait_s + in_flight_s) - rates.planned_total_per_s * restart_s
    if a <= 0.0:
        return floor_s
    b = blocking_s
    best = -b + math.hypot(b, math.sqrt(2.0 * a * b) / math.sqrt(lam_u))  # sqrt(b^2 + 2ab/lam), no overflow
    return max(best, floor_s)
