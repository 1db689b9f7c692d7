"""Catalog entries for how a shared fabric behaves beyond its link rates: flow control (lossless credits or PFC,
or none), the time its rate control takes to bring congested sources to their fair share, and the fabric kind it
runs on. The flow simulator applies them (`fabricsim.network.control`); `ideal` is today's max-min sharing."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fabricsim.catalog.models import Entry
from fabricsim.catalog.quantities import Seconds

FlowControl = Literal["credit", "pfc", "none"]
"""credit: InfiniBand link-level credits per virtual lane; pfc: Ethernet priority flow control; none: lossy (a
full queue drops, so it never stops a link)"""
FabricKind = Literal["infiniband", "ethernet", "any"]

DEFAULT_CONGESTION_CONTROL = "ideal"
"""The behaviour when none is named: ideal max-min sharing (the flow simulator's upper bound)."""


class CongestionControl(Entry):
    """A fabric's flow control and rate control, as the flow simulator applies them."""

    fabric: FabricKind = Field(description="the fabric kind it runs on (any: a model, not a product)")
    flow_control: FlowControl = Field(description="what stops a link when a queue beyond it fills")
    reaction_s: Seconds | None = Field(
        description="time rate control takes to bring the sources of a congested port to their fair share after "
        "flows arrive (0: at once; none: no rate control, sources keep sending at line rate)")

    def runs_on(self, kind: str) -> bool:
        """Whether it runs on a fabric of this kind (infiniband, ethernet)."""
        return self.fabric in ("any", kind)

    @property
    def lossless(self) -> bool:
        return self.flow_control != "none"

    @property
    def reaction_or_never_s(self) -> float:
        """`reaction_s`, +inf without rate control."""
        return float("inf") if self.reaction_s is None else self.reaction_s
