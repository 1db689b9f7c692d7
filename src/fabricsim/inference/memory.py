"""Per-GPU memory of serving a plan: weights in their formats, the KV cache of the batch, the activation workspace,
the largest batch and context that fit, and the HBM floor of a decode step."""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import floor

import numpy as np

from fabricsim.catalog import GPU
from fabricsim.comm import Cluster
from fabricsim.inference.draft import _draft_parts
from fabricsim.inference.experts import touched_experts
from fabricsim.inference.plan import ACT_BYTES, InferencePlan
from fabricsim.inference.stage import _Stage, _stage
from fabricsim.model import ModelSpec, kv_bytes_per_token_layer


@dataclass(frozen=True)
class InferenceMemory:
    """Per-GPU memory of the fullest GPU: weights, KV cache of the batch at full context, activation workspace."""

    weights_bytes: float
    kv_cache_bytes: float
    activations_bytes: float
    capacity_bytes: float
    usable_bytes: float  # weights + activations + the engine's fraction of the memory left for the KV cache

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.activations_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.usable_bytes

    def summary(self) -> str:
        gib = 2.0**30
        split = (f"weights {self.weights_bytes / gib:.1f}, KV cache {self.kv_cache_bytes / gib:.1f}, activations "
                 f"{self.activations_bytes / gib:.1f} GiB")
        if self.fits:
            return f"{self.total_bytes / gib:.1f} GiB per GPU ({split}) of {self.usable_bytes / gib:.1f} GiB usable"
        short = (self.total_bytes - self.usable_bytes) / gib
        return (f"does not fit: needs {self.total_bytes / gib:.1f} GiB per GPU, has {self.usable_bytes / gib:.1f} "
                f"GiB (short by {short:.1f}; {split})")

    def to_json(self) -> dict[str, object]:
        return {"weights_bytes": self.weights_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "activations_bytes": self.activations_bytes, "capacity_bytes": self.capacity_bytes,
                "usable_bytes": self.usable_bytes, "total_bytes": self.total_bytes, "summary": self.summary()}


def weight_bytes_per_gpu(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> float:
    """Weights on the fullest GPU: its stage's layers in the weight format, the routed experts' share, and the
    embedding and LM head (vocab-parallel, BF16) on the first and last stage; with speculative decoding the MTP
    draft module's layer and eh_proj on the last stage."""
    st = _stage(model, plan, gpu)
    ends = st.embedding_params + st.head_params if plan.pp == 1 else max(st.embedding_params, st.head_params)
    out = _layer_weight_bytes(st) + ends * ACT_BYTES
    if plan.draft_tokens:
        _, _, ds = _draft_parts(model, plan, gpu)
        out += _layer_weight_bytes(ds)
    return out


def _dense_weight_bytes(st: _Stage) -> float:
    """Bytes of a stage's dense GEMM weights on one GPU, each GEMM in its format."""
    return sum(n * k * count * b for (n, k, count), b in zip(st.dense_gemms, st.gemm_bytes, strict=True))


def _layer_weight_bytes(st: _Stage) -> float:
    """Bytes of a stage's layer weights on one GPU: each dense GEMM in its format, the routed experts' share in the
    plan's, the routers in BF16."""
    experts = st.moe_layers * st.experts * st.expert_share_params * st.weight_bytes
    return _dense_weight_bytes(st) + experts + st.moe_layers * st.router_params * ACT_BYTES


def activation_bytes_per_gpu(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> float:
    """The engine's activation workspace on ``gpu``: for one prefill chunk of its max batched tokens, the residual,
    QKV, attention output and the widest MLP intermediate (BF16), plus the logits of the batch (FP32). An engine that
    sizes it at start-up (``startup_profile``) keeps the larger of its whole budget's forward pass and its sampler's
    peak over its max sequences, whatever the plan's batch."""
    widest_mlp = max(model.ffn_hidden / plan.tp, (model.moe.top_k if model.moe else 0) * model.expert_ffn_hidden
                     * plan.ep / (plan.tp * plan.dp))
    per_token = (4 * model.hidden + (model.q_dim + model.o_dim) / plan.tp + 2 * widest_mlp) * ACT_BYTES
    chunk = plan.max_batched_tokens(gpu)
    startup = plan.engine_profile.settings.startup_profile
    if startup is not None:  # the sampler's logits are gathered whole on every rank: not divided by tp
        return max(chunk * per_token, startup.sampler_bytes_per_seq_vocab * plan.max_seqs(gpu) * model.vocab)
    logits = plan.batch / plan.dp * model.vocab / plan.tp * 4.0
    return min(chunk, plan.batch * plan.prompt_tokens // plan.dp) * per_token + logits


def inference_memory(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> InferenceMemory:
    weights = weight_bytes_per_gpu(model, plan, gpu)
    st = _stage(model, plan, gpu)
    kv = plan.batch / plan.dp * plan.context * (st.layers + (1 if plan.draft_tokens else 0)) * st.kv_bytes_token_layer
    act = activation_bytes_per_gpu(model, plan, gpu)
    return InferenceMemory(weights, kv, act, gpu.hbm_bytes, plan.engine_profile.kv_usable_bytes(gpu, weights, act,
                                                                                            plan.tp))


def kv_bytes_per_token_gpu(model: ModelSpec, plan: InferencePlan) -> float:
    """KV bytes one token takes on one GPU (its stage's layers, its KV heads; the last stage's MTP draft layer keeps
    its own cache with speculative decoding)."""
    return (model.layers / plan.pp + (1 if plan.draft_tokens else 0)) * kv_bytes_per_token_layer(model, plan.tp,
                                                                                                plan.kv)


def max_batch(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> int:
    """The largest batch (a multiple of dp) whose KV cache at this context fits beside the weights and the
    activation workspace of that batch (its logits grow with it); 0 if none."""
    mem = inference_memory(model, replace(plan, batch=plan.dp), gpu)  # the smallest workspace: one per rank
    free = mem.usable_bytes - mem.weights_bytes - mem.activations_bytes
    per_seq = plan.context * kv_bytes_per_token_gpu(model, plan)
    upper = max(0, floor(free / per_seq)) if free > 0 else 0  # an upper bound (workspace grows with the batch)

    def fits(per_rank: int) -> bool:
        return inference_memory(model, replace(plan, batch=per_rank * plan.dp), gpu).fits

    low, high = 0, upper
    if high and fits(high):
        return high * plan.dp
    while high - low > 1:  # fits() is monotone in the batch: bisect for the largest that fits
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low * plan.dp


def max_context(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> int:
    """The longest context (prompt + output) whose KV cache for this batch fits beside the weights; 0 if none."""
    mem = inference_memory(model, plan, gpu)
    free = mem.usable_bytes - mem.weights_bytes - mem.activations_bytes
    per_token = plan.batch / plan.dp * kv_bytes_per_token_gpu(model, plan)
    return max(0, floor(free / per_token)) if free > 0 else 0


def decode_step_floor_s(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> float:
    """The least time one decode step can take on the fullest GPU: the bytes it must stream from HBM (its dense and
    head weights, its share of the experts the batch touches, the routers, and the batch's KV cache at the mean
    context) at the GPU's peak bandwidth, with compute, communication and kernel costs free. A measurement faster
    than this cannot have run the plan as stated."""
    st = _stage(model, plan, gpu)
    dense = _dense_weight_bytes(st)
    touched = touched_experts(st.experts, st.top_k, float(plan.batch))
    experts = st.moe_layers * touched * st.expert_share_params * st.weight_bytes
    small = (st.moe_layers * st.router_params + st.head_params) * ACT_BYTES
    mean_context = plan.prompt_tokens + (plan.output_tokens - 1) / 2.0
    kv = plan.batch / plan.dp * mean_context * st.layers * st.kv_bytes_token_layer
    return (dense + experts + small + kv) / gpu.hbm_bytes_per_s


def kv_cache_table(model: ModelSpec, plan: InferencePlan, contexts: np.ndarray) -> np.ndarray:
    """KV bytes per GPU of the plan's batch at each context length (vectorised)."""
    return plan.batch / plan.dp * contexts * kv_bytes_per_token_gpu(model, plan)


def host_link_bytes_per_s(cluster: Cluster) -> float:
    """Bytes per second one GPU moves from host memory: over its direct CPU link (NVLink-C2C on Grace systems)
    where it has one, else its PCIe x16, at the link's achievable fraction."""
    system = cluster.system
    link = cluster.catalog.link(system.cpu_gpu_link or system.pcie)
    return float(link.bytes_per_s * link.efficiency)
