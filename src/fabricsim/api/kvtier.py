"""`infer --kv-tier network`: the networked KV-cache tier's options checked into a tier, the requests served with
its share of every prompt loaded, and what the tier reports (its servers, capacity, bytes and time a request's
load takes, TTFT with and without it, the fabric bandwidth its loads take at the offered rate)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from fabricsim.comm import Cluster
    from fabricsim.inference import InferencePlan, InferencePrediction, NetworkKvTier
    from fabricsim.model import ModelSpec
    from fabricsim.serving import RequestTrace


def kv_tier_of(kind: str, server: str | None, servers: int | None, fraction: float, cluster: Cluster,
               gpus: int) -> NetworkKvTier | None:
    """The tier ``--kv-tier`` names (None for ``none``), shared by ``gpus`` serving GPUs; the tier's own options
    without it are an error naming them."""
    from fabricsim.inference import KV_TIERS, network_kv_tier

    name = kind.strip().lower()
    if name not in KV_TIERS:
        raise SpecError(f"unknown KV tier {kind!r}; choose {' or '.join(KV_TIERS)}", field="--kv-tier")
    if name == "none":
        for flag, value in (("--prefix-network", fraction or None), ("--kv-server", server),
                            ("--kv-servers", servers)):
            if value is not None:
                raise SpecError("describes a networked KV tier: add --kv-tier network", field=flag)
        return None
    return network_kv_tier(cluster, server, servers, gpus)


def check_capacity(tier: NetworkKvTier, model: ModelSpec, plan: InferencePlan) -> None:
    """Refuse a hit fraction whose prefix needs more KV than the tier holds (a capped hit would answer another
    question than the one asked): the message says how many servers hold it and the largest fraction that fits."""
    tokens = plan.network_prompt_tokens
    held = tier.capacity_tokens(model, plan.kv)
    if tokens <= held:
        return
    per_server = tier.capacity_tokens(model, plan.kv) / tier.servers
    need = -(-tokens // max(int(per_server), 1))
    raise SpecError(f"a request's {tokens:,} tokens in the tier need {tokens / held:,.1f}x what {tier.servers} x "
                    f"{tier.server.id} hold ({held:,} tokens of {model.name}'s KV in {plan.kv}): use --kv-servers "
                    f"{need} or more, or --prefix-network at most {held / plan.prompt_tokens:.3g}",
                    field="--kv-servers")


def with_network_tier(requests: RequestTrace, model: ModelSpec, cluster: Cluster, plan: InferencePlan,
                      tier: NetworkKvTier, pred: InferencePrediction | None) -> tuple[RequestTrace, float]:
    """The requests with the tier's share of every prompt cached and its load time before each runs, where the
    static prediction found loading faster than computing (the engine's choice, per plan); and the bytes per second
    those loads read from the tier over the whole run (0 where the engine recomputes)."""
    from fabricsim.inference import kv_bytes_per_token_gpu, load_bytes_per_s

    use = None if pred is None else pred.network_tier
    if use is None or use.chosen != "load" or not plan.prefix_network:
        return requests, 0.0
    per_token = kv_bytes_per_token_gpu(model, plan)
    before = requests.cached
    out = requests.with_network_hit(plan.prefix_network, per_token / load_bytes_per_s(cluster, tier),
                                    tier.latency_s)
    loaded = float((out.cached - before).sum()) * per_token * plan.tp * plan.pp
    return out, loaded / requests.duration_s if requests.duration_s > 0 else 0.0


def kv_tier_json(model: ModelSpec, cluster: Cluster, plan: InferencePlan, tier: NetworkKvTier,
                 pred: InferencePrediction, fabric_bytes_per_s: float | None) -> dict[str, Any]:
    """What the tier reports (SI units): the servers, their capacity in bytes, tokens and prefixes of this model,
    the bytes a request loads (all its GPUs, and each), the load's seconds for the static batch, TTFT loading and
    recomputing, which the engine takes, and at an offered rate the fabric bandwidth the loads take."""
    from fabricsim.inference import gpu_fabric_bytes_per_s, kv_bytes_per_token_gpu, load_bytes_per_s

    use = pred.network_tier
    assert use is not None
    per_gpu = use.tokens * kv_bytes_per_token_gpu(model, plan)
    held = tier.capacity_tokens(model, plan.kv)
    out: dict[str, Any] = {
        "tier": "network", **tier.to_json(), "capacity_tokens": held,
        "prefixes_held": held // use.tokens if use.tokens else None,
        "load_bytes_per_request": per_gpu * plan.tp * plan.pp, "load_bytes_per_request_per_gpu": per_gpu,
        "gpu_fabric_bytes_per_s": gpu_fabric_bytes_per_s(cluster),
        "load_bytes_per_s_per_gpu": load_bytes_per_s(cluster, tier), **use.to_json(),
        "ttft_s": pred.ttft_s, "ttft_without_tier_s": use.ttft_recompute_s,
        "fabric_bytes_per_s": fabric_bytes_per_s,
        "fabric_bytes_per_s_per_gpu": None if fabric_bytes_per_s is None else fabric_bytes_per_s / tier.gpus,
        "notes": [],
    }
    if fabric_bytes_per_s is not None and fabric_bytes_per_s > tier.read_bytes_per_s:
        out["notes"].append(f"the offered rate reads {fabric_bytes_per_s / tier.read_bytes_per_s:.2f}x what the "
                            "tier's servers deliver: loads queue behind one another (not modelled); add --kv-servers")
    if use.chosen == "recompute":
        out["notes"].append("loading the tier's share is slower than computing it on these GPUs: the engine "
                            "recomputes, and the tier does not change TTFT")
    return out
