"""`ClusterSpec`: the inputs of a cluster build, validated, loadable from a mapping or a YAML/JSON file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fabricsim.catalog import read_spec_file, validation_message
from fabricsim.errors import SpecError
from fabricsim.topology.storage_spec import StorageNetworkSpec

FabricName = Literal["fat-tree", "rail-only", "dragonfly", "slim-fly", "torus", "mesh"]
FABRICS: tuple[str, ...] = ("fat-tree", "rail-only", "dragonfly", "slim-fly", "torus", "mesh")


class ClusterSpec(BaseModel):
    """What to build: a system preset, how many of them, and the scale-out fabric between them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    system: str = Field("dgx-h100", description="catalog system id (one node: a server, or a rack for NVL72)")
    nodes: int = Field(1, description="compute nodes (servers, or racks for rack-scale systems)")
    fabric: FabricName = Field("fat-tree", description="fat-tree, rail-only (a network per rail, none between), "
                               "dragonfly (dragonfly+: leaf-spine groups joined by global links), "
                               "slim-fly (routers of a diameter-2 MMS graph), torus (3D, of "
                               "switches) or mesh (node to node)")
    link: str | None = Field(None, description="fabric link technology id (ib-ndr, eth-400g, ...) or a switch id; "
                             "default: the link of the system's own NIC")
    tiers: int | None = Field(None, description="fat-tree tiers 1-3; None picks the fewest that fit")
    rail_optimized: bool = Field(True, description="fat tree: NIC i of every node on rail leaf i (else ToR leaves)")
    oversubscription: float = Field(1.0, description="leaf node ports : leaf uplinks (fat tree); 1 is non-blocking")
    node_cable: Literal["optical", "copper"] = Field(
        "optical", description="NIC-to-first-switch cables; SuperPOD runs optics to leaves at the end of the row")
    torus_dims: tuple[int, int, int] | None = Field(None, description="torus switches per dimension; None: near-cube")
    nodes_per_switch: int = Field(1, description="torus: nodes attached to each torus switch")
    nic: str | None = Field(None, description="catalog NIC id; None: the system's, or one that speaks the fabric")
    dragonfly_routing: Literal["minimal", "valiant", "ugal"] = Field(
        "minimal", description="dragonfly: minimal paths, Valiant's through an intermediate group, or both (UGAL "
        "with adaptive routing)")
    planes: int = Field(1, ge=1, le=8, description="fat tree: planes each NIC's bandwidth is split over (multi-plane; "
                        "1: one fabric)")
    storage: StorageNetworkSpec | None = Field(None, description="storage servers and the network to them, billed "
                                               "with the cluster; None: none")

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be at least 1 (got {value})")
        return value

    @field_validator("tiers")
    @classmethod
    def _tiers(cls, value: int | None) -> int | None:
        if value is not None and value not in (1, 2, 3):
            raise ValueError(f"must be 1, 2 or 3 (got {value})")
        return value

    @field_validator("oversubscription")
    @classmethod
    def _oversubscription(cls, value: float) -> float:
        if not 1.0 <= value <= 64.0:
            raise ValueError(f"must be a finite ratio >= 1 and <= 64 (1 = non-blocking, 2 = 2:1); got {value}")
        return value

    @field_validator("nodes_per_switch")
    @classmethod
    def _nodes_per_switch(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be at least 1 (got {value})")
        return value

    @field_validator("torus_dims")
    @classmethod
    def _dims(cls, value: tuple[int, int, int] | None) -> tuple[int, int, int] | None:
        if value is not None and min(value) < 1:
            raise ValueError(f"every dimension must be at least 1 (got {value})")
        return value

    @classmethod
    def parse(cls, data: Any, *, source: str | None = None) -> ClusterSpec:
        """Validate a mapping; the first problem becomes a SpecError naming the field."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            path, msg = validation_message(exc)
            raise SpecError(msg, field=path or None, source=source) from None

    @classmethod
    def from_file(cls, path: str | Path) -> ClusterSpec:
        """Load a spec from a YAML or JSON file."""
        return cls.parse(read_spec_file(path), source=str(path))
