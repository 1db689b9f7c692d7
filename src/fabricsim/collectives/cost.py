"""An alpha-beta cost: a fixed latency plus seconds per byte on each link kind, combined in parallel or series,
with a pipeline-fill ramp, a host launch floor and, where NCCL's tuner prices an algorithm differently from
what it physically costs, the per-byte figure NCCL selects by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np


@dataclass(frozen=True)
class Cost:
    """time(size) = max(floor_s, latency_s + size * per_byte + fill(size)), per_byte combining the link kinds.

    `per_byte_s` holds seconds per byte of the nccl-tests 'size' spent on each link kind. Pipelined algorithms
    (ring, tree, NVLS) overlap their link kinds (`combine="max"`); phased ones (hierarchical) add them.
    `fill_s` is a pipeline fill that grows in proportion to the size up to `fill_bytes` and stays constant
    beyond. `floor_s` is the host's launch time per iteration: nccl-tests queues iterations, so the GPU time hides
    behind it when shorter. `select_per_byte_s`, where set, is what NCCL's tuner assumes per byte when it picks
    the algorithm (the time reported is always the physical one); `fill_in_selection` False where NCCL's tuner
    does not see the fill (the NVLS-tree's pipeline across tree levels).
    """

    latency_s: float
    per_byte_s: dict[str, float]
    combine: Literal["max", "sum"] = "max"
    fill_s: float = 0.0
    fill_bytes: float = 0.0
    floor_s: float = 0.0
    select_per_byte_s: float | None = None
    fill_in_selection: bool = True

    @property
    def total_per_byte_s(self) -> float:
        values = self.per_byte_s.values()
        if not values:
            return 0.0
        return max(values) if self.combine == "max" else sum(values)

    def fill(self, sizes: np.ndarray) -> np.ndarray:
        """Pipeline fill at each size: proportional below `fill_bytes`, constant above."""
        if self.fill_s <= 0:
            return np.zeros_like(sizes)
        if self.fill_bytes <= 0:
            return np.full_like(sizes, self.fill_s)
        out: np.ndarray = self.fill_s * np.minimum(1.0, sizes / self.fill_bytes)
        return out

    def times(self, sizes: np.ndarray) -> np.ndarray:
        """Physical time at each size (vectorised)."""
        gpu = self.latency_s + sizes * self.total_per_byte_s + self.fill(sizes)
        out: np.ndarray = np.maximum(self.floor_s, gpu)
        return out

    def selection_times(self, sizes: np.ndarray) -> np.ndarray:
        """The time NCCL's tuner would predict, by which it picks the algorithm."""
        if self.select_per_byte_s is None and self.fill_in_selection:
            return self.times(sizes)
        per_byte = self.total_per_byte_s if self.select_per_byte_s is None else self.select_per_byte_s
        fill = self.fill(sizes) if self.fill_in_selection else 0.0
        gpu = self.latency_s + sizes * per_byte + fill
        out: np.ndarray = np.maximum(self.floor_s, gpu)
        return out

    def time_s(self, size_bytes: float) -> float:
        return float(self.times(np.array([float(size_bytes)]))[0])

    def selection_time_s(self, size_bytes: float) -> float:
        return float(self.selection_times(np.array([float(size_bytes)]))[0])

    def bound(self, size_bytes: float) -> str:
        """The link kind that bounds the time, 'launch' where the host floor does, or 'latency' where the fixed
        cost (latency and fill) dominates."""
        gpu = self.latency_s + size_bytes * self.total_per_byte_s + float(self.fill(np.array([float(size_bytes)]))[0])
        if self.floor_s > gpu:
            return "launch"
        if not self.per_byte_s:
            return "latency"
        kind, per_byte = max(self.per_byte_s.items(), key=lambda kv: kv[1])
        fixed = gpu - size_bytes * self.total_per_byte_s
        return "latency" if fixed >= size_bytes * per_byte else kind
