"""An alpha-beta cost: a fixed latency plus seconds per byte on each link kind, combined in parallel or series."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Cost:
    """time(size) = latency_s + size * per_byte, where per_byte combines the per-link-kind terms.

    `per_byte_s` holds seconds per byte of the nccl-tests 'size' spent on each link kind. Pipelined algorithms
    (ring, tree, NVLS) overlap their link kinds (`combine="max"`); phased ones (hierarchical) add them.
    """

    latency_s: float
    per_byte_s: dict[str, float]
    combine: Literal["max", "sum"] = "max"

    @property
    def total_per_byte_s(self) -> float:
        values = self.per_byte_s.values()
        if not values:
            return 0.0
        return max(values) if self.combine == "max" else sum(values)

    def time_s(self, size_bytes: float) -> float:
        return self.latency_s + size_bytes * self.total_per_byte_s

    def bound(self, size_bytes: float) -> str:
        """The link kind that bounds the time, or 'latency' where the fixed cost dominates."""
        if not self.per_byte_s:
            return "latency"
        kind, per_byte = max(self.per_byte_s.items(), key=lambda kv: kv[1])
        return "latency" if self.latency_s >= size_bytes * per_byte else kind
