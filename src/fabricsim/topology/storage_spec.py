"""`StorageNetworkSpec`: what storage a cluster buys and how its nodes reach it (`topology.storage` bills it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fabricsim.catalog import DEFAULT_STORAGE_TIER

StorageNetworkKind = Literal["separate", "converged"]
STORAGE_NETWORKS: tuple[str, ...] = ("separate", "converged")
DEFAULT_STORAGE_SERVER = "clusterstor-e1000"


class StorageNetworkSpec(BaseModel):
    """What storage to buy and how to reach it: the tier its rates must meet (or a server count), the server model
    and a separate or converged network."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    network: StorageNetworkKind = Field("separate", description="separate storage fabric, or converged on the "
                                        "compute fabric")
    tier: str = Field(DEFAULT_STORAGE_TIER, description="catalog storage tier the servers are sized to")
    server: str = Field(DEFAULT_STORAGE_SERVER, description="catalog storage server id")
    servers: int | None = Field(None, ge=1, description="server count; None: the fewest that meet the target")
    write_bytes_per_s: float | None = Field(None, gt=0, allow_inf_nan=False,
                                            description="aggregate write target instead of the tier's (reads "
                                                        "scale with it)")
    scale: float = Field(1.0, gt=0, allow_inf_nan=False, description="the target's rates x this")
    switch: str | None = Field(None, description="separate: storage switch id or link; None: the compute "
                               "fabric's switch")
    node_cable: Literal["optical", "copper"] = Field("optical", description="cables from nodes and servers to "
                                                     "their leaves")
    converge_without_ports: bool = Field(False, description="separate by default, not asked for: a system without "
                                         "storage ports (a catalog entry written before storage_nic and "
                                         "storage_ports) converges on the compute fabric, with a note")
