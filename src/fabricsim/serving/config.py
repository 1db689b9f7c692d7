"""Serving inputs: the step-cost protocol a model prices iterations with, the vLLM scheduler knobs and their
defaults, and the replica layout; kept apart so callers can build them without the simulator (``discrete_event``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from fabricsim.catalog import GPU
from fabricsim.errors import SpecError
from fabricsim.inference import EngineProfile

# vLLM EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py): max_num_seqs 256 on GPUs under 70 GiB (and vLLM
# V0's SchedulerConfig default); max_num_batched_tokens 8192 for the OpenAI server on >= 70 GiB GPUs (H100, H200).
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_BLOCK_SIZE_TOKENS = 16  # vLLM CacheConfig.block_size default on CUDA (PagedAttention block)

Routing = Literal["round_robin", "shortest_queue"]
Policy = Literal["mixed", "prefill_first"]
Admission = Literal["on_demand", "reserve_full"]


class StepCost(Protocol):
    """Time of one scheduler iteration of one replica, and of moving a request's KV cache between replicas."""

    @property
    def kv_capacity_tokens(self) -> int:
        """KV-cache tokens that fit in one replica (a plain attribute satisfies this)."""
        ...

    def step_s(self, prefill_tokens: int, prefill_attn_pairs: float, decode_seqs: int,
               decode_kv_tokens: int) -> float:
        """Seconds for one iteration: prefill chunks (tokens, sum of chunk*(past+chunk/2)) and decodes (seqs, KV)."""
        ...

    def kv_transfer_s(self, tokens: int, same_node: bool) -> float:
        """Seconds to move one request's KV cache (tokens) from a prefill to a decode replica."""
        ...


@dataclass(frozen=True)
class SchedulerConfig:
    """Scheduler knobs: sequences and tokens per iteration, chunked prefill, KV block size (tokens); how an
    iteration is built (``mixed``: decodes and prompt chunks together, as vLLM V1 and TensorRT-LLM; ``prefill_first``:
    prompts alone whenever one can be admitted, as vLLM V0 and SGLang) and how KV is promised (``on_demand`` with
    preemption by recompute, or ``reserve_full``: a request is admitted only when its prompt and whole output fit,
    TensorRT-LLM's GUARANTEED_NO_EVICT, and nothing is ever preempted). ``prefix_cache``: freed KV blocks stay
    cached until reused, oldest freed first (vLLM V1's free-block queue, SGLang's radix cache), so a preempted request
    readmitted before its blocks are reused recomputes only the part evicted."""

    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    chunked_prefill: bool = True
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS
    policy: Policy = "mixed"
    admission: Admission = "on_demand"
    prefix_cache: bool = False

    def __post_init__(self) -> None:
        if self.policy not in ("mixed", "prefill_first"):
            raise SpecError(f"unknown policy {self.policy!r}; allowed: mixed, prefill_first", field="policy")
        if self.admission not in ("on_demand", "reserve_full"):
            raise SpecError(f"unknown admission {self.admission!r}; allowed: on_demand, reserve_full",
                            field="admission")
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(f"must be an integer >= 1, got {value!r}", field=name)
        if self.max_num_batched_tokens < self.max_num_seqs:  # vLLM refuses this too: decodes must fit the budget
            raise SpecError(f"must be >= max_num_seqs ({self.max_num_seqs}), got {self.max_num_batched_tokens}",
                            field="max_num_batched_tokens")


def engine_scheduler_config(profile: EngineProfile, gpu: GPU, *, max_seqs: int | None = None,
                            max_batched_tokens: int | None = None, chunked_prefill: bool | None = None,
                            longest_request_tokens: int = 1) -> SchedulerConfig:
    """The scheduler as ``profile``'s engine runs it on ``gpu`` (its policy, admission, batch, prompt tokens per
    iteration and chunking), any knob given replacing the engine's. The budget is at least the batch; when it is
    the engine's and prompts run whole, at least the longest request too (vLLM V0 sizes it to max_model_len)."""
    seqs = profile.max_batch(gpu) if max_seqs is None else max_seqs
    chunked = profile.scheduler.chunked_prefill if chunked_prefill is None else chunked_prefill
    budget = profile.max_batched_tokens(gpu) if max_batched_tokens is None else max_batched_tokens
    if max_batched_tokens is None and not chunked:
        budget = max(budget, longest_request_tokens)
    return SchedulerConfig(max_num_seqs=seqs, max_num_batched_tokens=max(budget, seqs), chunked_prefill=chunked,
                           policy=profile.scheduler.policy, admission=profile.scheduler.admission,
                           prefix_cache=profile.scheduler.prefix_cache)


@dataclass(frozen=True)
class ServingLayout:
    """Replicas: N co-located data-parallel ones, or P prefill + D decode (disaggregated) with a KV link."""

    replicas: int = 1
    routing: Routing = "round_robin"
    disagg: tuple[int, int] | None = None
    kv_same_node: bool = True  # disagg: pools share a node / NVLink domain (else KV crosses the scale-out network)

    def __post_init__(self) -> None:
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int) or self.replicas < 1:
            raise SpecError(f"must be an integer >= 1, got {self.replicas!r}", field="replicas")
        if self.routing not in ("round_robin", "shortest_queue"):
            raise SpecError(f"unknown routing {self.routing!r}; allowed: round_robin, shortest_queue",
                            field="routing")
        if self.disagg is not None:
            if len(self.disagg) != 2 or any(isinstance(k, bool) or not isinstance(k, int) or k < 1
                                            for k in self.disagg):
                raise SpecError(f"must be (prefill replicas, decode replicas), each >= 1, got {self.disagg!r}",
                                field="disagg")
            if self.replicas != 1:
                raise SpecError("give replicas or disagg, not both", field="replicas")

