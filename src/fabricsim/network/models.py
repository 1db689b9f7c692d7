"""Network models: how long a phase of concurrent point-to-point flows takes on a topology.

- `AnalyticalNetwork`: each flow alone on its path (alpha-beta: path latency + bytes / slowest link); the phase
  ends with its slowest flow. Congestion-unaware: flows sharing a link do not slow each other.
- `LinkLoadNetwork`: adds up the bytes every link carries in the phase; no flow can finish before its most loaded
  link has drained (bytes / capacity), plus the path latency. A congestion-aware lower bound that equals max-min
  fair sharing when one bottleneck link dominates; the flow-level simulator refines it.
Both take flows as arrays of GPU indices and bytes, so schedules from `fabricsim.collectives` time directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology import Topology, link_kind_name

if TYPE_CHECKING:
    import numpy.typing as npt


@dataclass(frozen=True)
class PhaseTiming:
    time_s: float
    bottleneck_link: int
    """id of the link that sets the phase's time (-1 for an empty phase)"""
    bottleneck_kind: str


class PhaseLike(Protocol):
    """Concurrent transfers between ranks (fabricsim.collectives.schedule.Phase has this shape); read-only."""

    @property
    def src(self) -> npt.NDArray[np.int64]: ...

    @property
    def dst(self) -> npt.NDArray[np.int64]: ...

    @property
    def bytes(self) -> npt.NDArray[np.float64]: ...


class NetworkModel(Protocol):
    def phase(self, topology: Topology, src: npt.ArrayLike, dst: npt.ArrayLike,
              nbytes: npt.ArrayLike) -> PhaseTiming: ...


def _routes(topology: Topology, src: npt.ArrayLike, dst: npt.ArrayLike, nbytes: npt.ArrayLike
            ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    s = np.asarray(src, dtype=np.int64)
    d = np.asarray(dst, dtype=np.int64)
    b = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), s.shape)
    if (b < 0).any():
        raise SpecError("flow sizes must be non-negative", field="bytes")
    keep = s != d
    s, d, b = s[keep], d[keep], b[keep]
    flow_ids = np.arange(len(s), dtype=np.int64)
    routes = topology.route(s, d, flow_ids)
    return routes.links, routes.flow_of_entry(), b, routes.indptr


def _path_latency(topology: Topology, links: npt.NDArray[np.int64], flow: npt.NDArray[np.int64],
                  flows: int) -> npt.NDArray[np.float64]:
    """Summed link latency of every flow's path."""
    out: npt.NDArray[np.float64] = np.bincount(flow, weights=topology.link_latency[links], minlength=flows).astype(
        np.float64, copy=False)
    return out


def _empty() -> PhaseTiming:
    return PhaseTiming(0.0, -1, "none")


class AnalyticalNetwork:
    """Per-path alpha-beta: each flow sees its path's slowest link and summed latency, alone."""

    def phase(self, topology: Topology, src: npt.ArrayLike, dst: npt.ArrayLike,
              nbytes: npt.ArrayLike) -> PhaseTiming:
        links, flow, b, indptr = _routes(topology, src, dst, nbytes)
        if len(b) == 0:
            return _empty()
        cap = topology.link_capacity[links]
        slowest = np.full(len(b), np.inf)
        np.minimum.at(slowest, flow, cap)
        times = _path_latency(topology, links, flow, len(b)) + b / slowest
        worst = int(np.argmax(times))
        path = links[indptr[worst]:indptr[worst + 1]]
        link = int(path[np.argmin(topology.link_capacity[path])]) if len(path) else -1
        return PhaseTiming(float(times[worst]), link, link_kind_name(int(topology.link_kind[link])) if link >= 0
                           else "none")


class LinkLoadNetwork:
    """Congestion-aware bound: a link carrying several flows needs the sum of their bytes over its capacity."""

    def phase(self, topology: Topology, src: npt.ArrayLike, dst: npt.ArrayLike,
              nbytes: npt.ArrayLike) -> PhaseTiming:
        links, flow, b, _ = _routes(topology, src, dst, nbytes)
        if len(b) == 0:
            return _empty()
        load = np.bincount(links, weights=b[flow], minlength=topology.num_links)
        drain = load / topology.link_capacity
        busiest = int(np.argmax(drain))
        latency = _path_latency(topology, links, flow, len(b)).max()
        return PhaseTiming(float(drain[busiest] + latency), busiest, link_kind_name(int(topology.link_kind[busiest])))


def schedule_time(network: NetworkModel, topology: Topology, gpus: Sequence[int] | npt.NDArray[np.int64],
                  phases: Sequence[PhaseLike]) -> tuple[float, list[PhaseTiming]]:
    """Total time of a collective schedule whose ranks sit on `gpus` (rank r on GPU gpus[r]); phases run in order.

    Transfers to or from the in-network reduction engine (rank -1: NVLS, SHARP) have no GPU-to-GPU path; such
    schedules need the flow simulator and raise a SpecError here.
    """
    where = np.asarray(gpus, dtype=np.int64)
    timings = []
    for ph in phases:
        if (ph.src < 0).any() or (ph.dst < 0).any():
            raise SpecError("schedules that reduce in the network (NVLS, SHARP) need the flow simulator",
                            field="--algo")
        timings.append(network.phase(topology, where[ph.src], where[ph.dst], ph.bytes))
    return sum(t.time_s for t in timings), timings
