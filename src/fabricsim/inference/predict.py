"""Inference time and memory: prefill (time to first token) and decode (time per output token) of a static batch on
one parallel group, every GEMM as a roofline of its FLOPs and its weight bytes, and the group's collectives on
their real process groups, so a user sees which layer (compute, HBM, NVLink, PCIe, InfiniBand) bounds serving.

Per forward pass on one pipeline stage, per GPU:
- weight GEMMs (attention Q/K/V/O, dense MLP, shared experts): max(2 x tokens x params / achievable rate,
  params x weight bytes / achievable HBM bandwidth); the rate is the weight format's peak (FP8 and FP4 tensor
  cores run FP8/FP4 weights; INT4 is W4A16 at the BF16 rate) x its efficiency x the reduction-depth factor;
  with ``fixed_gemm_tiles`` (TensorRT engines: one tactic per optimization profile) the attention, dense-MLP
  and shared-expert GEMMs compute in waves of ``gemm_tile`` output tiles, one per SM, so a GEMM of few tiles
  (short prompts, small batches, narrow tensor-parallel slices) leaves SMs idle;
- routed experts (MoE): the same roofline with the experts the step's tokens touch, E x (1 - (1 - k / E)^T),
  spread over the tp x dp GPUs that hold the experts (expert parallelism re-folds them as ep x expert-TP); with
  ep > 1 the step waits for the most loaded expert-parallel rank: its routed tokens are (1 + z x cv) x the mean,
  cv from the multinomial noise of balanced top-k routing and the routing skew ``inference.expert_load_dispersion``
  over the E / ep experts a rank holds, z the expected maximum of ep normal draws (on the expert GEMMs' FLOPs and
  the dispatch/combine bytes; the weights each rank streams are unchanged); an engine whose MoE GEMMs are
  Ampere-generation kernels (``InferencePlan.moe_sm80_kernels``: TensorRT-LLM before 0.10) runs them at the
  16-bit rate x the GPU's ``sm80_kernel_fraction``, the weights still read in their format;
- attention projections in their own format (``InferencePlan.attention_weights``, the output projection
  ``attention_out_weights``; NVIDIA's NVFP4 DeepSeek checkpoints keep them BF16), each GEMM at its format's rate;
- attention: causal prefill FLOPs at the fused-attention rate; decode reads the batch's KV cache at the HBM rate and
  computes at the fused-attention rate, or at its FP8 multiple where the engine runs MLA generation in FP8 over an
  FP8 KV cache (``InferencePlan.fp8_mla_decode``);
- LM head in BF16 on the last stage (only the new token's logits);
- every kernel of a forward pass a fixed latency (``data/inference.yaml`` kernel_latency) beside its
  roofline: the weight GEMMs of the shapes above and the layer's other kernels (``inference.layer_kernels``: norms,
  RoPE and attention, MLA's extra GEMMs, activations, MoE routing), and per pass a step overhead;
- TP: 2 all-reduces per layer (attention and MLP outputs) of tokens x hidden x 2 bytes; with attention data
  parallelism (dp > 1) an MoE layer instead dispatches and combines its tokens by all-to-all over the ep group;
- PP: the activation to the next stage (InfiniBand when the stage boundary crosses nodes).
With pp > 1 the batch runs as min(pp, batch) micro-batches through the pipeline.

Speculative decoding (``InferencePlan.draft_tokens`` d > 0, the model's own MTP module as drafter): a decode step
verifies 1 + d tokens a sequence in one pass (the GEMMs stream their weights once for them all, their FLOPs, the
touched experts, the attention FLOPs and the collectives scale with the tokens, the KV cache is read once: FlashMLA's
decode kernel folds the s_q query tokens of a sequence into its heads), then runs d draft forwards of one decoder
layer, eh_proj and the shared LM head on the last stage; a step yields ``acceptance_length`` tokens a sequence.

Conventions: ``tpot_s`` is the mean decode step over the output divided by the acceptance length (the KV cache
grows from prompt to prompt + output, linearly, so the step at the mid context is the mean); ``e2e_s`` = ttft +
(output - 1) x tpot (the first step's drafts are proposed in the prefill pass);
``output_tokens_per_s`` = batch x output / e2e of the whole group (static batching, as TensorRT-LLM's
gptSessionBenchmark reports it), per GPU divided by tp x pp x dp.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import ceil

from fabricsim.catalog import GPU, roadmap_warning
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.inference.comms import _layer_comm, _pipeline_sends
from fabricsim.inference.draft import _draft_parts, _eh_proj_comm
from fabricsim.inference.kvtier import NetworkKvTier, fabric_layer, load_s
from fabricsim.inference.memory import (
    InferenceMemory,
    host_link_bytes_per_s,
    inference_memory,
    kv_bytes_per_token_gpu,
    max_batch,
    max_context,
)
from fabricsim.inference.plan import LAYERS, InferencePlan, check_inference_plan
from fabricsim.inference.stage import _Stage, _stage, _stage_work
from fabricsim.model import ModelSpec


@dataclass(frozen=True)
class InferencePrediction:
    """Latency, throughput, memory and the per-layer breakdown of one static batch."""

    ttft_s: float
    tpot_s: float
    e2e_s: float
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    memory: InferenceMemory
    max_batch: int
    max_context: int
    """the longest context (prompt + output) this batch can run: the smaller of ``max_context_memory`` and the model's
    window (``context_window``, where known)"""
    breakdown_s: dict[str, float]
    prefill_s: dict[str, float]
    decode_step_s: dict[str, float]
    bottleneck: str
    gpus: int
    nodes: int
    warnings: tuple[str, ...] = field(default_factory=tuple)
    draft_step_s: dict[str, float] = field(default_factory=dict)
    """the draft forwards' part of ``decode_step_s`` (speculative decoding; zeros without)"""
    tokens_per_step: float = 1.0
    """output tokens a decode step yields per sequence (the plan's acceptance length)"""
    max_context_memory: int = 0
    """the longest context whose KV cache for this batch fits in memory (may exceed the model's window)"""
    context_window: int | None = None
    """the model's context window (``InferencePlan.max_context``); None where not known"""
    network_tier: NetworkTierUse | None = None
    """how the prompt's networked-KV-tier share was served (``InferencePlan.prefix_network``); None without a tier"""

    @property
    def context_limit(self) -> str:
        """What bounds ``max_context``: ``window`` (the model's) or ``memory``."""
        return "window" if self.context_window is not None and self.context_window < self.max_context_memory \
            else "memory"

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def memory_per_gpu_bytes(self) -> float:
        return self.memory.total_bytes

    def to_json(self) -> dict[str, object]:
        return {
            "ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes, "memory": self.memory.to_json(), "fits": self.fits,
            "max_batch": self.max_batch, "max_context": self.max_context,
            "max_context_memory": self.max_context_memory, "context_window": self.context_window,
            "max_context_limit": self.context_limit, "breakdown_s": dict(self.breakdown_s),
            "prefill_s": dict(self.prefill_s), "decode_step_s": dict(self.decode_step_s),
            "bottleneck": self.bottleneck, "gpus": self.gpus, "nodes": self.nodes, "warnings": list(self.warnings),
            "draft_step_s": dict(self.draft_step_s), "tokens_per_step": self.tokens_per_step,
        }


@dataclass(frozen=True)
class NetworkTierUse:
    """The networked KV tier's part of a static batch's prefill: the tokens a request finds there, the bytes each GPU
    loads for the batch, the load's seconds, TTFT loading them and recomputing them, and which the engine takes
    (the faster: ``load`` or ``recompute``)."""

    tokens: int
    bytes_per_gpu: float
    load_s: float
    ttft_load_s: float
    ttft_recompute_s: float
    chosen: str

    def to_json(self) -> dict[str, object]:
        return {"tokens_per_request": self.tokens, "load_bytes_per_gpu": self.bytes_per_gpu, "load_s": self.load_s,
                "ttft_load_s": self.ttft_load_s, "ttft_recompute_s": self.ttft_recompute_s, "chosen": self.chosen}


def _forward(model: ModelSpec, plan: InferencePlan, cluster: Cluster, st: _Stage, seqs: float, new_tokens: int,
             context: float, *, queries: int = 1, overhead: bool = True) -> dict[str, float]:
    """One forward pass of ``seqs`` sequences through the whole pipeline, each adding ``new_tokens`` tokens after
    ``context`` cached ones (a decode pass: ``queries`` tokens a sequence, 1 + d when verifying d drafts, reading
    the cache once): min(pp, seqs) micro-batches, every stage pricing each micro-batch."""
    micro = float(min(plan.pp, max(1.0, seqs)))
    mb = seqs / micro
    prefill = new_tokens > 1
    tokens_group = mb * (new_tokens if prefill else queries)
    tokens_rank = tokens_group / plan.dp
    seqs_rank = mb / plan.dp
    if prefill:  # causal pairs of the new tokens among themselves and with the context
        pairs = seqs_rank * new_tokens * (context + (new_tokens + 1) / 2.0)
        kv = kv_pairs = 0.0
        head = seqs_rank
    else:  # the queries attend causally to the cache and each other; the cache streams once for them all
        pairs = 0.0
        kv = seqs_rank * (context + (queries - 1))
        kv_pairs = seqs_rank * (queries * context + queries * (queries - 1) / 2.0)
        head = seqs_rank * queries
    stage = _stage_work(st, tokens_rank, tokens_group, pairs, kv, head, last=True, kv_pairs_rank=kv_pairs)
    _layer_comm(model, plan, cluster, tokens_rank, tokens_group, stage)
    passes = micro + plan.pp - 1 if prefill else micro  # prefill fills the pipeline; decode keeps it full
    out = {k: v * passes for k, v in stage.items()}
    _pipeline_sends(model, plan, cluster, tokens_rank, out)
    if overhead:  # the engine's host work per step: added, or only what exceeds the GPU's pass when overlapped
        out["other"] += plan.engine_profile.exposed_host_s(sum(out.values()), seqs)
    return out


def _draft_passes(model: ModelSpec, plan: InferencePlan, cluster: Cluster, gpu: GPU, seqs: float, context: float,
                  first_tokens: int, prefill: bool) -> dict[str, float]:
    """The draft_tokens draft forwards of a step on the last stage, per micro-batch: the first over ``first_tokens``
    tokens a sequence (MTP Eagle feeds the step's verified tokens back, 1 + d a sequence; after a prefill, the
    prompt), the other d - 1 over one token a sequence; zeros without speculative decoding."""
    out = dict.fromkeys(LAYERS, 0.0)
    d = plan.draft_tokens
    if not d:
        return out
    draft, plan1, st = _draft_parts(model, plan, gpu)
    micro = float(min(plan.pp, max(1.0, seqs)))
    mb = seqs / micro
    if prefill:
        first = _forward(draft, plan1, cluster, st, mb, first_tokens, 0.0, overhead=False)
        later_context = float(first_tokens)
    else:
        first = _forward(draft, plan1, cluster, st, mb, 1, context, queries=first_tokens, overhead=False)
        later_context = context
    later = _forward(draft, plan1, cluster, st, mb, 1, later_context, overhead=False)
    _eh_proj_comm(model, plan, cluster, mb * first_tokens / plan.dp, first)  # _forward priced the layer's own
    _eh_proj_comm(model, plan, cluster, mb / plan.dp, later)
    for k in LAYERS:
        out[k] += micro * (first[k] + (d - 1) * later[k])
    return out


def predict_inference(model: ModelSpec, cluster: Cluster, plan: InferencePlan,
                      kv_tier: NetworkKvTier | None = None) -> InferencePrediction:
    """TTFT, TPOT, end-to-end latency, throughput, memory and the bounding layer of one static batch; the prompt's
    networked-tier share (``plan.prefix_network``) loaded from ``kv_tier`` or recomputed, whichever is faster."""
    sysm = cluster.system
    gpu = cluster.catalog.gpu(sysm.gpu)
    check_inference_plan(model, plan, gpu)
    gpus = plan.gpus
    if gpus > sysm.gpus_per_node and gpus % sysm.gpus_per_node:
        raise SpecError(f"{gpus} GPUs do not fill whole {sysm.id} nodes of {sysm.gpus_per_node}", field="--gpus")
    st = _stage(model, plan, gpu)
    d = plan.draft_tokens
    mid = plan.prompt_tokens + plan.output_tokens / 2.0
    cached = plan.cached_prompt_tokens  # the prefix cache's part of the prompt is attended to, not computed
    prefill = _forward(model, plan, cluster, st, plan.batch, plan.prompt_tokens - cached, float(cached))
    network = _network_part(model, plan, cluster, st, kv_tier, prefill)
    if network is not None:
        prefill = network[1]
    decode = _forward(model, plan, cluster, st, plan.batch, 1, mid, queries=1 + d)
    drafts = _draft_passes(model, plan, cluster, gpu, plan.batch, mid, 1 + d, prefill=False)
    if d:  # the drafter proposes the first step's drafts after the prefill; each step verifies 1 + d, then drafts
        after_prompt = _draft_passes(model, plan, cluster, gpu, plan.batch, 0.0, plan.prompt_tokens, prefill=True)
        prefill = {k: prefill[k] + after_prompt[k] for k in LAYERS}
        decode = {k: decode[k] + drafts[k] for k in LAYERS}
    if plan.host_prompt_tokens:  # the host tier's part is copied back before the rest is computed
        prefill["pcie"] += plan.host_prompt_tokens * plan.batch / plan.dp * kv_bytes_per_token_gpu(model, plan) \
            / host_link_bytes_per_s(cluster)
    ttft = sum(prefill.values())
    tier_use = None
    if network is not None:  # both TTFTs: the same plan, the tier's tokens loaded or computed
        tier_use = replace(network[0], ttft_load_s=ttft - network[2] + network[0].ttft_load_s,
                           ttft_recompute_s=ttft - network[2] + network[0].ttft_recompute_s)
    step = sum(decode.values())
    tpot = step / plan.acceptance_length  # a step yields the acceptance length in tokens
    steps = (plan.output_tokens - 1) / plan.acceptance_length
    e2e = ttft + steps * step
    total = {k: prefill[k] + steps * decode[k] for k in LAYERS}
    mem = inference_memory(model, plan, gpu)
    warnings: tuple[str, ...] = () if mem.fits else (mem.summary(),)
    roadmap = roadmap_warning(cluster.system)
    if roadmap is not None:
        warnings += (roadmap,)
    throughput = plan.batch * plan.output_tokens / e2e
    memory_context = max_context(model, plan, gpu)
    return InferencePrediction(
        ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, output_tokens_per_s=throughput,
        output_tokens_per_s_per_gpu=throughput / gpus, memory=mem, max_batch=max_batch(model, plan, gpu),
        max_context=memory_context if plan.max_context is None else min(memory_context, plan.max_context),
        max_context_memory=memory_context, context_window=plan.max_context, breakdown_s=total, prefill_s=prefill,
        decode_step_s=decode,
        bottleneck=max(LAYERS, key=lambda k: total[k]), gpus=gpus, nodes=ceil(gpus / sysm.gpus_per_node),
        warnings=warnings, draft_step_s=drafts, tokens_per_step=plan.acceptance_length, network_tier=tier_use,
    )


def _network_part(model: ModelSpec, plan: InferencePlan, cluster: Cluster, st: _Stage, tier: NetworkKvTier | None,
                  loaded: dict[str, float]) -> tuple[NetworkTierUse, dict[str, float], float] | None:
    """With a networked tier: (its use, the prefill pass the engine takes, that pass's seconds). ``loaded`` is the
    prefill with the tier's tokens cached; loading them adds their bytes over the fabric; recomputing them is the
    prefill of the same plan without the tier. The use's TTFTs hold only the two passes' seconds (the caller adds
    the rest of the prefill). None without a tier."""
    tokens = plan.network_prompt_tokens
    if tier is None:
        if tokens:
            raise SpecError("a share of the prompt in a networked KV tier needs the tier: add --kv-tier network",
                            field="--prefix-network")
        return None
    bytes_per_gpu = tokens * plan.batch / plan.dp * kv_bytes_per_token_gpu(model, plan)
    seconds = load_s(bytes_per_gpu, cluster, tier)
    if not tokens:
        passed = sum(loaded.values())
        return NetworkTierUse(0, 0.0, 0.0, passed, passed, "none"), loaded, passed
    before = plan.cached_prompt_tokens - tokens
    recompute = _forward(model, plan, cluster, st, plan.batch, plan.prompt_tokens - before, float(before))
    with_load = dict(loaded)
    with_load[fabric_layer(cluster)] += seconds
    t_load, t_recompute = sum(with_load.values()), sum(recompute.values())
    chosen, taken = ("load", with_load) if t_load <= t_recompute else ("recompute", recompute)
    use = NetworkTierUse(tokens, bytes_per_gpu, seconds, t_load, t_recompute, chosen)
    return use, taken, min(t_load, t_recompute)
