"""`size --inference --kv-tier network`: a networked KV-cache tier beside every serving plan searched.

Per replica plan, as `infer` does: a request finds ``prefix_network`` of its prompt in the tier; the engine loads
it where that is faster than computing it (the static prediction of one request, ``predict_inference``), so the
screen prefills only the rest of the prompt and each request waits its load before it runs; else the tier is not
used and the plan is priced as without it. The search sizes the tier rather than taking every GPU loading at once:
servers = the most of ``--kv-servers`` (default the server's fewest sold), the servers the offered rate's load bytes
need (rate x bytes a request / a server's read rate, at the search's target utilisation) and the servers the
tier's share of one prompt needs to fit; a load then runs at the GPU's NIC share. The tier's servers are priced into
the cluster: their capex amortised as the cluster's, their power at the facility's PUE and energy price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.inference import (
    InferencePlan,
    NetworkKvTier,
    gpu_fabric_bytes_per_s,
    kv_bytes_per_token_gpu,
    network_kv_tier,
    predict_inference,
)
from fabricsim.model import ModelSpec, kv_bytes_per_token_model
from fabricsim.serving import RequestTrace
from fabricsim.sizing.inference.spec import InferenceSizingSpec


@dataclass(frozen=True)
class TierPlan:
    """The tier beside one replica plan: whether the engine loads (``chosen``), the tokens a request finds there,
    a request's load seconds and seconds a token, the servers bought, their capex and power."""

    chosen: str
    tokens: int
    load_s: float
    load_s_per_token: float
    latency_s: float
    servers: int
    capex_usd: float
    power_w: float
    fabric_bytes_per_s: float

    def row(self) -> dict[str, object]:
        """The screen row's tier columns."""
        return {"kv_tier_chosen": self.chosen, "kv_tier_tokens": self.tokens, "kv_tier_load_s": self.load_s,
                "kv_tier_load_s_per_token": self.load_s_per_token, "kv_tier_latency_s": self.latency_s,
                "kv_tier_servers": self.servers, "kv_tier_capex_usd": self.capex_usd,
                "kv_tier_power_w": self.power_w, "kv_tier_fabric_bytes_per_s": self.fabric_bytes_per_s}


def check_tier_spec(spec: InferenceSizingSpec) -> None:
    """The tier's options make sense together (the flag each error names is the one the user typed)."""
    if spec.kv_tier == "none":
        for flag, value in (("--prefix-network", spec.prefix_network or None), ("--kv-server", spec.kv_server),
                            ("--kv-servers", spec.kv_servers)):
            if value is not None:
                raise SpecError("describes a networked KV tier: add --kv-tier network", field=flag)
        return
    if spec.disagg:
        raise SpecError("a networked KV tier beside disaggregated pools is not modelled; drop --disagg or "
                        "--kv-tier network", field="--kv-tier")


def tier_plan(spec: InferenceSizingSpec, model: ModelSpec, plan: InferencePlan, cluster: Cluster
              ) -> TierPlan | None:
    """The tier beside a replica plan (None without ``--kv-tier network``)."""
    if spec.kv_tier == "none":
        return None
    nic = gpu_fabric_bytes_per_s(cluster)
    probe = network_kv_tier(cluster, spec.kv_server, spec.kv_servers, 1)
    server = probe.server
    per_server = min(server.read_bytes_per_s, server.ports * server.port_bytes_per_s)
    # one GPU's view of a tier sized for the offered bytes: its loads run at the GPU's NIC share
    view = NetworkKvTier(server, max(probe.servers, math.ceil(nic / per_server)), 1)
    tiered = replace(plan, prefix_network=spec.prefix_network)
    use = predict_inference(model, cluster, tiered, view).network_tier
    assert use is not None
    tokens = tiered.network_prompt_tokens
    per_token_gpu = kv_bytes_per_token_gpu(model, tiered)
    loads = use.chosen == "load"
    rate = spec.rate_per_s * tokens * per_token_gpu * plan.tp * plan.pp if loads else 0.0
    fit = math.ceil(tokens * kv_bytes_per_token_model(model, plan.kv) / float(server.capacity_bytes))
    servers = max(probe.servers, fit, math.ceil(rate / (per_server * spec.target_utilization)))
    price = math.nan if server.price_usd is None else float(server.price_usd)  # NaN: the cost says not known
    power = math.nan if server.power_w is None else float(server.power_w)
    seconds_per_token = per_token_gpu / nic
    return TierPlan(use.chosen, tokens, use.load_s if loads else 0.0, seconds_per_token, probe.latency_s, servers,
                    servers * price, servers * power, rate)


def with_tier(trace: RequestTrace, spec: InferenceSizingSpec, tier: TierPlan | None) -> RequestTrace:
    """The simulated requests with the tier's share cached and loaded, where the engine loads it."""
    if tier is None or tier.chosen != "load" or not spec.prefix_network:
        return trace
    return trace.with_network_hit(spec.prefix_network, tier.load_s_per_token, tier.latency_s)
