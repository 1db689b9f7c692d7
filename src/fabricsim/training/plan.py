"""Parallelism plan: how a training step is split over GPUs (TP, PP, DP/ZeRO, CP, EP), batch and schedule.

GPUs = tp * pp * dp * cp. Expert parallelism does not add GPUs: as in Megatron-Core's MoE parallel folding
(Liu et al. 2025, arXiv:2504.14960; ``--expert-tensor-parallel-size``), expert layers re-fold the tp * cp * dp GPUs
of a pipeline stage into expert-TP (etp, default tp) x ep x expert-DP, so etp * ep must divide tp * cp * dp: EP may
span the attention's TP ranks (etp = 1, ep = tp * dp: DeepSeek-V3 with TP 2 and EP 64 on 1,024 GPUs).
Micro-batches per step: m = gbs / (mbs * dp).

Defaults (each the framework's own default or documented practice, nothing tuned per case):
Defaults are what today's Megatron-Core / NeMo training recipes run (NVIDIA/NeMo nemo/collections/llm/recipes:
``MegatronMixedPrecision`` bf16, ``use_distributed_optimizer=True``, ``overlap_grad_reduce=True``,
``overlap_param_gather=True``, TransformerEngine fused attention, ``sequence_parallel`` with tp > 1); each has an
explicit switch, so a 2021-era run states ``flash_attention=False, zero=0, overlap_*=False``:
- ``mbs`` = 1, as NVIDIA/Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh (--micro-batch-size 1 with
  TP 8, PP 16); it is always valid, so gbs need only be divisible by dp.
- ``schedule``: "interleaved" when virtual_stages > 1, else "1f1b".
- ``recompute`` = "none"; ``zero`` = 1 (distributed optimizer: optimizer state sharded over data parallelism).
- ``grad_dtype`` = "fp32": gradients accumulate and reduce in an fp32 main-grad buffer (Megatron-LM forces
  ``accumulate_allreduce_grads_in_fp32`` with bf16; NeMo ``bf16_mixed`` ``grad_reduce_in_fp32=True``); "bf16" as
  NeMo's FP8 performance scripts set (``grad_reduce_in_fp32 = False``): half the gradient memory and DP traffic;
  "fp16" as Megatron-LM runs ``--fp16`` without ``--accumulate-allreduce-grads-in-fp32`` (megatron/arguments.py:
  only bf16 forces fp32; megatron/model/distributed.py ``_get_buffer_type``: the buffer takes the parameter
  dtype), as the 2021 SC21 runs did (examples/sc21/CONFIG.sh): the same 2 bytes as "bf16".
- ``precision`` = "bf16"; "fp8" runs the weight GEMMs in FP8 as TransformerEngine does (BF16 elsewhere).
- ``flash_attention`` on (fused attention: no materialised scores, causal block skipping).
- ``zero3_gathers_per_layer`` = 1 and ``zero3_reduce_bucket_params`` = None: a ZeRO-3/FSDP layer is gathered and
  its gradients reduce-scattered by one collective each (PyTorch FSDP and FSDP2 wrap each transformer block as one
  unit); DeepSpeed's ZeRO-3 gathers each sub-module's parameters with its own call and reduces gradients in
  buckets, and every call pays the collective's latency, which grows with the ranks of a ring.
- ``fsdp_copy_out`` off: the gathered layer is used where it lands (FSDP1's flat parameter, DeepSpeed, Megatron);
  PyTorch FSDP2 (per-parameter sharding) copies each all-gathered layer out of the flat output into its parameters
  on the compute stream (``foreach_all_gather_copy_out``: ``split_with_sizes_copy``), a read and a write of the
  layer's weights that nothing hides.
- ``attention_kernel`` = "native": fused attention at the GPU generation's own rate (TransformerEngine's cuDNN
  attention; FlashAttention-3 class on Hopper); "fa2" is the FlashAttention-2 generation (the flash-attn 2 package,
  PyTorch SDPA's flash backend): Ampere-style kernels (cp.async, mma.sync, no TMA/WGMMA) that reach 35% of an
  H100's peak where FlashAttention-3 reaches 75% (Shah et al. 2024, arXiv:2407.08608), priced at the GPU's
  ``sm80_kernel_fraction`` of the native rate.
- ``kernels`` = "fused": norms, bias-dropout-add and activations fused as Megatron-Core/TE run them; "eager" is
  PyTorch eager mode (torchtitan without torch.compile), one kernel per element-wise op.
- ``sequence_parallel``: on when tp > 1 (Korthikanti et al. 2022; Megatron-Core recipes).
- ``overlap_grad_reduce`` and ``overlap_param_gather`` on; ``tp_comm_overlap`` off (Megatron-Core's default; NeMo
  turns it on per recipe, e.g. its large-model H100 performance configurations).

Layers need not divide evenly over pp * virtual_stages. ``pp_layout`` gives the layers of each stage explicitly
(``7,8,...,8,7``: Llama 3 405B ran 126 layers on pp=16 with the first and last stage one layer lighter, Dubey et
al. 2024 sec. 3.3.2); without it, stages get ceil(layers / pp) layers and the shortfall is taken from the first
and last stages alternately (they also carry the embedding and the LM head). A stage's layers are cut into
virtual_stages consecutive chunks (the first chunks take the extra); chunk j of the model runs on stage j % pp.
``check_plan`` warns when stages are uneven, since the largest stage sets the pace.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fabricsim.caching import ByIdentity
from fabricsim.errors import SpecError, spec_error
from fabricsim.model import ModelSpec

DEFAULT_MBS = 1
DEFAULT_ORDER = "tp-cp-ep-dp-pp"
DIMENSIONS = ("tp", "cp", "ep", "dp", "pp")

DEFAULT_ZERO = 1

Schedule = Literal["1f1b", "interleaved"]
Recompute = Literal["none", "selective", "full"]
Precision = Literal["bf16", "fp8"]
Kernels = Literal["fused", "eager"]
AttentionKernel = Literal["native", "fa2"]
MoEBalance = Literal["forced", "random", "skewed"]
MoEDispatcher = Literal["alltoall", "deepep"]
GradDtype = Literal["fp32", "bf16", "fp16"]
# bytes per gradient element in the main-grad buffer and its reduction
GRAD_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


@lru_cache(maxsize=256)
def parse_order(order: str) -> tuple[str, ...]:
    """``"tp-cp-ep-dp-pp"`` -> ('tp', 'cp', 'ep', 'dp', 'pp'); innermost (fastest-varying rank) first (cached:
    every plan placed parses it; errors are raised again, not cached)."""
    parts = tuple(p.strip().lower() for p in order.split("-"))
    unknown = [p for p in parts if p not in DIMENSIONS]
    if unknown:
        raise SpecError(f"unknown dimension {unknown[0]!r} in {order!r}; allowed: {', '.join(DIMENSIONS)}",
                        field="order")
    if len(set(parts)) != len(parts):
        raise SpecError(f"{order!r} names a dimension twice", field="order")
    missing = [d for d in ("tp", "cp", "dp", "pp") if d not in parts]
    if missing:
        raise SpecError(f"{order!r} must name tp, cp, dp and pp (missing {', '.join(missing)})", field="order")
    return parts


MAX_COUNT = 2**24  # GPUs, parallel sizes and batch sizes: far above any cluster, far below an overflow
MAX_SEQ = 2**24  # tokens per sequence (16M)


class ParallelPlan(BaseModel):
    """One training configuration: parallel sizes, batch, sequence, pipeline schedule, recompute and ZeRO."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpus: int | None = Field(None, ge=1, le=MAX_COUNT,
                             description="optional; must equal tp*pp*dp*cp, or gives dp when dp is unset")
    tp: int = Field(1, ge=1, le=MAX_COUNT, description="tensor parallel size")
    pp: int = Field(1, ge=1, le=MAX_COUNT, description="pipeline parallel size (stages)")
    dp: int = Field(ge=1, le=MAX_COUNT, description="data parallel size (set it, or set gpus)")
    cp: int = Field(1, ge=1, le=MAX_COUNT,
                    description="context parallel size (sequence split across GPUs in attention)")
    ep: int = Field(1, ge=1, le=MAX_COUNT, description="expert parallel size (etp*ep divides tp*cp*dp)")
    etp: int | None = Field(None, ge=1, le=MAX_COUNT,
                            description="expert tensor parallel size (default tp; Megatron-Core MoE parallel folding)")
    mbs: int = Field(ge=1, le=MAX_COUNT, description=f"micro-batch size in sequences; default {DEFAULT_MBS}")
    gbs: int = Field(ge=1, le=MAX_COUNT, description="global batch size in sequences per step")
    seq: int = Field(ge=1, le=MAX_SEQ, description="sequence length in tokens")
    virtual_stages: int = Field(1, ge=1, le=MAX_COUNT, description="model chunks per pipeline stage (interleaved 1F1B)")
    schedule: Schedule = Field(description="'1f1b', or 'interleaved' (default when virtual_stages > 1)")
    recompute: Recompute = "none"
    zero: int = Field(DEFAULT_ZERO, ge=0, le=3,
                      description="ZeRO stage: 1 shards optimizer (distributed optimizer), 2 +grads, 3 (FSDP) +weights")
    precision: Precision = Field("bf16", description="'bf16', or 'fp8' (TransformerEngine FP8 GEMMs)")
    grad_dtype: GradDtype = Field("fp32", description="gradient buffer and reduction dtype: 'fp32', 'bf16' or 'fp16'")
    flash_attention: bool = Field(True, description="fused attention kernels (no materialised scores)")
    kernels: Kernels = Field("fused", description="element-wise kernels: 'fused' (Megatron/TE) or 'eager' (PyTorch)")
    zero3_gathers_per_layer: int = Field(
        1, ge=1, le=64, description="ZeRO-3/FSDP all-gathers per layer and pass: 1 gathers a layer at once (an FSDP"
        " unit); DeepSpeed gathers each sub-module's parameters by its own call, each paying the collective's latency")
    zero3_reduce_bucket_params: float | None = Field(
        None, gt=0, description="parameters per ZeRO-3 gradient reduce-scatter (DeepSpeed reduce_bucket_size); None:"
        " one per layer")
    fsdp_copy_out: bool = Field(
        False, description="FSDP2: each all-gathered layer is copied out of the flat gather output into its"
        " parameters on the compute stream (split_with_sizes_copy), an exposed read and write of its weights")
    attention_kernel: AttentionKernel = Field(
        "native", description="fused attention kernels: 'native' (the GPU generation's own: cuDNN/TransformerEngine,"
        " FlashAttention-3 on Hopper) or 'fa2' (FlashAttention-2's Ampere-style kernels, at the GPU's"
        " sm80_kernel_fraction on later generations)")
    sequence_parallel: bool = Field(description="Megatron sequence parallelism; default on when tp > 1")
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    tp_comm_overlap: bool = Field(False, description="overlap TP collectives with the GEMMs (TE userbuffers)")
    dropout: bool = Field(True, description="hidden dropout on (Megatron-LM's default hidden_dropout 0.1: 1-byte "
                          "masks kept for the backward); off as Llama/DeepSeek/Qwen/GPT-OSS recipes run it")
    moe_balance: MoEBalance = Field(
        "random", description="expert load: forced (Megatron's moe_router_force_load_balancing, as benchmarks run), "
        "random (balanced top-k routing, its sampling noise only) or skewed (a trained router's measured skew)")
    moe_dispatcher: MoEDispatcher = Field(
        "alltoall", description="token dispatch: alltoall (NCCL all-to-all, a copy per routed expert) or deepep "
        "(DeepEP/HybridEP: a copy per destination node over the network, fanned out over NVLink)")
    capacity_factor: float | None = Field(None, gt=0, le=MAX_COUNT, allow_inf_nan=False,
                                          description="expert capacity as a multiple of the mean load; tokens beyond "
                                          "it are dropped (default: dropless)")
    ep_comm_overlap: bool = Field(False, description="overlap the MoE all-to-all of one micro-batch with another's "
                                  "compute (Megatron-Core --overlap-moe-expert-parallel-comm)")
    shared_expert_overlap: bool = Field(False, description="run the shared experts beside the same micro-batch's "
                                        "dispatch and combine (Megatron-Core --moe-shared-expert-overlap)")
    pp_layout: tuple[int, ...] | None = Field(None, description="layers per pipeline stage (sums to the layers)")
    order: str = Field(DEFAULT_ORDER, description="rank order, innermost first, as Megatron-Core's --order")

    @field_validator("capacity_factor", mode="before")
    @classmethod
    def _capacity_factor(cls, value: Any) -> Any:
        """One message for every bound (NaN is neither above 0 nor below the cap)."""
        if isinstance(value, int | float) and not isinstance(value, bool) and not 0 < value <= MAX_COUNT:
            raise ValueError(f"must be a finite number > 0 and <= {MAX_COUNT} (a multiple of the mean expert load; "
                             f"leave it out for dropless routing), got {value}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {k: v for k, v in data.items() if v is not None}
        tp = _as_int(data.get("tp", 1))
        pp = _as_int(data.get("pp", 1))
        cp = _as_int(data.get("cp", 1))
        gpus = _as_int(data.get("gpus"))
        for name, value in (("tp", tp), ("pp", pp), ("cp", cp), ("gpus", gpus)):
            if value is not None and value < 1:  # named here, before dp is derived from it (not 'dp: missing')
                raise SpecError(f"must be at least 1, got {value}", field=name)
        if "dp" not in data and gpus is not None and tp and pp and cp:
            per_replica = tp * pp * cp
            if gpus % per_replica:
                raise SpecError(f"{gpus} must be divisible by tp*pp*cp = {tp}*{pp}*{cp} = {per_replica}",
                                field="gpus")
            data["dp"] = gpus // per_replica
        if "dp" not in data and gpus is None:
            raise SpecError("give the GPU count (gpus = tp*pp*dp*cp) or the data-parallel size dp", field="gpus")
        data.setdefault("mbs", DEFAULT_MBS)
        v = _as_int(data.get("virtual_stages", 1))
        data.setdefault("schedule", "interleaved" if v is not None and v > 1 else "1f1b")
        data.setdefault("sequence_parallel", tp is not None and tp > 1)
        return data

    @model_validator(mode="after")
    def _check(self) -> ParallelPlan:
        product = self.tp * self.pp * self.dp * self.cp
        if self.gpus is not None and self.gpus != product:
            raise SpecError(
                f"{self.gpus} must equal tp*pp*dp*cp = {self.tp}*{self.pp}*{self.dp}*{self.cp} = {product}",
                field="gpus")
        if self.shared_expert_overlap and self.ep_comm_overlap:
            raise SpecError("--shared-expert-overlap and --ep-comm-overlap exclude each other: under the all-to-all "
                            "overlap the shared experts already run beside another micro-batch's dispatch "
                            "(Megatron-Core turns moe_shared_expert_overlap off there)", field="shared_expert_overlap")
        per_step = self.mbs * self.dp
        if self.gbs % per_step:
            raise SpecError(f"{self.gbs} must be divisible by mbs*dp = {self.mbs}*{self.dp} = {per_step}",
                            field="gbs")
        if self.schedule == "1f1b" and self.virtual_stages != 1:
            raise SpecError(f"virtual_stages ({self.virtual_stages}) > 1 needs schedule 'interleaved'",
                            field="schedule")
        if self.schedule == "interleaved" and (self.virtual_stages < 2 or self.pp < 2):
            raise SpecError(f"the interleaved schedule needs pp >= 2 and virtual_stages >= 2 "
                            f"(got pp={self.pp}, virtual_stages={self.virtual_stages})", field="schedule")
        folded = self.tp * self.cp * self.dp
        if folded % (self.expert_tp * self.ep):
            field = "ep" if self.etp is None else "etp"
            raise SpecError(f"etp*ep = {self.expert_tp}*{self.ep} = {self.expert_tp * self.ep} must divide tp*cp*dp = "
                            f"{self.tp}*{self.cp}*{self.dp} = {folded} (expert layers re-fold a stage's GPUs)",
                            field=field)
        if self.cp > 1 and self.seq % (2 * self.cp):
            raise SpecError(f"{self.seq} must be divisible by 2*cp = {2 * self.cp} "
                            "(load-balanced causal context parallelism)", field="seq")
        if self.sequence_parallel and self.tp > 1 and (self.seq // self.cp) % self.tp:
            raise SpecError(f"seq/cp = {self.seq // self.cp} must be divisible by tp ({self.tp}) "
                            "with sequence parallelism", field="seq")
        parse_order(self.order)
        if self.ep > 1 and "ep" not in parse_order(self.order):
            raise SpecError(f"{self.order!r} must name ep when ep > 1", field="order")
        if self.pp_layout is not None:
            if len(self.pp_layout) != self.pp:
                raise SpecError(f"gives {len(self.pp_layout)} stages, pp is {self.pp}", field="pp_layout")
            if min(self.pp_layout) < self.virtual_stages:
                raise SpecError(f"every stage needs at least virtual_stages = {self.virtual_stages} layers",
                                field="pp_layout")
        return self

    @classmethod
    def build(cls, **fields: Any) -> ParallelPlan:
        """Validate keyword fields; every error is a SpecError naming the field or the product that is off."""
        return cls.from_data(fields)

    @classmethod
    def from_data(cls, data: Any, source: str | None = None) -> ParallelPlan:
        if not isinstance(data, dict):
            raise SpecError("expected a mapping of plan fields (tp, pp, dp, gbs, seq, ...)", source=source)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise spec_error(exc, cls, source) from None

    # ---- derived quantities ----------------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        """GPUs used: tp * pp * dp * cp."""
        return self.tp * self.pp * self.dp * self.cp

    @property
    def microbatches(self) -> int:
        """Micro-batches per step on each pipeline: m = gbs / (mbs * dp)."""
        return self.gbs // (self.mbs * self.dp)

    @property
    def expert_tp(self) -> int:
        """Tensor-parallel size of expert weights: etp, else tp."""
        return self.tp if self.etp is None else self.etp

    @property
    def expert_dp(self) -> int:
        """Data-parallel size of expert weights: tp * cp * dp / (etp * ep) (dp * cp / ep when etp = tp)."""
        return self.tp * self.cp * self.dp // (self.expert_tp * self.ep)

    @property
    def chunks(self) -> int:
        """Model chunks: pp * virtual_stages."""
        return self.pp * self.virtual_stages

    def tokens_per_step(self) -> int:
        return self.gbs * self.seq

    def microbatches_in_flight(self, stage: int) -> float:
        """Micro-batches whose activations pipeline ``stage`` (0-based) holds at its peak, in whole-stage units.

        1F1B: stage p holds min(pp - p, m) (Narayanan et al. SC21 sec. 2.2.1). Interleaved: stage p runs
        (pp - p - 1) * 2 + (v - 1) * pp warm-up chunk passes plus one (Megatron-LM's
        forward_backward_pipelining_with_interleaving), each chunk 1/v of the stage; for p = 0 this is
        pp * (1 + (pp - 1) / (pp * v)), Korthikanti et al. 2022 sec. 4.2.3.
        """
        if not 0 <= stage < self.pp:
            raise SpecError(f"stage {stage} out of range 0..{self.pp - 1}", field="stage")
        m, v = self.microbatches, self.virtual_stages
        if self.schedule == "1f1b":
            return float(min(self.pp - stage, m))
        chunk_passes = (self.pp - stage - 1) * 2 + (v - 1) * self.pp + 1
        return min(chunk_passes, m * v) / v


def chunk_layers(layers: int, chunks: int) -> list[range]:
    """Split ``layers`` into ``chunks`` consecutive ranges as evenly as possible; the first ones take the extra."""
    base, extra = divmod(layers, chunks)
    out, start = [], 0
    for k in range(chunks):
        size = base + (1 if k < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


@lru_cache(maxsize=4096)
def auto_layout(layers: int, pp: int) -> tuple[int, ...]:
    """Layers per stage: ceil(layers / pp) each, the shortfall taken from the first and last stages alternately
    (0, pp-1, 1, pp-2, ...): the end stages also carry the embedding and the LM head."""
    if layers < pp:
        raise SpecError(f"layers ({layers}) must be at least pp ({pp})", field="pp")
    per = -(-layers // pp)
    counts = [per] * pp
    order = [i for pair in zip(range(pp), range(pp - 1, -1, -1), strict=True) for i in pair]
    order = list(dict.fromkeys(order))
    short, k = per * pp - layers, 0
    while short > 0:
        stage = order[k % pp]
        if counts[stage] > 1:
            counts[stage] -= 1
            short -= 1
        k += 1
    return tuple(counts)


def stage_layout(model: ModelSpec, plan: ParallelPlan) -> tuple[int, ...]:
    """Layers per pipeline stage: the plan's ``pp_layout``, else ``auto_layout``."""
    layout = plan.pp_layout or auto_layout(model.layers, plan.pp)
    if sum(layout) != model.layers:
        raise SpecError(f"{','.join(map(str, layout))} sums to {sum(layout)} layers; the model has {model.layers}",
                        field="pp_layout")
    return layout


def stage_layers(model: ModelSpec, plan: ParallelPlan) -> tuple[tuple[int, ...], ...]:
    """Layer indices on each pipeline stage: chunk j of pp * virtual_stages runs on stage j % pp (shared,
    immutable: a search asks for them hundreds of thousands of times)."""
    return layers_by_stage(stage_layout(model, plan), plan.virtual_stages)


def layer_kinds(model: ModelSpec, layers: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """(first layer, count) of each layer kind (dense, MoE) among ``layers``, in order of first appearance: what
    depends on a layer only through its kind is priced once per kind (cached per model and layer set)."""
    return _layer_kinds(ByIdentity(model), layers)


@lru_cache(maxsize=16384)
def _layer_kinds(model: ByIdentity[ModelSpec], layers: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    kinds: dict[bool, tuple[int, int]] = {}
    for i in layers:
        moe = model.value.is_moe_layer(i)
        first, count = kinds.get(moe, (i, 0))
        kinds[moe] = (first, count + 1)
    return tuple(kinds.values())


@lru_cache(maxsize=4096)
def layers_by_stage(layout: tuple[int, ...], virtual_stages: int) -> tuple[tuple[int, ...], ...]:
    """Layer indices per stage for per-stage layer counts ``layout``, each stage cut into ``virtual_stages``
    chunks; model chunk j (in layer order) is chunk j // pp of stage j % pp (cached)."""
    pp = len(layout)
    per_chunk = [[len(r) for r in chunk_layers(n, virtual_stages)] for n in layout]
    stages: list[list[int]] = [[] for _ in range(pp)]
    start = 0
    for j in range(pp * virtual_stages):
        stage, v = j % pp, j // pp
        size = per_chunk[stage][v]
        stages[stage].extend(range(start, start + size))
        start += size
    return tuple(tuple(stage) for stage in stages)


def megatron_runs_interleaved(pp: int, microbatches: int | None = None) -> bool:
    """Whether Megatron-LM runs the interleaved 1F1B schedule for ``pp`` stages and ``microbatches``: it asserts
    pp > 2 (NVIDIA/Megatron-LM commit 182841f7d, 2021-03-20, kept in megatron/core/parallel_state.py) and a
    micro-batch count that is a multiple of pp (megatron/core/pipeline_parallel/schedules.py; not checked where
    ``microbatches`` is None, before the batch is known)."""
    return pp > 2 and (microbatches is None or microbatches % pp == 0)


def check_plan(model: ModelSpec, plan: ParallelPlan) -> list[str]:
    """Check a plan against a model: raises SpecError where it cannot run, returns warnings where it runs poorly."""
    warnings: list[str] = []
    t = plan.tp
    if model.heads % t:
        raise SpecError(f"heads ({model.heads}) must be divisible by tp ({t})", field="tp")
    if model.kv_heads % t and t % model.kv_heads:
        raise SpecError(f"kv_heads ({model.kv_heads}) and tp ({t}) must divide one another", field="tp")
    if t > model.kv_heads:
        warnings.append(f"tp ({t}) > kv_heads ({model.kv_heads}): each KV head is replicated on "
                        f"{t // model.kv_heads} GPUs")
    if model.dense_layers and model.ffn_hidden % t:
        raise SpecError(f"ffn_hidden ({model.ffn_hidden}) must be divisible by tp ({t})", field="tp")
    if model.moe is not None and model.expert_ffn_hidden % plan.expert_tp:
        field = "tp" if plan.etp is None else "etp"
        raise SpecError(f"moe ffn_hidden ({model.expert_ffn_hidden}) must be divisible by the expert tensor-parallel "
                        f"size ({plan.expert_tp}{', = tp' if plan.etp is None else ''})", field=field)
    if plan.etp is not None and plan.etp != t and model.moe is None:
        raise SpecError(f"etp ({plan.etp}) differs from tp ({t}) but {model.name!r} has no experts", field="etp")
    if plan.ep > 1:
        if model.moe is None:
            raise SpecError(f"ep ({plan.ep}) > 1 needs an MoE model; {model.name!r} is dense", field="ep")
        if model.moe.experts % plan.ep:
            raise SpecError(f"moe experts ({model.moe.experts}) must be divisible by ep ({plan.ep})", field="ep")
    if model.layers < plan.chunks:
        raise SpecError(f"layers ({model.layers}) must be at least pp*virtual_stages = {plan.pp}*"
                        f"{plan.virtual_stages} = {plan.chunks}", field="pp")
    sizes = sorted({len(s) for s in stage_layers(model, plan)})
    if len(sizes) > 1:
        warnings.append(f"layers ({model.layers}) on pp = {plan.pp}: stages hold {' or '.join(map(str, sizes))} "
                        "layers; the largest stage sets the pace")
    if plan.schedule == "interleaved" and not megatron_runs_interleaved(plan.pp, plan.microbatches):
        warnings.append(f"interleaving with pp = {plan.pp} and {plan.microbatches} micro-batches: Megatron-LM's "
                        "interleaved schedule needs pp > 2 and micro-batches a multiple of pp")
    if plan.microbatches < plan.pp:
        warnings.append(f"micro-batches ({plan.microbatches}) < pp ({plan.pp}): pipeline stages sit idle")
    return warnings


# plan fields a stage's per-micro-batch work and activations do not read: data parallelism and the batch set how
# many micro-batches run and how the optimizer state is sharded (tests/test_stage_work_key.py)
NOT_STAGE_WORK = frozenset({"dp", "gbs", "zero", "gpus"})
_STAGE_FIELDS = operator.itemgetter(*(f for f in ParallelPlan.model_fields if f not in NOT_STAGE_WORK))


def stage_key(plan: ParallelPlan) -> Hashable:
    """What caches of per-stage, per-micro-batch quantities key a plan by: its fields but ``NOT_STAGE_WORK``, so
    cluster sizes share entries (a tuple: building it is a tenth of copying the plan)."""
    return _STAGE_FIELDS(plan.__dict__)  # type: ignore[no-any-return]
