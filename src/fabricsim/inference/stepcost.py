"""The per-iteration cost of one serving replica (``InferenceStepCost``): coefficients priced once from the stage,
the collectives interpolated over a grid of token counts, so the serving simulator prices any batch in microseconds
(scalar and vectorised forms of the same arithmetic)."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, replace
from math import ceil

import numpy as np

from fabricsim.comm import Cluster
from fabricsim.inference.comms import _layer_comm, _pipeline_sends, _transfer
from fabricsim.inference.draft import _draft_comm, _draft_parts
from fabricsim.inference.engines import exposed_host_s
from fabricsim.inference.experts import ExpertLoad, expert_load_terms
from fabricsim.inference.memory import inference_memory, kv_bytes_per_token_gpu
from fabricsim.inference.params import kernel_latency_s
from fabricsim.inference.plan import ACT_BYTES, LAYERS, InferencePlan, check_inference_plan
from fabricsim.inference.stage import _Stage, _stage
from fabricsim.model import ModelSpec, gemm_tile, kv_bytes_per_token_model

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
    load: ExpertLoad  # expert_load_terms: how much more than the mean the most loaded EP rank carries
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
    host_s: float = 0.0  # the engine's host work per iteration
    host_per_seq_s: float = 0.0  # and per sequence in it
    host_overlapped: bool = False  # run beside the GPU's work (only what exceeds it shows), else added to it
    moe_copy_s: float = 0.0  # seconds per hidden-sized row the routed copies write and read (all MoE layers)
    ep: int = 1  # expert-parallel ranks: an EP rank permutes the rows it receives, an expert-TP rank all its tokens

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
            t += self.moe_flop_s * tokens * self.load.peak(tokens) + self.moe_bytes_s * touched  # grouped GEMMs
            copies = tokens * self.top_k * self.load.peak(tokens) / self.ep if self.ep > 1 else rank * self.top_k
            t += self.moe_copy_s * (copies + rank)
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
        host = self.host_s + self.host_per_seq_s * (decode_seqs + (1 if prefill_tokens else 0))
        return t + float(exposed_host_s(host, self.host_overlapped, t))

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
            t = t + self.moe_flop_s * tokens * self.load.peak_many(tokens) + self.moe_bytes_s * touched
            rows = (tokens * self.top_k * self.load.peak_many(tokens) / self.ep if self.ep > 1
                    else tokens / dp * self.top_k)
            t = t + self.moe_copy_s * (rows + tokens / dp)
        extra = decode * (queries - 1)
        t = t + np.maximum(self.pair_s * pairs / dp + self.kv_flop_s * (queries * kv + extra * queries / 2.0) / dp,
                           self.kv_bytes_s * (kv + extra) / dp)
        seqs = (decode * queries + (prefill > 0)) / dp
        t = t + np.maximum(self.head_flop_s * seqs, self.head_bytes_s)
        grid = np.asarray(self.comm_grid)
        comm = np.asarray(self.comm_s)
        inside = np.interp(tokens, grid, comm)
        t = t + np.where(tokens > grid[-1], comm[-1] * tokens / grid[-1], inside)
        host = self.host_s + self.host_per_seq_s * (decode + (prefill > 0))
        t = t + exposed_host_s(host, self.host_overlapped, t)
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


def with_kv_handoff(cost: InferenceStepCost, model: ModelSpec, cluster: Cluster, prefill: InferencePlan,
                    decode: InferencePlan) -> InferenceStepCost:
    """``cost`` (a prefill pool's) with its KV hand-off priced for a decode pool of another plan: each side moves
    its shards at once, so the side with fewer GPUs carries the larger shard and sets the time."""
    per_shard = kv_bytes_per_token_model(model, prefill.kv) / min(prefill.gpus, decode.gpus)
    return replace(cost, transfer_same_node=_transfer(cluster, 2, per_shard),
                   transfer_other_node=_transfer(cluster, 1, per_shard))


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
    engine = plan.engine_profile
    return replace(_coefficients(st, plan, pp, pp * st.kernels * kernel_latency_s(), tuple(comm_s), capacity,
                                 transfers),
                   draft_tokens=plan.draft_tokens, acceptance_length=plan.acceptance_length, draft=draft,
                   host_s=engine.host_step_s, host_per_seq_s=engine.host_per_seq_s,
                   host_overlapped=engine.host_overlapped)


def _coefficients(st: _Stage, plan: InferencePlan, pp: int, overhead_s: float, comm_s: tuple[float, ...],
                  capacity: int, transfers: tuple[tuple[float, float], tuple[float, float]]) -> InferenceStepCost:
    """The iteration coefficients of ``pp`` stages like ``st`` (the target, or the one-layer draft module)."""
    moe_flop = moe_bytes = 0.0
    if st.experts and st.moe_layers:
        moe_flop = pp * st.moe_layers * 2.0 * st.top_k * st.expert_share_params / st.expert_gemm_rate
        moe_bytes = pp * st.moe_layers * st.expert_share_params * st.weight_bytes / st.hbm_rate
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
        moe_flop_s=moe_flop, moe_bytes_s=moe_bytes, experts=st.experts, top_k=st.top_k,
        load=expert_load_terms(st.experts, st.top_k, plan.ep),
        moe_copy_s=pp * st.moe_layers * 2.0 * st.hidden * ACT_BYTES / st.hbm_rate if st.experts else 0.0,
        ep=plan.ep,
        pair_s=pp * st.layers * st.attn_flops_pair_layer / st.attention_rate,
        kv_flop_s=pp * st.layers * st.attn_flops_kv_layer / st.decode_attention_rate,
        kv_bytes_s=pp * st.layers * st.kv_bytes_token_layer * st.kv_reads / st.hbm_rate,
        head_flop_s=2.0 * st.head_params / st.bf16_rate, head_bytes_s=st.head_params * ACT_BYTES / st.hbm_rate,
        dp=plan.dp, comm_grid=_GRID, comm_s=comm_s,
        transfer_same_node=transfers[0], transfer_other_node=transfers[1],
    )
