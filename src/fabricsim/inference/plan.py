"""How a model is served: the inference plan (parallel sizes, static batch, lengths, weight and KV formats, engine
kernels) and the checks that it can run a model on a GPU; the breakdown's layer kinds."""

from __future__ import annotations

from dataclasses import dataclass
from math import isclose, isfinite

from fabricsim.catalog import GPU
from fabricsim.errors import SpecError
from fabricsim.inference.engines import DEFAULT_ENGINE, EngineProfile, engine_profile
from fabricsim.model import KV_BYTES, WEIGHT_BYTES, ModelSpec

LAYERS = ("compute", "hbm", "nvlink", "pcie", "infiniband", "ethernet", "other")
ACT_BYTES = 2  # bf16 activations
WEIGHTS = tuple(WEIGHT_BYTES)
KVS = tuple(KV_BYTES)


KERNEL_FLAGS = {"gqa_kernel": "gqa_decode", "moe_sm80_kernels": "moe_sm80", "fixed_gemm_tiles": "fixed_gemm_tiles",
                "fused_gate_up": "fused_gate_up", "fp8_mla_decode": "fp8_mla_decode"}
"""Plan flag -> the engine profile's ``kernels`` flag it defaults to."""


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
    # The kernel flags below: None (the default) is as the engine's release runs it (engines.yaml ``kernels``).
    gqa_kernel: bool | None = None
    """decode attention reads each KV head once for its whole query group (XQA, FlashDecoding); False: once per
    query head (masked multi-head attention kernels without GQA support: TensorRT-LLM before 0.7)"""
    moe_sm80_kernels: bool | None = None
    """the routed-expert GEMMs run on Ampere-generation (SM80) grouped-GEMM kernels at the 16-bit rate, whatever the
    weight format (TensorRT-LLM before 0.10: no FP8 MoE, no Hopper MoE kernels; 8-bit weights are INT8 weight-only)"""
    fixed_gemm_tiles: bool | None = None
    """the weight GEMMs run one tactic chosen for another shape (TensorRT engines: the optimization profile's
    optimum), so a GEMM of few output tiles leaves SMs idle (``gemm_tile`` waves); False: tactics tuned per token
    count fill the SMs (the roofline)"""
    fused_gate_up: bool | None = None
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
    fp8_mla_decode: bool | None = None
    """with an FP8 KV cache an MLA model's decode attention quantises Q to FP8 and runs its math on FP8 tensor
    cores (TensorRT-LLM's FP8 MLA generation kernels); no effect on other attention or a BF16 cache"""
    engine: str = DEFAULT_ENGINE
    """the serving engine as ``NAME[@VERSION]`` (``data/engines.yaml``): the memory it gives the KV cache, the prefill
    tokens per pass its workspace holds, its host time per step and the batch its scheduler runs"""
    prefix_hit: float = 0.0
    """fraction of each prompt already in the engine's prefix cache: prefill computes only the rest (attending to
    the cached part), at least the last prompt token"""
    prefix_host: float = 0.0
    """fraction of each prompt found in the engine's host-memory KV tier (offloaded copies, engines.yaml
    ``kv_offload``): loaded back over the GPU's host link (PCIe, NVLink-C2C) instead of computed"""
    prefix_network: float = 0.0
    """fraction of each prompt found in a networked KV tier (servers on the scale-out fabric,
    ``inference.kvtier``): loaded over the GPU's NICs where that is faster than computing it"""
    engine_max_seqs: int | None = None
    """the engine's max sequences when set other than its default (``--max-seqs``): an engine that sizes its
    workspace at start-up sizes its sampler for them; None: the engine's default"""
    engine_max_batched_tokens: int | None = None
    """the engine's max batched tokens when set other than its default (``--max-batched-tokens``): the prefill
    chunk its activation workspace holds; None: the engine's default"""

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
        for name in ("engine_max_seqs", "engine_max_batched_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise SpecError(f"must be a positive integer, got {value!r}",
                                field=f"--{name.removeprefix('engine_').replace('_', '-')}")
        profile = engine_profile(self.engine)  # an unknown engine or release: a one-line error naming the known ones
        for name in KERNEL_FLAGS:
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise SpecError(f"must be true, false or None (as the engine runs it), got {value!r}", field=name)
        h = _fraction(self.prefix_hit, 1.0, "--prefix-hit", "0..1")
        if h and not profile.scheduler.prefix_cache:
            raise SpecError(f"{profile.name} {profile.version} does not cache prefixes by default (fabricsim "
                            "catalog engines); drop --prefix-hit or pick a release or engine that does",
                            field="--prefix-hit")
        g = _fraction(self.prefix_host, 1.0, "--prefix-host", "0..1")
        if h + g > 1.0 and not isclose(h + g, 1.0):  # float sums such as 0.7 + 0.3 stay allowed
            raise SpecError(f"--prefix-hit {h:g} + --prefix-host {g:g} = {h + g:g} is more than the whole prompt: "
                            "they are shares of one prompt (found on the GPU, found in host memory), so their sum "
                            f"must be at most 1 (with --prefix-hit {h:g}, --prefix-host at most {1.0 - h:g})",
                            field="--prefix-host")
        if g and profile.settings.kv_offload is None:
            raise SpecError(f"{profile.name} {profile.version} keeps no KV tier in host memory in fabricsim "
                            "(fabricsim catalog engines --json: kv_offload); drop --prefix-host", field="--prefix-host")
        n = _fraction(self.prefix_network, 1.0, "--prefix-network", "0..1")
        if h + g + n > 1.0 and not isclose(h + g + n, 1.0):
            raise SpecError(f"--prefix-hit {h:g} + --prefix-host {g:g} + --prefix-network {n:g} = {h + g + n:g} is "
                            "more than the whole prompt: they are shares of one prompt (on the GPU, in host memory, "
                            f"in the networked tier), so --prefix-network is at most {max(0.0, 1.0 - h - g):g}",
                            field="--prefix-network")
        if n and not profile.scheduler.prefix_cache:
            raise SpecError(f"{profile.name} {profile.version} does not cache prefixes by default, so it has no "
                            "prefix to load from a networked KV tier; drop --prefix-network or pick a release or "
                            "engine that does", field="--prefix-network")
        if self.batch % self.dp:
            raise SpecError(f"batch ({self.batch}) must be divisible by dp ({self.dp})", field="--batch")

    def _cached(self, share: float) -> int:
        """The prompt tokens of a share of the prompt, rounded down, at most the prompt less one."""
        return min(int(share * self.prompt_tokens), self.prompt_tokens - 1)

    @property
    def cached_prompt_tokens(self) -> int:
        """Prompt tokens a request finds in the prefix cache, on the GPU, in host memory or in a networked KV tier
        (at most the prompt less one)."""
        return self._cached(self.prefix_hit + self.prefix_host + self.prefix_network)

    @property
    def host_prompt_tokens(self) -> int:
        """Of ``cached_prompt_tokens``, those loaded back from the host-memory tier (the rest are on the GPU or in
        the networked tier)."""
        return max(0, self._cached(self.prefix_hit + self.prefix_host) - self._cached(self.prefix_hit))

    @property
    def network_prompt_tokens(self) -> int:
        """Of ``cached_prompt_tokens``, those found in the networked KV tier (loaded, or recomputed where that is
        faster: ``predict_inference``)."""
        return max(0, self.cached_prompt_tokens - self._cached(self.prefix_hit + self.prefix_host))

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
                "kv": self.kv, "gpus": self.gpus, "gqa_kernel": self.kernel("gqa_kernel"),
                "moe_sm80_kernels": self.kernel("moe_sm80_kernels"),
                "fixed_gemm_tiles": self.kernel("fixed_gemm_tiles"), "fused_gate_up": self.kernel("fused_gate_up"),
                "draft_tokens": self.draft_tokens,
                "acceptance_length": self.acceptance_length, "attention_weights": self.attention_format,
                "attention_out_weights": self.attention_out_format, "fp8_mla_decode": self.kernel("fp8_mla_decode"),
                "engine": engine_profile(self.engine).label, "prefix_hit": self.prefix_hit,
                "prefix_host": self.prefix_host, "prefix_network": self.prefix_network,
                "engine_max_seqs": self.engine_max_seqs, "engine_max_batched_tokens": self.engine_max_batched_tokens}

    @property
    def engine_profile(self) -> EngineProfile:
        """The serving engine's profile (``engine``, resolved to its release)."""
        return engine_profile(self.engine)

    def kernel(self, flag: str) -> bool:
        """The kernel flag ``flag`` (a ``KERNEL_FLAGS`` field) as this plan runs it: its own value, or (None) the
        engine release's (engines.yaml ``kernels``)."""
        value: bool | None = getattr(self, flag)
        return self.engine_profile.settings.kernels.runs(KERNEL_FLAGS[flag]) if value is None else value

    def max_seqs(self, gpu: GPU) -> int:
        """Sequences the engine runs at once on ``gpu``: ``engine_max_seqs``, else the engine's default."""
        return self.engine_max_seqs or self.engine_profile.max_batch(gpu)

    def max_batched_tokens(self, gpu: GPU) -> int:
        """Prompt tokens per pass on ``gpu``: ``engine_max_batched_tokens``, else the engine's default."""
        return self.engine_max_batched_tokens or self.engine_profile.max_batched_tokens(gpu)


def _fraction(value: object, high: float, field: str, allowed: str) -> float:
    """``value`` checked as a number in [0, ``high``] (``allowed`` says the range in the error)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not isfinite(value) \
            or not 0.0 <= value <= high:
        raise SpecError(f"must be a fraction {allowed}, got {value!r}", field=field)
    return float(value)


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
