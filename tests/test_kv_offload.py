"""A host-memory KV tier (issue 23, item 5): a prefix found in the engine's host tier (vLLM's offloading connector,
SGLang's HiCache, TensorRT-LLM's host cache) is copied back over the GPU's host link instead of computed; the batch
that fits on the GPU does not change."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.catalog import default_catalog
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.inference import InferencePlan, host_link_bytes_per_s, max_batch, predict_inference
from fabricsim.model import load_model
from fabricsim.serving import SchedulerConfig, simulate_serving
from fabricsim.serving.requests import RequestTrace

CATALOG = default_catalog()


def _cluster(system: str) -> Cluster:
    return Cluster(CATALOG.system(system), catalog=CATALOG)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["llama3-8b", "llama3-70b", "mixtral-8x7b"]), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from(["vllm", "sglang", "trtllm"]), st.floats(0.0, 0.9), st.sampled_from([512, 4096, 16384]))
def test_a_host_tier_never_lowers_the_batch_that_fits_nor_raises_ttft(name: str, tp: int, engine: str, host: float,
                                                                     prompt: int) -> None:
    model = load_model(name)
    gpu = CATALOG.gpu("h100-sxm")
    base = InferencePlan(tp=tp, prompt_tokens=prompt, output_tokens=64, weights="fp8", engine=engine)
    offload = InferencePlan(tp=tp, prompt_tokens=prompt, output_tokens=64, weights="fp8", engine=engine,
                            prefix_host=host)
    assert max_batch(model, offload, gpu) == max_batch(model, base, gpu)
    cluster = _cluster("dgx-h100")
    cold, warm = predict_inference(model, cluster, base), predict_inference(model, cluster, offload)
    on_gpu = predict_inference(model, cluster, InferencePlan(tp=tp, prompt_tokens=prompt, output_tokens=64,
                                                             weights="fp8", engine=engine, prefix_hit=host))
    assert on_gpu.ttft_s <= warm.ttft_s <= cold.ttft_s  # a copy costs more than a GPU hit, less than recompute


def test_grace_loads_its_host_tier_over_nvlink_c2c() -> None:
    """GB200's NVLink-C2C (450 GB/s a direction) copies the host tier back ~9x faster than PCIe Gen5 x16."""
    c2c, pcie = host_link_bytes_per_s(_cluster("gb200-nvl72")), host_link_bytes_per_s(_cluster("dgx-b200"))
    assert c2c > 5 * pcie
    model = load_model("llama3-70b")
    plan = InferencePlan(tp=4, prompt_tokens=8192, output_tokens=64, weights="fp8", prefix_host=0.5)
    loads = [predict_inference(model, _cluster(s), plan).prefill_s["pcie"] for s in ("gb200-nvl72", "dgx-b200")]
    assert 0 < loads[0] < loads[1]


def test_served_requests_wait_for_their_host_tier_prefix() -> None:
    """A request whose prefix comes back from host memory is scheduled once it has arrived: its TTFT carries the
    copy; the others are served in the order they are ready."""
    n = 6
    trace = RequestTrace(np.arange(n) * 0.001, np.full(n, 4000, dtype=np.int64), np.full(n, 8, dtype=np.int64), 0.01)
    warm = trace.with_host_hit(0.5, 1e-5)  # 2000 tokens, 20 ms each
    assert warm.load_s is not None and np.allclose(warm.load_s, 0.02)
    assert np.array_equal(warm.cached, np.full(n, 2000))

    class Cost:
        kv_capacity_tokens = 200_000

        def step_s(self, prefill: int, pairs: float, decodes: int, kv: int) -> float:
            return 0.001 + 1e-6 * prefill

        def kv_transfer_s(self, tokens: int, same_node: bool) -> float:
            return 0.0

    cfg = SchedulerConfig(prefix_cache=True)
    gpu_hit = simulate_serving(Cost(), trace.with_prefix_hit(0.5), scheduler=cfg)
    host_hit = simulate_serving(Cost(), warm, scheduler=cfg)
    assert host_hit.requests_completed == gpu_hit.requests_completed == n
    assert np.all(host_hit.ttft_s >= gpu_hit.ttft_s + 0.02 - 1e-9)


def test_host_hits_need_an_engine_with_a_host_tier_and_room_in_the_prompt() -> None:
    with pytest.raises(SpecError, match="keeps no KV tier in host memory"):
        InferencePlan(engine="vllm@0.8", prefix_host=0.2)
    with pytest.raises(SpecError, match="--prefix-host"):
        InferencePlan(engine="vllm", prefix_hit=0.7, prefix_host=0.5)
    with pytest.raises(SpecError, match="--prefix-host"):
        RequestTrace(np.zeros(1), np.ones(1, dtype=np.int64) * 10, np.ones(1, dtype=np.int64), 0.0).with_host_hit(
            1.5, 1e-6)
