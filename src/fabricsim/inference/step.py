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

from bisect import bisect_left
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from math import ceil, erf, floor, isfinite, pi, sqrt
from typing import Any

import numpy as np

from fabricsim import units
from fabricsim.caching import ByIdentity
from fabricsim.catalog import GPU, read_yaml
from fabricsim.comm import Cluster, group_comm
from fabricsim.errors import SpecError
from fabricsim.model import (
    KV_BYTES,
    WEIGHT_BYTES,
    ModelSpec,
    achievable_flops_per_s,
    attention_flops_per_s,
    fp4_matmul_efficiency,
    fp8_matmul_efficiency,
    gemm_k_overhead,
    gemm_tile,
    hbm_efficiency,
    kv_bytes_per_token_layer,
    kv_bytes_per_token_model,
    kv_heads_per_gpu,
    sm80_kernel_fraction,
)

LAYERS = ("compute", "hbm", "nvlink", "pcie", "infiniband", "ethernet", "other")
ACT_BYTES = 2  # bf16 activations
WEIGHTS = tuple(WEIGHT_BYTES)
KVS = tuple(KV_BYTES)


# ---- free parameters (data/inference.yaml, each with its source) ----------------------------------------------
INFERENCE_FILE = "inference.yaml"


@lru_cache(maxsize=1)
def inference_defaults() -> Any:
    """The packaged ``data/inference.yaml``: the inference model's and the engines' free parameters."""
    text = resources.files("fabricsim.inference.data").joinpath(INFERENCE_FILE).read_text(encoding="utf-8")
    return read_yaml(text, INFERENCE_FILE)


@lru_cache(maxsize=1)
def kernel_latency_s() -> float:
    """Seconds every kernel of a forward pass takes beyond its roofline work (``inference.kernel_latency``)."""
    return units.parse_duration(str(inference_defaults()["kernel_latency"]["seconds"]))


@lru_cache(maxsize=1)
def layer_kernels() -> dict[str, int]:
    """Kernels of a decoder layer beside the weight GEMMs of its shapes, by component (``inference.layer_kernels``)."""
    spec = inference_defaults()["layer_kernels"]
    return {k: int(spec[k]) for k in ("norms", "attention", "mla_gemms", "mla_norms", "mlp_activation", "moe")}


@lru_cache(maxsize=1)
def step_overhead_s() -> float:
    """Seconds of host work per forward pass of the replica (``inference.step_overhead``)."""
    return units.parse_duration(str(inference_defaults()["step_overhead"]["seconds"]))


@lru_cache(maxsize=1)
def memory_utilization() -> float:
    """Fraction of HBM an inference engine uses (``inference.memory_utilization``)."""
    return float(inference_defaults()["memory_utilization"]["value"])


@lru_cache(maxsize=1)
def max_num_tokens() -> int:
    """Prefill tokens per forward pass the activation workspace is sized for (``inference.max_num_tokens``)."""
    return int(inference_defaults()["max_num_tokens"]["tokens"])


@lru_cache(maxsize=1)
def serving_max_batch() -> int:
    """Largest batch an engine schedules when every request is queued (``inference.serving_max_batch``)."""
    return int(inference_defaults()["serving_max_batch"]["sequences"])


@lru_cache(maxsize=1)
def expert_load_dispersion() -> float:
    """Coefficient of variation of one routed expert's load beyond balanced routing
    (``inference.expert_load_dispersion``)."""
    return float(inference_defaults()["expert_load_dispersion"]["value"])


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normal draws] (0 for n = 1), by quadrature of n x phi(x) x Phi(x)^(n-1)."""
    if n <= 1:
        return 0.0
    x = np.linspace(-10.0, 10.0, 8001)
    pdf = np.exp(-0.5 * x * x) / sqrt(2.0 * pi)
    cdf = 0.5 * (1.0 + np.array([erf(v / sqrt(2.0)) for v in x]))
    density = n * pdf * cdf ** (n - 1)
    return float(np.sum(x * density) * (x[1] - x[0]))


def expert_load_terms(experts: int, top_k: int, ep: int) -> tuple[float, float, float]:
    """(z, a, b) with which the most loaded of the ep expert-parallel ranks carries (1 + z x sqrt(a / T + b)) x the
    mean rank's routed tokens for T tokens in the step: a / T is the multinomial variance of balanced-random top-k
    routing (each token picks k distinct experts of E; a rank holds E / ep), b the skew of real routing
    (``expert_load_dispersion`` squared over the E / ep experts a rank sums), z the expected maximum of ep normal
    draws. (0, 0, 0) without expert parallelism: every GPU then holds a slice of every expert."""
    if experts == 0 or ep <= 1 or top_k >= experts:
        return 0.0, 0.0, 0.0
    a = (ep - 1) * (experts - top_k) / ((experts - 1) * top_k)
    b = expert_load_dispersion() ** 2 * ep / experts
    return expected_max_normal(ep), a, b


def expert_load_peak(experts: int, top_k: int, ep: int, tokens: float) -> float:
    """The most loaded expert-parallel rank's routed tokens over the mean rank's (1 when balanced or ep = 1): the
    MoE GEMMs and the dispatch/combine of a step wait for that rank."""
    z, a, b = expert_load_terms(experts, top_k, ep)
    if z == 0.0 or tokens <= 0:
        return 1.0
    return 1.0 + z * sqrt(a / tokens + b)


# ---- inputs ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InferencePlan:
    """How a model is served: parallel sizes (GPUs = tp x pp x dp; ep re-folds the tp x dp GPUs of a stage for
    the experts), the static batch, prompt and output lengths and the weight and KV-cache formats."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    batch: int = 1
    prompt_tokens: int = 2048
    output_tokens: int = 256
    weights: str = "bf16"
    kv: str = "bf16"
    gqa_kernel: bool = True
    """decode attention reads each KV head once for its whole query group (XQA, FlashDecoding); False: once per
    query head (masked multi-head attention kernels without GQA support)"""
    moe_sm80_kernels: bool = False
    """the routed-expert GEMMs run on Ampere-generation (SM80) grouped-GEMM kernels at the 16-bit rate, whatever the
    weight format (TensorRT-LLM before 0.10: no FP8 MoE, no Hopper MoE kernels; 8-bit weights are INT8 weight-only)"""
    fixed_gemm_tiles: bool = False
    """the weight GEMMs run one tactic chosen for another shape (TensorRT engines: the optimization profile's
    optimum), so a GEMM of few output tiles leaves SMs idle (``gemm_tile`` waves); False: tactics tuned per token
    count fill the SMs (the roofline)"""
    fused_gate_up: bool = True
    """a gated MLP's gate and up projections run as one GEMM of twice the width; False: two GEMMs (TensorRT-LLM
    engines built without --use_fused_mlp), which matters where tiles are few (``fixed_gemm_tiles``)"""
    max_context: int | None = None
    """the model's context window, when known (a preset's); prompt + output beyond it is an error"""
    draft_tokens: int = 0
    """speculative decoding: draft tokens proposed per sequence and decode step by the model's own MTP module (one
    decoder layer of the model's shape, an input projection and the shared LM head, run once per draft token); the
    target model verifies 1 + draft_tokens tokens per sequence a step. 0: no speculative decoding"""
    acceptance_length: float = 1.0
    """mean tokens a decode step yields per sequence with speculative decoding: 1 + the expected accepted drafts,
    between 1 and 1 + draft_tokens (TensorRT-LLM reports it as the 'acceptance rate')"""
    attention_weights: str | None = None
    """format of the attention projection weights (QKV, MLA's down and up projections); None: ``weights``"""
    attention_out_weights: str | None = None
    """format of the attention output projection (o_proj, MLA's wo); None: ``attention_weights``"""
    fp8_mla_decode: bool = False
    """with an FP8 KV cache an MLA model's decode attention quantises Q to FP8 and runs its math on FP8 tensor
    cores (TensorRT-LLM's FP8 MLA generation kernels); no effect on other attention or a BF16 cache"""

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "ep", "dp", "batch", "prompt_tokens", "output_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SpecError(f"must be a positive integer, got {value!r}", field=f"--{_flag(name)}")
        d = self.draft_tokens
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            raise SpecError(f"must be an integer >= 0, got {d!r}", field="--draft-tokens")
        a = self.acceptance_length
        if d == 0 and a != 1:
            raise SpecError(f"{a!r} tokens a step needs draft tokens (--draft-tokens); without them a step yields 1",
                            field="--acceptance")
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not isfinite(a) or not 1.0 <= a <= 1.0 + d:
            raise SpecError(f"mean accepted tokens per step must lie in [1, 1 + draft tokens] = [1, {1 + d}], got "
                            f"{a!r}", field="--acceptance")
        if self.weights not in WEIGHT_BYTES:
            raise SpecError(f"unknown weight precision {self.weights!r}; choose {', '.join(WEIGHTS)}",
                            field="--weights")
        if self.kv not in KV_BYTES:
            raise SpecError(f"unknown KV-cache precision {self.kv!r}; choose {', '.join(KVS)}", field="--kv")
        for name in ("attention_weights", "attention_out_weights"):
            value = getattr(self, name)
            if value is not None and value not in WEIGHT_BYTES:
                raise SpecError(f"unknown weight precision {value!r}; choose {', '.join(WEIGHTS)}",
                                field=f"--{name.replace('_', '-')}")
        if self.max_context is not None and self.context > self.max_context:
            raise SpecError(f"prompt + output = {self.prompt_tokens} + {self.output_tokens} = {self.context} tokens "
                            f"exceeds the model's context window of {self.max_context}", field="--prompt")
        if self.batch % self.dp:
            raise SpecError(f"batch ({self.batch}) must be divisible by dp ({self.dp})", field="--batch")

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def context(self) -> int:
        return self.prompt_tokens + self.output_tokens

    @property
    def attention_format(self) -> str:
        """The attention projections' weight format (``weights`` unless set apart)."""
        return self.attention_weights or self.weights

    @property
    def attention_out_format(self) -> str:
        """The attention output projection's weight format (the other projections' unless set apart)."""
        return self.attention_out_weights or self.attention_format

    def to_json(self) -> dict[str, object]:
        return {"tp": self.tp, "pp": self.pp, "ep": self.ep, "dp": self.dp, "batch": self.batch,
                "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens, "weights": self.weights,
                "kv": self.kv, "gpus": self.gpus, "gqa_kernel": self.gqa_kernel,
                "moe_sm80_kernels": self.moe_sm80_kernels, "fixed_gemm_tiles": self.fixed_gemm_tiles,
                "fused_gate_up": self.fused_gate_up, "draft_tokens": self.draft_tokens,
                "acceptance_length": self.acceptance_length, "attention_weights": self.attention_format,
                "attention_out_weights": self.attention_out_format, "fp8_mla_decode": self.fp8_mla_decode}


def _flag(name: str) -> str:
    return {"prompt_tokens": "prompt", "output_tokens": "output"}.get(name, name)


def check_inference_plan(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> None:
    """Raise a one-line SpecError where the plan cannot run the model on this GPU."""
    t = plan.tp
    if model.heads % t:
        raise SpecError(f"heads ({model.heads}) must be divisible by tp ({t})", field="--tp")
    if model.kv_heads % t and t % model.kv_heads:
        raise SpecError(f"kv_heads ({model.kv_heads}) and tp ({t}) must divide one another", field="--tp")
    if model.layers % plan.pp:
        raise SpecError(f"layers ({model.layers}) must be divisible by pp ({plan.pp})", field="--pp")
    if model.dense_layers and model.ffn_hidden % t:
        raise SpecError(f"ffn_hidden ({model.ffn_hidden}) must be divisible by tp ({t})", field="--tp")
    stage_gpus = t * plan.dp
    if plan.ep > 1:
        if model.moe is None:
            raise SpecError(f"ep ({plan.ep}) > 1 needs an MoE model; {model.name!r} is dense", field="--ep")
        if model.moe.experts % plan.ep:
            raise SpecError(f"moe experts ({model.moe.experts}) must be divisible by ep ({plan.ep})", field="--ep")
        if stage_gpus % plan.ep:
            raise SpecError(f"ep ({plan.ep}) must divide tp*dp = {t}*{plan.dp} = {stage_gpus} (experts re-fold "
                            "a stage's GPUs)", field="--ep")
    if model.moe is not None and model.expert_ffn_hidden % (stage_gpus // plan.ep):
        raise SpecError(f"moe ffn_hidden ({model.expert_ffn_hidden}) must be divisible by expert-TP = tp*dp/ep = "
                        f"{stage_gpus // plan.ep}", field="--ep")
    for flag, fmt in (("--weights", plan.weights), ("--attention-weights", plan.attention_format),
                      ("--attention-out-weights", plan.attention_out_format)):
        if fmt == "fp8" and gpu.fp8_flops_per_s is None:
            raise SpecError(f"{gpu.id} has no FP8 tensor cores; use {flag} bf16 or int4", field=flag)
        if fmt == "fp4" and gpu.fp4_flops_per_s is None:
            raise SpecError(f"{gpu.id} has no FP4 tensor cores in the catalog; use {flag} fp8, int4 or bf16",
                            field=flag)


# ---- per-GPU coefficients of one pipeline stage ---------------------------------------------------------------
@dataclass(frozen=True)
class _Stage:
    """What one GPU of a pipeline stage holds and the rates it runs at; times are linear in these."""

    layers: int
    moe_layers: float
    common_params: float  # per GPU, summed over the stage's layers: attention, dense MLP, shared experts
    expert_share_params: float  # one routed expert's weights / (tp x dp): a GPU's share of every expert's work
    experts: int
    top_k: int
    ep: int
    head_params: float  # LM head on one GPU (vocab-parallel over tp)
    embedding_params: float
    router_params: float
    weight_bytes: float  # per weight of the routed experts (and of GEMMs in the plan's weight format)
    gemm_rate: float  # FLOP/s of GEMMs in the plan's weight format
    expert_gemm_rate: float  # FLOP/s of the routed-expert GEMMs (gemm_rate unless the engine's MoE kernels are SM80)
    bf16_rate: float
    attention_rate: float
    decode_attention_rate: float  # FLOP/s of decode attention over the cache (FP8 MLA generation: the FP8 multiple)
    hbm_rate: float
    kv_bytes_token_layer: float  # per GPU
    kv_reads: float  # times decode attention streams each cached K/V element (1 with GQA-aware kernels)
    attn_flops_pair_layer: float  # per query-key pair per layer per GPU (QK and PV), prefill
    attn_flops_kv_layer: float  # per cached token read per layer per GPU, decode (MLA: the absorbed form)
    hidden: int
    dense_gemms: tuple[tuple[float, float, float], ...]  # (N, K, count on the stage) of the GEMMs in common_params
    gemm_bytes: tuple[float, ...]  # bytes per weight of each dense GEMM (its format)
    gemm_rates: tuple[float, ...]  # FLOP/s of each dense GEMM (its format's rate)
    sms: int  # SMs a GEMM's tiles spread over (0: tactics fill the SMs or no SM count, plain roofline)
    kernels: float  # kernel launches of one forward pass on the stage (each pays kernel_latency)


def _stage(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> _Stage:
    return _cached_stage(ByIdentity(model), plan.tp, plan.pp, plan.ep, plan.dp, plan.weights, plan.kv,
                         plan.gqa_kernel, plan.moe_sm80_kernels, plan.fixed_gemm_tiles, plan.fused_gate_up,
                         ByIdentity(gpu), plan.attention_format, plan.attention_out_format, plan.fp8_mla_decode)


@lru_cache(maxsize=4096)
def _cached_stage(model_ref: ByIdentity[ModelSpec], tp: int, pp: int, ep: int, dp: int, weights: str, kv: str,
                  gqa_kernel: bool, moe_sm80_kernels: bool, fixed_gemm_tiles: bool, fused_gate_up: bool,
                  gpu_ref: ByIdentity[GPU], attention_weights: str, attention_out_weights: str,
                  fp8_mla_decode: bool) -> _Stage:
    model, gpu = model_ref.value, gpu_ref.value
    layers = model.layers // pp
    moe_layers = model.moe_layers / pp  # the stage's share (pp = 1 for every case with dense leading layers)
    dense_layers = layers - moe_layers
    attention = model.attention_params_per_rank(tp)
    shared = 0.0 if model.moe is None else model.moe.shared_experts * model.expert_params() / tp
    common = layers * attention + dense_layers * model.mlp_params() / tp + moe_layers * shared
    share = 1.0 / (tp * dp)
    rate = _effective_gemm_rate(gpu, weights, model.hidden)
    # SM80 MoE kernels: 16-bit math (8-bit weights dequantised in the main loop) at the GPU's SM80 fraction
    expert_rate = (_effective_gemm_rate(gpu, "bf16", model.hidden) * sm80_kernel_fraction(gpu) if moe_sm80_kernels
                   else rate)
    dense_gemms = _dense_gemms(model, tp, layers, dense_layers, moe_layers, fused_gate_up)
    formats = (attention_out_weights, attention_weights) + (weights,) * (len(dense_gemms) - 2)  # O, QKV, then MLPs
    attention_rate = attention_flops_per_s(gpu)
    fp8_math = fp8_mla_decode and kv == "fp8" and model.mla is not None and gpu.fp8_flops_per_s is not None
    return _Stage(
        layers=layers, moe_layers=moe_layers, common_params=common,
        expert_share_params=model.expert_params() * share if model.moe else 0.0,
        experts=model.moe.experts if model.moe else 0,
        top_k=model.moe.top_k if model.moe else 0, ep=ep,
        head_params=model.vocab * model.hidden / tp, embedding_params=model.vocab * model.hidden / tp,
        router_params=float(model.router_params()), weight_bytes=WEIGHT_BYTES[weights],
        gemm_rate=rate, expert_gemm_rate=expert_rate, bf16_rate=achievable_flops_per_s(gpu),
        attention_rate=attention_rate,
        decode_attention_rate=(attention_rate * gpu.fp8_flops_per_s / gpu.bf16_flops_per_s
                               if fp8_math and gpu.fp8_flops_per_s is not None else attention_rate),
        hbm_rate=gpu.hbm_bytes_per_s * hbm_efficiency(gpu).value,
        kv_bytes_token_layer=kv_bytes_per_token_layer(model, tp, kv),
        kv_reads=1.0 if gqa_kernel or model.mla is not None else (model.heads // tp) / kv_heads_per_gpu(model, tp),
        attn_flops_pair_layer=model.attention_flops_per_pair() / tp,
        attn_flops_kv_layer=model.attention_flops_per_pair(absorbed=True) / tp, hidden=model.hidden,
        dense_gemms=dense_gemms, gemm_bytes=tuple(WEIGHT_BYTES[f] for f in formats),
        gemm_rates=tuple(_effective_gemm_rate(gpu, f, model.hidden) for f in formats),
        sms=gpu.sms.value if fixed_gemm_tiles and gpu.sms is not None else 0,
        kernels=_stage_kernels(model, layers, dense_layers, moe_layers, dense_gemms),
    )


def _stage_kernels(model: ModelSpec, layers: int, dense_layers: float, moe_layers: float,
                   dense_gemms: tuple[tuple[float, float, float], ...]) -> float:
    """Kernel launches of one forward pass on a stage: one per weight GEMM of its shapes, and per layer the
    ``inference.layer_kernels`` inventory (norms, RoPE and attention; MLA's extra GEMMs and latent norm; an
    activation per dense MLP or shared-expert block; the MoE routing and grouped GEMMs)."""
    inv = layer_kernels()
    per_layer = inv["norms"] + inv["attention"]
    if model.mla is not None:
        per_layer += inv["mla_gemms"] + inv["mla_norms"]
    shared = model.moe is not None and model.moe.shared_experts > 0
    mlps = (dense_layers if model.ffn_hidden else 0.0) + (moe_layers if shared else 0.0)
    moe = moe_layers * inv["moe"] if model.moe is not None else 0.0
    return sum(count for _, _, count in dense_gemms) + layers * per_layer + mlps * inv["mlp_activation"] + moe


def _dense_gemms(model: ModelSpec, tp: int, layers: int, dense_layers: float, moe_layers: float,
                 fused_gate_up: bool) -> tuple[tuple[float, float, float], ...]:
    """The stage's attention, dense-MLP and shared-expert GEMMs on one GPU as (N, K, count), their N x K x count
    summing to its common parameters: O (K = o_dim / tp), the other attention projections as one GEMM of depth
    hidden (fused QKV; MLA's projections taken alike), gate and up (one GEMM when fused), then down."""
    attention = model.attention_params_per_rank(tp)
    o_k = model.o_dim / tp
    out = [(float(model.hidden), o_k, float(layers)),
           ((attention - model.hidden * o_k) / model.hidden, float(model.hidden), float(layers))]

    def mlp(width: float, count: float) -> None:
        if count and width:
            inputs = model.mlp_matrices - 1  # gate and up, or the one up projection
            split = 1 if fused_gate_up else inputs
            out.append((inputs // split * width, float(model.hidden), split * count))
            out.append((float(model.hidden), width, count))

    mlp(model.ffn_hidden / tp, dense_layers)
    if model.moe is not None:
        mlp(model.moe.shared_experts * model.expert_ffn_hidden / tp, moe_layers)
    return tuple(out)


# ---- speculative decoding: the model's MTP draft module ----------------------------------------------------------
@lru_cache(maxsize=256)
def _draft_model(model_ref: ByIdentity[ModelSpec]) -> ModelSpec:
    """The model's MTP module as a one-layer model: one decoder layer of the model's last-layer shape (an MoE layer
    for an MoE model, as DeepSeek-V3's layer 61), its embedding and LM head shared with the model."""
    model = model_ref.value
    moe = None if model.moe is None else model.moe.model_copy(update={"dense_layers": 0})
    return model.model_copy(update={"layers": 1, "moe": moe})


def _draft_parts(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> tuple[ModelSpec, InferencePlan, _Stage]:
    """The draft module's one-layer model, the plan it runs under (on the target's last stage: pp 1) and its stage:
    the layer's GEMMs and kernels plus the input projection eh_proj (2 x hidden -> hidden, row-parallel over tp, as
    TensorRT-LLM's DeepseekV3MTP) and the two input norms (enorm, hnorm)."""
    draft = _draft_model(ByIdentity(model))
    plan1 = replace(plan, pp=1, draft_tokens=0, acceptance_length=1.0)
    st = _stage(draft, plan1, gpu)
    eh = (float(model.hidden), 2.0 * model.hidden / plan.tp, 1.0)
    return draft, plan1, replace(st, dense_gemms=(*st.dense_gemms, eh), common_params=st.common_params + eh[0] * eh[1],
                                 gemm_bytes=(*st.gemm_bytes, st.weight_bytes),
                                 gemm_rates=(*st.gemm_rates, st.gemm_rate),
                                 kernels=st.kernels + 1 + 2)  # eh_proj, enorm and hnorm


def _eh_proj_comm(model: ModelSpec, plan: InferencePlan, cluster: Cluster, tokens_rank: float,
                  out: dict[str, float]) -> None:
    """The all-reduce of the draft module's row-parallel eh_proj over tp (none at tp = 1)."""
    if plan.tp > 1:
        tp_n, tp_ppn = _groups(plan, cluster.system.gpus_per_node).tp
        t, kind = group_comm(cluster, tp_n, tp_ppn, "all_reduce", tokens_rank * model.hidden * ACT_BYTES)
        out[kind] += t


def _draft_comm(model: ModelSpec, plan: InferencePlan, cluster: Cluster, tokens_rank: float, tokens_group: float,
                out: dict[str, float]) -> None:
    """One draft forward's collectives: its layer's (as the target's) and the eh_proj all-reduce."""
    draft = _draft_model(ByIdentity(model))
    _layer_comm(draft, replace(plan, pp=1, draft_tokens=0, acceptance_length=1.0), cluster, tokens_rank,
                tokens_group, out)
    _eh_proj_comm(model, plan, cluster, tokens_rank, out)


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


def gemm_waves_s(tokens: np.ndarray | float, n: np.ndarray, k: np.ndarray, rate: float | np.ndarray,
                 sms: int) -> np.ndarray:
    """Seconds of the compute of GEMMs of ``tokens`` rows, N columns and depth K at ``rate`` FLOP/s: their
    ceil(ceil(M / rows) x ceil(N / cols) / SMs) waves of one tile of min(M, rows) x cols per SM (``gemm_tile``;
    the roofline 2 M N K / rate where the GPU has no SM count). Broadcasts tokens against the GEMMs."""
    m = np.asarray(tokens, dtype=np.float64)[..., None]
    if not sms:
        roof: np.ndarray = 2.0 * m * n * k / rate
        return roof
    rows, cols = gemm_tile()
    waves = np.ceil(np.ceil(m / rows) * np.ceil(n / cols) / sms)
    out: np.ndarray = waves * 2.0 * np.minimum(m, rows) * cols * k * sms / rate
    return out


def _gemm_rate(gpu: GPU, weights: str) -> tuple[float, str]:
    """Achievable FLOP/s of the weight GEMMs for a weight format, and the tensor-core precision it runs at: FP8 at
    the FP8 peak x its efficiency; FP4 at the FP4 peak x its own efficiency (the FP8 one where unmeasured);
    BF16 and INT4 (W4A16: weights dequantised to BF16) at the BF16 rate."""
    if weights == "fp8" and gpu.fp8_flops_per_s:
        return gpu.fp8_flops_per_s * fp8_matmul_efficiency(gpu).value, "fp8"
    if weights == "fp4" and gpu.fp4_flops_per_s:
        return gpu.fp4_flops_per_s * fp4_matmul_efficiency(gpu).value, "fp4"
    return achievable_flops_per_s(gpu), "bf16"


def _effective_gemm_rate(gpu: GPU, weights: str, hidden: int) -> float:
    """FLOP/s of a weight GEMM in this format at the model's reduction depth: the format's rate x the reduction-depth
    factor hidden / (hidden + gemm_k_overhead, scaled by the format's speed-up over BF16)."""
    rate, precision = _gemm_rate(gpu, weights)
    scale = rate / achievable_flops_per_s(gpu) if precision != "bf16" else 1.0
    return rate * hidden / (hidden + gemm_k_overhead() * scale)


def _roof(flops_s: float, bytes_s: float, out: dict[str, float]) -> None:
    """Add a roofline term to the breakdown under the resource that bounds it."""
    if flops_s >= bytes_s:
        out["compute"] += flops_s
    else:
        out["hbm"] += bytes_s


def touched_experts(experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts a step's tokens route to: E x (1 - (1 - k / E)^tokens)."""
    if experts == 0 or tokens <= 0:
        return 0.0
    return float(experts * (1.0 - (1.0 - top_k / experts) ** tokens))


def _stage_work(st: _Stage, tokens_rank: float, tokens_group: float, pairs_rank: float, kv_rank: float,
                head_tokens_rank: float, last: bool, kv_pairs_rank: float | None = None) -> dict[str, float]:
    """Compute, HBM and overhead seconds of one forward pass on one GPU of a stage: ``tokens_rank`` tokens through
    its attention and dense GEMMs, ``tokens_group`` through the group's routed experts, ``pairs_rank`` causal
    query-key pairs (prefill), ``kv_rank`` cached tokens read (decode) and ``kv_pairs_rank`` query-key pairs over
    them (``kv_rank`` with one query a sequence)."""
    out = dict.fromkeys(LAYERS, 0.0)
    shapes = np.asarray(st.dense_gemms, dtype=np.float64)
    n, k, count = shapes[:, 0], shapes[:, 1], shapes[:, 2]
    flops_s = gemm_waves_s(tokens_rank, n, k, np.asarray(st.gemm_rates), st.sms) * count
    bytes_s = n * k * count * np.asarray(st.gemm_bytes) / st.hbm_rate
    out["compute"] += float(np.sum(np.where(flops_s >= bytes_s, flops_s, 0.0)))  # each GEMM bound by one resource
    out["hbm"] += float(np.sum(np.where(flops_s >= bytes_s, 0.0, bytes_s)))
    if st.experts and st.moe_layers:
        touched = touched_experts(st.experts, st.top_k, tokens_group)
        # each GPU runs 1 / (tp x dp) of the token-expert pairs, the most loaded expert-parallel rank more (the
        # step waits for it), and reads its share of the touched experts (ep x expert-TP = tp x dp GPUs hold
        # every expert once)
        peak = expert_load_peak(st.experts, st.top_k, st.ep, tokens_group)
        flops = 2.0 * tokens_group * st.top_k * st.expert_share_params * peak
        bytes_read = touched * st.expert_share_params * st.weight_bytes
        _roof(st.moe_layers * flops / st.expert_gemm_rate, st.moe_layers * bytes_read / st.hbm_rate, out)
        _roof(0.0, st.moe_layers * st.router_params * ACT_BYTES / st.hbm_rate, out)
    kv_pairs = kv_rank if kv_pairs_rank is None else kv_pairs_rank
    attn_s = st.layers * (st.attn_flops_pair_layer * pairs_rank / st.attention_rate
                          + st.attn_flops_kv_layer * kv_pairs / st.decode_attention_rate)
    _roof(attn_s,
          st.layers * kv_rank * st.kv_bytes_token_layer * st.kv_reads / st.hbm_rate, out)
    if last:
        _roof(2.0 * head_tokens_rank * st.head_params / st.bf16_rate, st.head_params * ACT_BYTES / st.hbm_rate, out)
    out["other"] += st.kernels * kernel_latency_s()
    return out


# ---- communication ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Groups:
    """The process groups of a plan as (ranks, most ranks on a node), and the pipeline boundaries' kinds."""

    tp: tuple[int, int]
    ep: tuple[int, int]
    boundaries_cross_nodes: tuple[bool, ...]


def _groups(plan: InferencePlan, gpus_per_node: int) -> _Groups:
    """Ranks are laid out tp innermost, then dp, then pp (outermost), as vLLM and TensorRT-LLM do."""
    stage = plan.tp * plan.dp
    tp_ppn = min(plan.tp, gpus_per_node)
    stage_nodes = max(1, ceil(stage / gpus_per_node))
    ep_ppn = max(1, min(plan.ep, ceil(plan.ep / stage_nodes)))
    crossings = tuple((s * stage) % gpus_per_node == 0 or stage >= gpus_per_node for s in range(1, plan.pp))
    return _Groups((plan.tp, tp_ppn), (plan.ep, ep_ppn), crossings)


def _layer_comm(model: ModelSpec, plan: InferencePlan, cluster: Cluster, tokens_rank: float,
                tokens_group: float, out: dict[str, float]) -> None:
    """Per forward pass of one stage: the TP all-reduces and the MoE all-to-alls of its layers."""
    groups = _groups(plan, cluster.system.gpus_per_node)
    layers = model.layers // plan.pp
    moe_layers = model.moe_layers / plan.pp
    act = tokens_rank * model.hidden * ACT_BYTES
    tp_n, tp_ppn = groups.tp
    t_ar, kind = group_comm(cluster, tp_n, tp_ppn, "all_reduce", act)
    a2a_layers = moe_layers if (model.moe is not None and plan.dp > 1 and plan.ep > 1) else 0.0
    # every layer reduces its attention output; MLPs reduce theirs unless the experts exchange tokens by all-to-all
    out[kind] += t_ar * (2 * layers - a2a_layers)
    if a2a_layers and model.moe is not None:
        ep_n, ep_ppn = groups.ep
        # the most loaded rank receives (dispatch) and sends back (combine) its peak share of the routed tokens
        peak = expert_load_peak(model.moe.experts, model.moe.top_k, plan.ep, tokens_group)
        per_rank = tokens_group / ep_n * model.moe.top_k * model.hidden * peak
        dispatch_bytes = 1.0 if plan.weights in ("fp8", "fp4") else ACT_BYTES  # DeepEP dispatches FP8
        t_d, kind_d = group_comm(cluster, ep_n, ep_ppn, "all_to_all", per_rank * dispatch_bytes)
        t_c, _ = group_comm(cluster, ep_n, ep_ppn, "all_to_all", per_rank * ACT_BYTES)
        out[kind_d] += (t_d + t_c) * a2a_layers


def _pipeline_sends(model: ModelSpec, plan: InferencePlan, cluster: Cluster, tokens_rank: float,
                    out: dict[str, float]) -> None:
    """One micro-batch's activation across every stage boundary (the pair crosses nodes where the stage does)."""
    size = tokens_rank * model.hidden * ACT_BYTES
    for crosses in _groups(plan, cluster.system.gpus_per_node).boundaries_cross_nodes:
        t, kind = group_comm(cluster, 2, 1 if crosses else 2, "send_recv", size)
        out[kind] += t


# ---- memory ---------------------------------------------------------------------------------------------------
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


def activation_bytes_per_gpu(model: ModelSpec, plan: InferencePlan) -> float:
    """The engine's activation workspace for one prefill chunk of ``max_num_tokens`` tokens: residual, QKV, attention
    output and the widest MLP intermediate (BF16), plus the logits of the batch (FP32)."""
    widest_mlp = max(model.ffn_hidden / plan.tp, (model.moe.top_k if model.moe else 0) * model.expert_ffn_hidden
                     * plan.ep / (plan.tp * plan.dp))
    per_token = (4 * model.hidden + (model.q_dim + model.o_dim) / plan.tp + 2 * widest_mlp) * ACT_BYTES
    logits = plan.batch / plan.dp * model.vocab / plan.tp * 4.0
    return min(max_num_tokens(), plan.batch * plan.prompt_tokens // plan.dp) * per_token + logits


def inference_memory(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> InferenceMemory:
    weights = weight_bytes_per_gpu(model, plan, gpu)
    st = _stage(model, plan, gpu)
    kv = plan.batch / plan.dp * plan.context * (st.layers + (1 if plan.draft_tokens else 0)) * st.kv_bytes_token_layer
    act = activation_bytes_per_gpu(model, plan)
    left = max(0.0, gpu.hbm_bytes - weights - act)
    return InferenceMemory(weights, kv, act, gpu.hbm_bytes, min(gpu.hbm_bytes, weights + act)
                           + left * memory_utilization())


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


# ---- prediction -----------------------------------------------------------------------------------------------
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
            "max_batch": self.max_batch, "max_context": self.max_context, "breakdown_s": dict(self.breakdown_s),
            "prefill_s": dict(self.prefill_s), "decode_step_s": dict(self.decode_step_s),
            "bottleneck": self.bottleneck, "gpus": self.gpus, "nodes": self.nodes, "warnings": list(self.warnings),
            "draft_step_s": dict(self.draft_step_s), "tokens_per_step": self.tokens_per_step,
        }


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
    if overhead:
        out["other"] += step_overhead_s()
    return out


def predict_inference(model: ModelSpec, cluster: Cluster, plan: InferencePlan) -> InferencePrediction:
    """TTFT, TPOT, end-to-end latency, throughput, memory and the bounding layer of one static batch."""
    sysm = cluster.system
    gpu = cluster.catalog.gpu(sysm.gpu)
    check_inference_plan(model, plan, gpu)
    gpus = plan.gpus
    if gpus > sysm.gpus_per_node and gpus % sysm.gpus_per_node:
        raise SpecError(f"{gpus} GPUs do not fill whole {sysm.id} nodes of {sysm.gpus_per_node}", field="--gpus")
    st = _stage(model, plan, gpu)
    d = plan.draft_tokens
    mid = plan.prompt_tokens + plan.output_tokens / 2.0
    prefill = _forward(model, plan, cluster, st, plan.batch, plan.prompt_tokens, 0.0)
    decode = _forward(model, plan, cluster, st, plan.batch, 1, mid, queries=1 + d)
    drafts = _draft_passes(model, plan, cluster, gpu, plan.batch, mid, 1 + d, prefill=False)
    if d:  # the drafter proposes the first step's drafts after the prefill; each step verifies 1 + d, then drafts
        after_prompt = _draft_passes(model, plan, cluster, gpu, plan.batch, 0.0, plan.prompt_tokens, prefill=True)
        prefill = {k: prefill[k] + after_prompt[k] for k in LAYERS}
        decode = {k: decode[k] + drafts[k] for k in LAYERS}
    ttft = sum(prefill.values())
    step = sum(decode.values())
    tpot = step / plan.acceptance_length  # a step yields the acceptance length in tokens
    steps = (plan.output_tokens - 1) / plan.acceptance_length
    e2e = ttft + steps * step
    total = {k: prefill[k] + steps * decode[k] for k in LAYERS}
    mem = inference_memory(model, plan, gpu)
    warnings = () if mem.fits else (mem.summary(),)
    throughput = plan.batch * plan.output_tokens / e2e
    return InferencePrediction(
        ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, output_tokens_per_s=throughput,
        output_tokens_per_s_per_gpu=throughput / gpus, memory=mem, max_batch=max_batch(model, plan, gpu),
        max_context=max_context(model, plan, gpu), breakdown_s=total, prefill_s=prefill, decode_step_s=decode,
        bottleneck=max(LAYERS, key=lambda k: total[k]), gpus=gpus, nodes=ceil(gpus / sysm.gpus_per_node),
        warnings=warnings, draft_step_s=drafts, tokens_per_step=plan.acceptance_length,
    )


# ---- step cost for the serving simulator ----------------------------------------------------------------------
_GRID = tuple(float(2**i) for i in range(0, 21))  # tokens per iteration at which the collectives are priced


@dataclass(frozen=True)
class InferenceStepCost:
    """Seconds of one continuous-batching iteration of one replica, from coefficients priced once: the stages run
    one after another (no micro-batch interleave), every GEMM a roofline (the dense ones in tile waves with
    ``fixed_gemm_tiles``), the collectives interpolated between token counts priced on the real groups.
    ``kv_capacity_tokens``: KV tokens that fit per replica. With speculative decoding (``draft_tokens`` d > 0)
    every decoding sequence verifies 1 + d tokens and the ``draft`` module runs d forwards; an iteration yields
    ``acceptance_length`` tokens a sequence, which ``step_s`` spreads over that many one-token iterations."""

    kv_capacity_tokens: int
    overhead_s: float
    gemm_tiles_n: tuple[float, ...]  # per dense GEMM (attention, dense MLP, shared experts): ceil(N / tile cols)
    gemm_wave_s: tuple[float, ...]  # seconds of one wave of full tiles, all layers of all stages
    gemm_token_s: tuple[float, ...]  # seconds per token per rank (the roofline, used without an SM count)
    gemm_bytes_s: tuple[float, ...]  # seconds to stream the GEMM's weights, all layers of all stages
    sms: int  # 0: tactics fill the SMs (or no SM count), the dense GEMMs are plain rooflines
    tile_rows: int
    router_bytes_s: float
    moe_flop_s: float  # seconds per token of the routed experts (all MoE layers)
    moe_bytes_s: float  # seconds to stream one touched expert's shard (all MoE layers)
    experts: int
    top_k: int
    load_z: float  # expert_load_terms: the most loaded EP rank carries (1 + z x sqrt(a / tokens + b)) x the mean
    load_a: float
    load_b: float
    pair_s: float  # seconds per causal query-key pair per rank (all layers)
    kv_flop_s: float  # seconds per cached token read per rank, compute and HBM
    kv_bytes_s: float
    head_flop_s: float
    head_bytes_s: float
    dp: int
    comm_grid: tuple[float, ...]
    comm_s: tuple[float, ...]
    transfer_same_node: tuple[float, float]  # (seconds, seconds per token) of a KV hand-off
    transfer_other_node: tuple[float, float]
    draft_tokens: int = 0
    acceptance_length: float = 1.0
    draft: InferenceStepCost | None = None  # one forward of the MTP draft module (no step overhead)

    def _pass_s(self, prefill_tokens: float, prefill_attn_pairs: float, decode_seqs: float, decode_kv_tokens: float,
                queries: int = 1) -> float:
        """One forward pass: ``prefill_tokens`` new prompt tokens (``prefill_attn_pairs`` causal query-key pairs),
        and ``decode_seqs`` sequences of ``queries`` tokens each over ``decode_kv_tokens`` cached tokens in all (the
        cache read once, its query-key pairs ``queries`` times)."""
        tokens = prefill_tokens + decode_seqs * queries
        if tokens <= 0:
            return 0.0
        dp = self.dp
        rank = tokens / dp
        t = self.overhead_s + self.router_bytes_s
        for tiles_n, wave_s, token_s, bytes_s in zip(self.gemm_tiles_n, self.gemm_wave_s, self.gemm_token_s,
                                                     self.gemm_bytes_s, strict=True):
            if self.sms:  # gemm_waves_s, one GEMM at a time
                rows = self.tile_rows
                flop_s = ceil(ceil(rank / rows) * tiles_n / self.sms) * wave_s * min(rank, rows) / rows
            else:
                flop_s = token_s * rank
            t += max(flop_s, bytes_s)
        if self.experts:
            touched = self.experts * (1.0 - (1.0 - self.top_k / self.experts) ** tokens)
            peak = 1.0 + self.load_z * sqrt(self.load_a / tokens + self.load_b) if self.load_z else 1.0
            t += max(self.moe_flop_s * tokens * peak, self.moe_bytes_s * touched)
        extra = decode_seqs * (queries - 1)  # the drafts' own keys beside the cache
        t += max(self.pair_s * prefill_attn_pairs / dp
                 + self.kv_flop_s * (queries * decode_kv_tokens + extra * queries / 2.0) / dp,
                 self.kv_bytes_s * (decode_kv_tokens + extra) / dp)
        seqs = (decode_seqs * queries + (1 if prefill_tokens else 0)) / dp
        t += max(self.head_flop_s * seqs, self.head_bytes_s)
        grid = self.comm_grid
        i = bisect_left(grid, tokens)
        if i == 0:
            t += self.comm_s[0]
        elif i >= len(grid):
            t += self.comm_s[-1] * tokens / grid[-1]
        else:
            x0, x1 = grid[i - 1], grid[i]
            y0, y1 = self.comm_s[i - 1], self.comm_s[i]
            t += y0 + (y1 - y0) * (tokens - x0) / (x1 - x0)
        return t

    def iteration_s(self, prefill_tokens: int, prefill_attn_pairs: float, decode_seqs: int,
                    decode_kv_tokens: int) -> float:
        """One engine iteration: the target's pass (each decoding sequence verifying 1 + d tokens), then the d draft
        forwards, the first over the pass's tokens, the others over one token for each decoding sequence and a
        prompt that ends here (``step_s`` without d)."""
        d = self.draft_tokens
        t = self._pass_s(prefill_tokens, prefill_attn_pairs, decode_seqs, decode_kv_tokens, 1 + d)
        if d and self.draft is not None:
            t += self.draft._pass_s(prefill_tokens, prefill_attn_pairs, decode_seqs, decode_kv_tokens, 1 + d)
            later = decode_seqs + (1 if prefill_tokens else 0)
            t += (d - 1) * self.draft._pass_s(0, 0.0, later, decode_kv_tokens, 1)
        return t

    def step_s(self, prefill_tokens: int, prefill_attn_pairs: float, decode_seqs: int,
               decode_kv_tokens: int) -> float:
        """One iteration in which each of ``decode_seqs`` sequences gains one token over ``decode_kv_tokens`` cached
        tokens in all, beside ``prefill_tokens`` new prompt tokens (``prefill_attn_pairs`` causal query-key pairs).
        With speculative decoding an engine iteration yields ``acceptance_length`` tokens a sequence: its decode
        part counts 1 / acceptance_length of it, the prefill its whole marginal cost."""
        if not self.draft_tokens:
            return self._pass_s(prefill_tokens, prefill_attn_pairs, decode_seqs, decode_kv_tokens)
        t = self.iteration_s(prefill_tokens, prefill_attn_pairs, decode_seqs, decode_kv_tokens)
        if decode_seqs:
            t -= (1.0 - 1.0 / self.acceptance_length) * self.iteration_s(0, 0.0, decode_seqs, decode_kv_tokens)
        return t

    def _pass_many(self, prefill: np.ndarray, pairs: np.ndarray, decode: np.ndarray, kv: np.ndarray,
                   queries: int = 1) -> np.ndarray:
        """``_pass_s`` over arrays at once (the same arithmetic)."""
        tokens = prefill + decode * queries
        dp = self.dp
        rank = (tokens / dp)[..., None]
        tiles_n, wave_s = np.asarray(self.gemm_tiles_n), np.asarray(self.gemm_wave_s)
        if self.sms:
            rows = self.tile_rows
            flop_s = np.ceil(np.ceil(rank / rows) * tiles_n / self.sms) * wave_s * np.minimum(rank, rows) / rows
        else:
            flop_s = np.asarray(self.gemm_token_s) * rank
        t = self.overhead_s + self.router_bytes_s + np.sum(np.maximum(flop_s, np.asarray(self.gemm_bytes_s)), axis=-1)
        if self.experts:
            touched = self.experts * (1.0 - (1.0 - self.top_k / self.experts) ** tokens)
            peak = (1.0 + self.load_z * np.sqrt(self.load_a / np.maximum(tokens, 1e-300) + self.load_b)
                    if self.load_z else 1.0)
            t = t + np.maximum(self.moe_flop_s * tokens * peak, self.moe_bytes_s * touched)
        extra = decode * (queries - 1)
        t = t + np.maximum(self.pair_s * pairs / dp + self.kv_flop_s * (queries * kv + extra * queries / 2.0) / dp,
                           self.kv_bytes_s * (kv + extra) / dp)
        seqs = (decode * queries + (prefill > 0)) / dp
        t = t + np.maximum(self.head_flop_s * seqs, self.head_bytes_s)
        grid = np.asarray(self.comm_grid)
        comm = np.asarray(self.comm_s)
        inside = np.interp(tokens, grid, comm)
        t = t + np.where(tokens > grid[-1], comm[-1] * tokens / grid[-1], inside)
        out: np.ndarray = np.where(tokens > 0, t, 0.0)
        return out

    def _iteration_many(self, prefill: np.ndarray, pairs: np.ndarray, decode: np.ndarray,
                        kv: np.ndarray) -> np.ndarray:
        """``iteration_s`` over arrays at once."""
        d = self.draft_tokens
        t = self._pass_many(prefill, pairs, decode, kv, 1 + d)
        if d and self.draft is not None:
            t = t + self.draft._pass_many(prefill, pairs, decode, kv, 1 + d)
            later = decode + (prefill > 0)
            t = t + (d - 1) * self.draft._pass_many(np.zeros_like(later), np.zeros_like(later), later, kv)
        return t

    def step_s_many(self, prefill_tokens: np.ndarray, prefill_attn_pairs: np.ndarray, decode_seqs: np.ndarray,
                    decode_kv_tokens: np.ndarray) -> np.ndarray:
        """``step_s`` over arrays at once (the same arithmetic; token counts may be fractional means), so a sizing
        screen can price every batch of a plan in one numpy pass."""
        prefill = np.asarray(prefill_tokens, dtype=np.float64)
        pairs = np.asarray(prefill_attn_pairs, dtype=np.float64)
        decode = np.asarray(decode_seqs, dtype=np.float64)
        kv = np.asarray(decode_kv_tokens, dtype=np.float64)
        if not self.draft_tokens:
            return self._pass_many(prefill, pairs, decode, kv)
        zeros = np.zeros_like(decode)
        decode_only = self._iteration_many(zeros, zeros, decode, kv)
        t = self._iteration_many(prefill, pairs, decode, kv) - (1.0 - 1.0 / self.acceptance_length) * decode_only
        out: np.ndarray = t
        return out

    def kv_transfer_s(self, tokens: int, same_node: bool) -> float:
        """Seconds to hand ``tokens`` tokens of KV cache from a prefill replica to a decode replica (every GPU
        sends its shard at once, over NVLink within a node, else the network)."""
        base, per_token = self.transfer_same_node if same_node else self.transfer_other_node
        return base + per_token * tokens if tokens > 0 else 0.0


def step_cost(model: ModelSpec, cluster: Cluster, plan: InferencePlan) -> InferenceStepCost:
    """Price a replica's iteration coefficients once (``plan.batch`` and lengths only size the memory check)."""
    gpu = cluster.catalog.gpu(cluster.system.gpu)
    check_inference_plan(model, plan, gpu)
    st = _stage(model, plan, gpu)
    pp = plan.pp
    mem = inference_memory(model, plan, gpu)
    free = mem.usable_bytes - mem.weights_bytes - mem.activations_bytes
    kv_token = kv_bytes_per_token_gpu(model, plan)
    capacity = int(max(0.0, free) / kv_token) * plan.dp
    comm_s = []
    for tokens in _GRID:  # every stage's collectives, and the sends across each stage boundary once
        layers = dict.fromkeys(LAYERS, 0.0)
        _layer_comm(model, plan, cluster, tokens / plan.dp, tokens, layers)
        sends = dict.fromkeys(LAYERS, 0.0)
        _pipeline_sends(model, plan, cluster, tokens / plan.dp, sends)
        comm_s.append(pp * sum(layers.values()) + sum(sends.values()))
    per_shard = kv_bytes_per_token_model(model, plan.kv) / plan.gpus  # every GPU sends its shard at once
    transfers = _transfer(cluster, 2, per_shard), _transfer(cluster, 1, per_shard)
    draft = None
    if plan.draft_tokens:
        _, _, ds = _draft_parts(model, plan, gpu)
        draft_comm = []
        for tokens in _GRID:
            layers = dict.fromkeys(LAYERS, 0.0)
            _draft_comm(model, plan, cluster, tokens / plan.dp, tokens, layers)
            draft_comm.append(sum(layers.values()))
        draft = _coefficients(ds, plan, 1, ds.kernels * kernel_latency_s(), tuple(draft_comm), 0, transfers)
    return replace(_coefficients(st, plan, pp, step_overhead_s() + pp * st.kernels * kernel_latency_s(),
                                 tuple(comm_s), capacity, transfers),
                   draft_tokens=plan.draft_tokens, acceptance_length=plan.acceptance_length, draft=draft)


def _coefficients(st: _Stage, plan: InferencePlan, pp: int, overhead_s: float, comm_s: tuple[float, ...],
                  capacity: int, transfers: tuple[tuple[float, float], tuple[float, float]]) -> InferenceStepCost:
    """The iteration coefficients of ``pp`` stages like ``st`` (the target, or the one-layer draft module)."""
    moe_flop = moe_bytes = 0.0
    if st.experts and st.moe_layers:
        moe_flop = pp * st.moe_layers * 2.0 * st.top_k * st.expert_share_params / st.expert_gemm_rate
        moe_bytes = pp * st.moe_layers * st.expert_share_params * st.weight_bytes / st.hbm_rate
    load_z, load_a, load_b = expert_load_terms(st.experts, st.top_k, plan.ep)
    shapes = np.asarray(st.dense_gemms, dtype=np.float64)
    n, k, count = shapes[:, 0], shapes[:, 1], pp * shapes[:, 2]
    rates, weight_bytes = np.asarray(st.gemm_rates), np.asarray(st.gemm_bytes)
    rows, cols = gemm_tile()
    return InferenceStepCost(
        kv_capacity_tokens=capacity,
        overhead_s=overhead_s,
        gemm_tiles_n=tuple(np.ceil(n / cols).tolist()),
        gemm_wave_s=tuple((2.0 * rows * cols * k * st.sms * count / rates).tolist()),
        gemm_token_s=tuple((2.0 * n * k * count / rates).tolist()),
        gemm_bytes_s=tuple((n * k * count * weight_bytes / st.hbm_rate).tolist()),
        sms=st.sms, tile_rows=rows,
        router_bytes_s=pp * st.moe_layers * st.router_params * ACT_BYTES / st.hbm_rate,
        moe_flop_s=moe_flop, moe_bytes_s=moe_bytes, experts=st.experts, top_k=st.top_k, load_z=load_z,
        load_a=load_a, load_b=load_b,
        pair_s=pp * st.layers * st.attn_flops_pair_layer / st.attention_rate,
        kv_flop_s=pp * st.layers * st.attn_flops_kv_layer / st.decode_attention_rate,
        kv_bytes_s=pp * st.layers * st.kv_bytes_token_layer * st.kv_reads / st.hbm_rate,
        head_flop_s=2.0 * st.head_params / st.bf16_rate, head_bytes_s=st.head_params * ACT_BYTES / st.hbm_rate,
        dp=plan.dp, comm_grid=_GRID, comm_s=comm_s,
        transfer_same_node=transfers[0], transfer_other_node=transfers[1],
    )


def _transfer(cluster: Cluster, ranks_per_node: int, bytes_per_token: float) -> tuple[float, float]:
    """(latency, seconds per token) of a send between two GPUs: two prices of large transfers give the slope."""
    small, big = 1024.0, 1024.0 * 1024
    t_small, _ = group_comm(cluster, 2, ranks_per_node, "send_recv", small * bytes_per_token)
    t_big, _ = group_comm(cluster, 2, ranks_per_node, "send_recv", big * bytes_per_token)
    slope = (t_big - t_small) / (big - small)
    return max(0.0, t_small - slope * small), slope


def kv_cache_table(model: ModelSpec, plan: InferencePlan, contexts: np.ndarray) -> np.ndarray:
    """KV bytes per GPU of the plan's batch at each context length (vectorised)."""
    return plan.batch / plan.dp * contexts * kv_bytes_per_token_gpu(model, plan)
