"""A networked KV-cache tier: servers on the scale-out fabric (NVIDIA's BlueField-4 inference context memory
storage, an LMCache server, a shared in-memory KV store) that hold shared prefixes' KV, so a serving GPU reads a
prefix's KV over its NICs instead of computing the prefill of those tokens again.

Loading one request's share of the tier (``InferencePlan.network_prompt_tokens``) costs, on every GPU of the
request's group, its bytes (tokens x the GPU's KV bytes a token) over the slower of the GPU's share of its
scale-out NIC rate x the fabric link's efficiency and the tier's per-GPU share of its servers' read rate (each
server's read rate or its ports, whichever is lower, over the serving GPUs), plus the server's latency to the first
byte (catalog ``storage_servers.kv_latency_s``). Engines that load from such a tier (LMCache, Dynamo's KV block
manager) do it to save the prefill; the model takes, per plan, the faster of loading and recomputing those tokens
(``predict_inference``), so the tier never makes TTFT worse than not having it.

The tier holds the whole model's KV of a token once (every layer, every KV head, not a copy per tensor-parallel
rank): its capacity in tokens is the servers' capacity over that, and the prefixes it holds that over the tokens a
request finds there.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import floor

from fabricsim.catalog import StorageServer
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.model import ModelSpec, kv_bytes_per_token_model

DEFAULT_KV_SERVER = "icms-bf4-flash"
"""The KV tier server ``--kv-server`` names by default (catalog ``storage_servers``)."""
KV_TIERS = ("none", "network")


@dataclass(frozen=True)
class NetworkKvTier:
    """The networked KV tier of a deployment: ``servers`` of ``server``, whose read rate ``gpus`` serving GPUs
    share."""

    server: StorageServer
    servers: int
    gpus: int

    def __post_init__(self) -> None:
        if self.server.kv_latency_s is None:
            raise SpecError(f"storage server {self.server.id!r} is not described as a KV tier (no kv_latency_s); "
                            "pick one that is (fabricsim catalog storage-servers: a KV tier latency)",
                            field="--kv-server")
        if self.servers < self.server.min_servers:
            raise SpecError(f"{self.server.id} is sold from {self.server.min_servers} servers, got {self.servers}",
                            field="--kv-servers")
        if self.gpus < 1:
            raise SpecError(f"the tier serves at least 1 GPU, got {self.gpus}", field="--kv-servers")

    @property
    def latency_s(self) -> float:
        """Seconds to a load's first byte (the server's ``kv_latency_s``)."""
        assert self.server.kv_latency_s is not None
        return float(self.server.kv_latency_s)

    @property
    def read_bytes_per_s(self) -> float:
        """What the servers deliver together: each its read rate or its ports' rate, whichever is lower."""
        s = self.server
        return self.servers * min(s.read_bytes_per_s, s.ports * s.port_bytes_per_s)

    @property
    def read_bytes_per_s_per_gpu(self) -> float:
        """The tier's read rate over the GPUs it serves (all of them loading at once)."""
        return self.read_bytes_per_s / self.gpus

    @property
    def capacity_bytes(self) -> float:
        return self.servers * float(self.server.capacity_bytes)

    def capacity_tokens(self, model: ModelSpec, kv: str) -> int:
        """Tokens of this model's KV (whole model, in the ``kv`` format) the tier holds."""
        return floor(self.capacity_bytes / kv_bytes_per_token_model(model, kv))

    def to_json(self) -> dict[str, object]:
        return {"server": self.server.id, "servers": self.servers, "gpus_served": self.gpus,
                "read_bytes_per_s": self.read_bytes_per_s, "read_bytes_per_s_per_gpu": self.read_bytes_per_s_per_gpu,
                "capacity_bytes": self.capacity_bytes, "latency_s": self.latency_s,
                "price_usd": None if self.server.price_usd is None else self.servers * self.server.price_usd,
                "power_w": None if self.server.power_w is None else self.servers * self.server.power_w}


def network_kv_tier(cluster: Cluster, server: str | None, servers: int | None, gpus: int) -> NetworkKvTier:
    """The tier ``--kv-server``/``--kv-servers`` describe (default: ``DEFAULT_KV_SERVER``, its fewest servers)."""
    entry = _named(cluster, server or DEFAULT_KV_SERVER)
    return NetworkKvTier(entry, entry.min_servers if servers is None else servers, gpus)


def _named(cluster: Cluster, server: str) -> StorageServer:
    try:
        return cluster.catalog.storage_server(server)
    except SpecError as exc:
        raise SpecError(exc.message, field="--kv-server") from None


def gpu_fabric_bytes_per_s(cluster: Cluster) -> float:
    """One GPU's share of its node's scale-out NIC rate (each port at the slower of the NIC and the fabric link),
    at the fabric link's achievable fraction."""
    system, link = cluster.system, cluster.link
    nic = cluster.catalog.nic(system.nic)
    node = system.nics_per_node * nic.ports * min(nic.port_bytes_per_s, link.bytes_per_s)
    return float(node / system.gpus_per_node * link.efficiency)


def fabric_layer(cluster: Cluster) -> str:
    """The breakdown's layer a tier load is counted in: the scale-out network's kind."""
    return "ethernet" if cluster.link.kind == "ethernet" else "infiniband"


def load_bytes_per_s(cluster: Cluster, tier: NetworkKvTier) -> float:
    """The rate one GPU loads tier KV at: min(its NIC share x efficiency, the tier's per-GPU read share)."""
    return min(gpu_fabric_bytes_per_s(cluster), tier.read_bytes_per_s_per_gpu)


def load_s(bytes_per_gpu: float, cluster: Cluster, tier: NetworkKvTier) -> float:
    """Seconds to load ``bytes_per_gpu`` onto every GPU of a group from the tier (0 for none)."""
    if bytes_per_gpu <= 0:
        return 0.0
    return tier.latency_s + bytes_per_gpu / load_bytes_per_s(cluster, tier)
