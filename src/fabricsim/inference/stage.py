"""What one GPU of a pipeline stage holds and the rates it runs at (``_Stage``), and the compute, HBM and kernel
seconds of one forward pass on it: every weight GEMM a roofline at its own reduction depth (dense ones in tile waves
under fixed tactics), the routed experts the tokens touch (their math plus their weight traffic), attention over the
prompt or the cache, and the LM head."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fabricsim.caching import ByIdentity
from fabricsim.catalog import GPU
from fabricsim.inference.experts import expert_load_peak, touched_experts
from fabricsim.inference.params import kernel_latency_s, layer_kernels
from fabricsim.inference.plan import ACT_BYTES, LAYERS, InferencePlan
from fabricsim.model import (
    WEIGHT_BYTES,
    ModelSpec,
    achievable_flops_per_s,
    achievable_hbm_bytes_per_s,
    attention_flops_per_s,
    depth_factor,
    fp4_matmul_efficiency,
    fp8_matmul_efficiency,
    gemm_tile,
    kv_bytes_per_token_layer,
    kv_heads_per_gpu,
    sm80_kernel_fraction,
)


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
                         plan.kernel("gqa_kernel"), plan.kernel("moe_sm80_kernels"), plan.kernel("fixed_gemm_tiles"),
                         plan.kernel("fused_gate_up"), ByIdentity(gpu), plan.attention_format,
                         plan.attention_out_format, plan.kernel("fp8_mla_decode"))


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
    # the routed experts' GEMMs: gate and up reduce over the hidden width, down over the expert's width split
    # across its expert-TP ranks (tp x dp / ep GPUs hold each expert once), FLOP-weighted; SM80 MoE kernels run
    # 16-bit math (8-bit weights dequantised in the main loop) at the GPU's SM80 fraction
    expert_format, scale = ("bf16", sm80_kernel_fraction(gpu)) if moe_sm80_kernels else (weights, 1.0)
    expert_rate = 0.0
    if model.moe is not None:
        inputs = model.mlp_matrices - 1
        down_k = model.expert_ffn_hidden * ep / (tp * dp)
        expert_rate = scale * model.mlp_matrices / (inputs / _effective_gemm_rate(gpu, expert_format, model.hidden)
                                                     + 1.0 / _effective_gemm_rate(gpu, expert_format, down_k))
    dense_gemms = _dense_gemms(model, tp, layers, dense_layers, moe_layers, fused_gate_up)
    formats = (attention_out_weights, attention_weights) + (weights,) * (len(dense_gemms) - 2)  # O, QKV, then MLPs
    attention_rate = attention_flops_per_s(gpu, model.attention_flops_per_exp())  # priced as training prices it
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
        hbm_rate=achievable_hbm_bytes_per_s(gpu),
        kv_bytes_token_layer=kv_bytes_per_token_layer(model, tp, kv),
        kv_reads=1.0 if gqa_kernel or model.mla is not None else (model.heads // tp) / kv_heads_per_gpu(model, tp),
        attn_flops_pair_layer=model.attention_flops_per_pair() / tp,
        attn_flops_kv_layer=model.attention_flops_per_pair(absorbed=True) / tp, hidden=model.hidden,
        dense_gemms=dense_gemms, gemm_bytes=tuple(WEIGHT_BYTES[f] for f in formats),
        gemm_rates=tuple(_effective_gemm_rate(gpu, f, k) for f, (_, k, _) in zip(formats, dense_gemms, strict=True)),
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


def _effective_gemm_rate(gpu: GPU, weights: str, k: float) -> float:
    """FLOP/s of a weight GEMM in this format at reduction depth ``k`` (its input width on this GPU): the format's
    rate x model.depth_factor at the format's speed-up over BF16, as the training model prices each GEMM: a
    row-parallel GEMM under high TP (O and down projections, K = width / tp) runs below
    the best shape."""
    rate, precision = _gemm_rate(gpu, weights)
    scale = rate / achievable_flops_per_s(gpu) if precision != "bf16" else 1.0
    return float(rate * depth_factor(k, scale))


def _roof(flops_s: float, bytes_s: float, out: dict[str, float]) -> None:
    """Add a roofline term to the breakdown under the resource that bounds it."""
    if flops_s >= bytes_s:
        out["compute"] += flops_s
    else:
        out["hbm"] += bytes_s


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
        # grouped (per-expert) GEMMs stream each touched expert's weights beside their math, not under it: compute
        # plus weight traffic, as model.grouped_gemm_efficiency prices the training model's (DeepGEMM's grouped
        # and vLLM PR #23280's fused-MoE M sweeps), where a dense GEMM is the larger of the two
        out["compute"] += st.moe_layers * flops / st.expert_gemm_rate
        out["hbm"] += st.moe_layers * bytes_read / st.hbm_rate
        _roof(0.0, st.moe_layers * st.router_params * ACT_BYTES / st.hbm_rate, out)
        # the routed copies: each token's hidden state expanded into its top-k rows in expert order before the
        # grouped GEMMs and the k expert outputs gathered back and summed after (TensorRT-LLM moe_kernels.cu
        # expandInputRows / finalizeMoeRouting; vLLM and SGLang fused_moe's per-(token, k) output cache and
        # moe_sum): every TP rank of an expert-TP group permutes all of its tokens, an EP rank the rows it receives
        rows = (tokens_group * st.top_k * peak / st.ep) if st.ep > 1 else tokens_rank * st.top_k
        _roof(0.0, st.moe_layers * 2.0 * (rows + tokens_rank) * st.hidden * ACT_BYTES / st.hbm_rate, out)
    kv_pairs = kv_rank if kv_pairs_rank is None else kv_pairs_rank
    attn_s = st.layers * (st.attn_flops_pair_layer * pairs_rank / st.attention_rate
                          + st.attn_flops_kv_layer * kv_pairs / st.decode_attention_rate)
    _roof(attn_s,
          st.layers * kv_rank * st.kv_bytes_token_layer * st.kv_reads / st.hbm_rate, out)
    if last:
        _roof(2.0 * head_tokens_rank * st.head_params / st.bf16_rate, st.head_params * ACT_BYTES / st.hbm_rate, out)
    out["other"] += st.kernels * kernel_latency_s()
    return out
