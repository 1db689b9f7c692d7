"""Catalog entries for goodput: component interruption rates (a job's failure rate follows from its bill of
materials), storage tiers (how fast checkpoints must be written and read) and the storage servers that deliver
them (what the storage network bills), each with its source."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fabricsim.catalog.models import Entry, Priced
from fabricsim.catalog.quantities import Bytes, BytesPerS, Seconds

FailureUnit = Literal["gpu", "cpu", "node", "nic", "cable", "job"]
"""What a failure rate counts per: each GPU, CPU socket, node, NIC or fabric cable of the job, or the job itself"""


class FailureRate(Entry):
    """Interruptions of a training job per hour per unit of one component kind (any failure restarts the job)."""

    per: FailureUnit
    rate_per_hour: float = Field(ge=0, allow_inf_nan=False, description="job interruptions per unit-hour")
    planned: bool = Field(False, description="planned (maintenance): the job checkpoints first, so no work is lost")
    replaces_node: bool = Field(False, description="the failed part takes its node out until repaired: the job "
                                "restarts on a spare node, or waits for the repair")


DEFAULT_STORAGE_TIER = "superpod-better"
"""The storage tier checkpoints go to when none is named (the catalog's sourced DGX SuperPOD "better" tier)."""


class StorageTier(Priced):
    """A shared storage system sized in scalable units of GPUs: the aggregate read and write rates it sustains per
    unit, and per GPU served (a node's figure over its GPUs: rack-scale systems count by GPU, not by node)."""

    unit_gpus: int = Field(ge=1, description="GPUs one storage unit serves")
    read_bytes_per_s: BytesPerS = Field(description="aggregate read rate per unit")
    write_bytes_per_s: BytesPerS = Field(description="aggregate write rate per unit")
    gpu_read_bytes_per_s: BytesPerS = Field(description="read rate per GPU served")
    gpu_write_bytes_per_s: BytesPerS = Field(description="write rate per GPU served")


class StorageServer(Priced):
    """A storage server or appliance of a shared parallel file system, or a server of a networked KV-cache tier (one
    with ``kv_latency_s``): its sustained read and write rates, usable capacity and network ports (price and power
    per server, as the bill of materials counts them)."""

    read_bytes_per_s: BytesPerS = Field(description="sustained read rate of one server")
    write_bytes_per_s: BytesPerS = Field(description="sustained write rate of one server")
    capacity_bytes: Bytes = Field(description="usable capacity of one server")
    ports: int = Field(ge=1, description="network ports of one server")
    port_bytes_per_s: BytesPerS = Field(description="rate of each port")
    rack_units: int | None = Field(None, ge=1)
    min_servers: int = Field(1, ge=1, description="smallest cluster of servers the vendor sells")
    kv_latency_s: Seconds | None = Field(None, description="a networked KV-cache tier server: seconds from a serving "
                                         "GPU's request for a prefix's KV to its first byte (lookup, media read, "
                                         "one RDMA round trip); None: not described as a KV tier (`infer --kv-tier "
                                         "network` refuses it)")
