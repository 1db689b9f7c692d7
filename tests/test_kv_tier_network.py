"""A networked KV-cache tier (issue 47, item 4): servers on the scale-out fabric hold shared prefixes' KV; a serving
GPU loads its share over its NICs (or the tier's per-GPU read share) where that beats computing it. Never worse than
recomputation: unused, TTFT is exactly the recompute TTFT; used, never above it (the engine takes the faster)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.catalog import default_catalog
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
from fabricsim.model import load_model
from fabricsim.serving.requests import RequestTrace

CATALOG = default_catalog()
MODELS = ["llama3-8b", "llama3-70b", "mixtral-8x7b"]


def _cluster(system: str = "dgx-h100", fabric: str | None = None) -> Cluster:
    return Cluster(CATALOG.system(system), fabric=fabric, catalog=CATALOG)


def _tier(cluster: Cluster, server: str = "icms-bf4-flash", servers: int = 1, gpus: int = 8) -> NetworkKvTier:
    return network_kv_tier(cluster, server, servers, gpus)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from([1, 2, 4, 8]), st.sampled_from(["vllm", "sglang", "trtllm"]),
       st.sampled_from([1, 4]), st.sampled_from([512, 4096, 32768]), st.floats(0.0, 0.5),
       st.sampled_from(["icms-bf4-flash", "kv-dram-2x400g"]), st.integers(1, 64))
def test_an_unused_tier_gives_exactly_the_recompute_ttft(name: str, tp: int, engine: str, batch: int, prompt: int,
                                                         hit: float, server: str, gpus: int) -> None:
    """--kv-tier network with no share of the prompt in it: every figure is the plan's without a tier."""
    model, cluster = load_model(name), _cluster()
    plan = InferencePlan(tp=tp, batch=batch, prompt_tokens=prompt, output_tokens=32, weights="fp8", engine=engine,
                         prefix_hit=hit)
    bare = predict_inference(model, cluster, plan)
    tiered = predict_inference(model, cluster, plan, _tier(cluster, server, 1, gpus))
    assert tiered.ttft_s == bare.ttft_s
    assert tiered.prefill_s == bare.prefill_s and tiered.e2e_s == bare.e2e_s
    assert tiered.network_tier is not None and tiered.network_tier.chosen == "none"
    assert tiered.network_tier.ttft_recompute_s == bare.ttft_s


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from([1, 2, 4, 8]), st.sampled_from(["vllm", "sglang", "trtllm"]),
       st.sampled_from([1, 8, 64]), st.sampled_from([256, 4096, 32768]), st.floats(0.0, 0.4), st.floats(0.0, 0.6),
       st.sampled_from(["icms-bf4-flash", "kv-dram-2x400g"]), st.integers(1, 4), st.integers(1, 4096),
       st.sampled_from([None, "eth-400g", "hdr"]))
def test_tier_hits_never_make_ttft_worse_than_recomputing_them(name: str, tp: int, engine: str, batch: int,
                                                               prompt: int, hit: float, network: float, server: str,
                                                               servers: int, gpus: int, fabric: str | None) -> None:
    """The engine loads the tier's share only where that is faster: TTFT with any hit is at most the TTFT of the same
    plan recomputing those tokens, and equal to it where the engine recomputes (a slow tier, many GPUs sharing it)."""
    model, cluster = load_model(name), _cluster(fabric=fabric)
    plan = InferencePlan(tp=tp, batch=batch, prompt_tokens=prompt, output_tokens=32, weights="fp8", engine=engine,
                         prefix_hit=hit, prefix_network=network)
    recompute = predict_inference(model, cluster, replace(plan, prefix_network=0.0))
    tiered = predict_inference(model, cluster, plan, _tier(cluster, server, servers, gpus))
    use = tiered.network_tier
    assert use is not None
    assert tiered.ttft_s <= recompute.ttft_s * (1 + 1e-12)
    assert use.ttft_recompute_s == pytest.approx(recompute.ttft_s, rel=1e-12)
    if use.chosen == "recompute":
        assert tiered.ttft_s == recompute.ttft_s
    if use.chosen == "load":
        assert use.ttft_load_s <= use.ttft_recompute_s


def test_a_load_is_its_bytes_over_the_slower_of_the_nic_share_and_the_tiers_share_plus_the_latency() -> None:
    model, cluster = load_model("llama3-70b"), _cluster()
    plan = InferencePlan(tp=8, prompt_tokens=32768, output_tokens=64, engine="vllm", prefix_network=0.5)
    nic = gpu_fabric_bytes_per_s(cluster)  # 8 x 400 Gb/s NDR over 8 GPUs x the link's efficiency
    assert 40e9 < nic <= 50e9
    tokens = plan.network_prompt_tokens
    assert tokens == 16384
    for servers, rate in ((1, 100e9 / 8), (8, nic)):  # one server: its 100 GB/s over 8 GPUs; eight: the NICs bound
        use = predict_inference(model, cluster, plan, _tier(cluster, servers=servers)).network_tier
        assert use is not None and use.chosen == "load"
        assert use.load_s == pytest.approx(200e-6 + tokens * kv_bytes_per_token_gpu(model, plan) / rate)


def test_a_tier_shared_by_enough_gpus_is_not_used() -> None:
    """A small model's prefill is cheap; a tier whose read rate thousands of GPUs share loads slower than the GPU
    computes: the engine recomputes and TTFT is the plan's without a tier."""
    model, cluster = load_model("llama3-8b"), _cluster()
    plan = InferencePlan(tp=1, prompt_tokens=2048, output_tokens=64, weights="fp8", engine="vllm",
                         prefix_network=0.5)
    use = predict_inference(model, cluster, plan, _tier(cluster, "kv-dram-2x400g", 1, 100_000)).network_tier
    assert use is not None and use.chosen == "recompute"


def test_the_prefix_shares_stay_one_prompt_and_the_tier_needs_a_prefix_cache() -> None:
    with pytest.raises(SpecError, match="more than the whole prompt") as err:
        InferencePlan(prefix_hit=0.5, prefix_host=0.3, prefix_network=0.4, engine="vllm")
    assert err.value.field == "--prefix-network"
    plan = InferencePlan(prefix_hit=0.25, prefix_host=0.25, prefix_network=0.5, prompt_tokens=1000, engine="vllm")
    assert (plan.host_prompt_tokens, plan.network_prompt_tokens, plan.cached_prompt_tokens) == (250, 499, 999)
    same = InferencePlan(prefix_hit=0.25, prefix_host=0.25, prompt_tokens=1000, engine="vllm")
    assert same.host_prompt_tokens == plan.host_prompt_tokens  # --prefix-host exactly as before
    with pytest.raises(SpecError) as err:
        predict_inference(load_model("llama3-8b"), _cluster(), plan)
    assert err.value.field == "--prefix-network"


def test_a_server_without_a_kv_latency_is_refused_and_min_servers_hold() -> None:
    with pytest.raises(SpecError, match="not described as a KV tier") as err:
        _tier(_cluster(), "clusterstor-e1000")
    assert err.value.field == "--kv-server"
    with pytest.raises(SpecError) as err:
        _tier(_cluster(), "no-such-server")
    assert err.value.field == "--kv-server"


def test_served_requests_wait_for_their_network_tier_prefix_after_any_host_load() -> None:
    n = 4
    trace = RequestTrace(np.arange(n) * 0.1, np.full(n, 1000, dtype=np.int64), np.full(n, 8, dtype=np.int64), 1.0)
    host = trace.with_host_hit(0.2, 1e-6)
    both = host.with_network_hit(0.5, 2e-6, 1e-3)
    assert both.cached.tolist() == [700] * n
    assert both.load_s is not None and host.load_s is not None
    assert np.allclose(both.load_s, host.load_s + 1e-3 + 500 * 2e-6)
    none = trace.with_network_hit(0.0, 2e-6, 1e-3)
    assert none.load_s is not None and not none.load_s.any()  # no tokens in the tier: no latency either


def _infer(*args: str) -> dict[str, object]:
    from typer.testing import CliRunner

    from fabricsim.cli import app

    out = CliRunner().invoke(app, ["infer", *args, "--json"])
    assert out.exit_code == 0, out.output
    data: dict[str, object] = json.loads(out.stdout)
    return data


def test_infer_reports_the_tier_and_its_fabric_traffic_at_the_offered_rate() -> None:
    args = ("--model", "llama3-70b", "--tp", "8", "--prompt", "8192", "--output", "64", "--engine", "vllm",
            "--kv-tier", "network", "--prefix-network", "0.75", "--kv-servers", "2")
    data = _infer(*args, "--rate", "2", "--duration", "30s")
    tier = data["kv_tier"]
    assert isinstance(tier, dict)
    assert tier["server"] == "icms-bf4-flash" and tier["servers"] == 2 and tier["chosen"] == "load"
    assert tier["ttft_s"] == data["ttft_s"] < tier["ttft_without_tier_s"]
    per_request = 6144 * 327680.0  # llama3-70b: 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes a token
    assert tier["load_bytes_per_request"] == pytest.approx(per_request)
    arrived = data["requests_arrived"]
    assert isinstance(arrived, int)
    assert tier["fabric_bytes_per_s"] == pytest.approx(arrived * per_request / 30.0)
    assert tier["capacity_tokens"] == int(2 * 983e12 // 327680)
    bare = _infer(*args[:10])
    assert "kv_tier" not in bare and bare["ttft_s"] == tier["ttft_without_tier_s"]


def test_a_hit_beyond_the_tiers_capacity_is_refused_naming_the_servers(tmp_path: Path) -> None:
    """Refused, not capped: a capped hit would answer another question than the one asked."""
    from typer.testing import CliRunner

    from fabricsim.cli import app

    overlay = tmp_path / "small.yaml"
    overlay.write_text('schema: "0.7"\nstorage_servers:\n  - {id: kv-dram-2x400g, capacity_bytes: 1GB}\n')
    out = CliRunner().invoke(app, ["infer", "--model", "llama3-70b", "--tp", "8", "--prompt", "16384", "--engine",
                                   "vllm", "--kv-tier", "network", "--kv-server", "kv-dram-2x400g",
                                   "--prefix-network", "0.5", "--calibration", str(overlay)])
    assert out.exit_code == 2
    assert "--kv-servers" in out.output and "--prefix-network at most" in out.output


KV_JOBS = ("storage_nodes: 2\njobs:\n"
           "  - {name: train, gpus: 64, placement: scattered, pattern: all_to_all, bytes: 256M}\n"
           "  - {name: serve, gpus: 32, pattern: kv_tier, bytes: 64M, every: 2ms, loads: 10}\n")


def _traffic(tmp_path: Path, text: str, *args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from fabricsim.cli import app

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(text)
    out = CliRunner().invoke(app, ["traffic", "--system", "dgx-h100", "--nodes", "16", "--no-rail-optimized",
                                   "--oversubscription", "4", "--jobs", str(jobs), *args])
    return out.exit_code, out.output


def test_kv_tier_loads_show_in_traffic_beside_training(tmp_path: Path) -> None:
    """The serving job's loads come from the storage nodes (the tier) to its GPUs, each load released on time; on an
    oversubscribed fabric they share the leaf uplinks with a scattered training job, which slows down."""
    code, text = _traffic(tmp_path, KV_JOBS, "--json")
    assert code == 0, text
    jobs = {j["name"]: j for j in json.loads(text)["jobs"]}
    serve, train = jobs["serve"], jobs["train"]
    assert serve["gpus"] == 32 and serve["flows"] == 32 * 10
    assert serve["completion_time_s"] >= 9 * 2e-3  # the last load is released 18 ms after the first
    assert train["slowdown"] > 1.0 and serve["slowdown"] > 1.0


def test_a_kv_tier_job_needs_the_tiers_nodes_and_its_timing_keys_only_on_it(tmp_path: Path) -> None:
    code, text = _traffic(tmp_path, KV_JOBS.replace("storage_nodes: 2", "storage_nodes: 0"))
    assert code == 2 and "storage_nodes" in text
    code, text = _traffic(tmp_path, "jobs:\n  - {gpus: 8, pattern: ring, bytes: 1M, every: 1ms}\n")
    assert code == 2 and "jobs[0].every" in text
    code, text = _traffic(tmp_path, "storage_nodes: 1\njobs:\n  - {gpus: 8, pattern: kv_tier, bytes: 1M, loads: 3}\n")
    assert code == 2 and "jobs[0].every" in text


SIZE = ("size", "--inference", "--model", "llama3-70b", "--rate", "2", "--slo-ttft", "1s", "--slo-tpot", "50ms",
        "--prompt", "16384", "--output", "128", "--systems", "dgx-h100", "--engine", "vllm", "--json")


def _size(*args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from fabricsim.cli import app

    out = CliRunner().invoke(app, [*SIZE, *args])
    return out.exit_code, out.output


def test_size_inference_prices_the_tiers_servers_into_the_cluster() -> None:
    """With the tier, a 16k-token prompt's TTFT SLO is met on fewer GPUs; the tier's servers are in the capex."""
    code, text = _size("--kv-tier", "network", "--prefix-network", "0.75", "--kv-server", "kv-dram-2x400g")
    assert code == 0, text
    best = json.loads(text)["results"][0]
    tier = best["kv_tier"]
    assert tier["server"] == "kv-dram-2x400g" and tier["chosen"] == "load" and tier["servers"] >= 1
    assert tier["capex_usd"] == tier["servers"] * 30000.0
    assert best["capex_usd"] > tier["capex_usd"]
    code, text = _size()
    assert code == 0, text
    bare = json.loads(text)["results"][0]
    assert "kv_tier" not in bare
    assert best["gpus"] < bare["gpus"]
    assert best["usd_per_million_output_tokens"] < bare["usd_per_million_output_tokens"]


def test_the_tier_options_are_refused_where_they_mean_nothing() -> None:
    code, text = _size("--prefix-network", "0.5")
    assert code == 2 and "--prefix-network" in text and "--kv-tier network" in text
    code, text = _size("--kv-tier", "network", "--disagg")
    assert code == 2 and "--kv-tier" in text
    from typer.testing import CliRunner

    from fabricsim.cli import app

    out = CliRunner().invoke(app, ["size", "--model", "llama3-70b", "--kv-tier", "network"])
    assert out.exit_code == 2 and "add --inference" in out.output
