"""Serving engines as profiles (``data/engines.yaml``): how much memory an engine hands the KV cache, the batch and
prefill tokens it schedules, and its host time per step, by engine and release; ``--engine NAME[@VERSION]``."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricsim import units
from fabricsim.catalog import GPU, read_packaged_yaml
from fabricsim.catalog import LaunchFlag as BaseLaunchFlag
from fabricsim.errors import SpecError, spec_error

ENGINES_FILE = "engines.yaml"
DEFAULT_ENGINE = "trtllm"


class _Figure(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1)
    verified: bool = True


class KvMemory(_Figure):
    """The memory an engine gives its KV cache: ``fraction`` of the memory left after weights and activations
    (``free``: TensorRT-LLM) or of the whole GPU for everything (``total``: vLLM, SGLang)."""

    fraction: float = Field(gt=0, le=1)
    of: Literal["free", "total"]
    holds: Literal["all", "weights_and_kv"] = "all"
    """what a fraction of the total holds: weights, activations and KV (vLLM's gpu_memory_utilization), or weights
    and the KV pool only, the activation workspace and CUDA graphs living in the rest (SGLang's mem_fraction_static)"""
    runtime_bytes: str = "0B"
    """memory outside the model's tensors the engine counts before its KV cache (CUDA context, cuBLAS, NCCL and
    custom all-reduce buffers: vLLM's non_torch_memory) on one GPU without tensor parallelism"""
    runtime_bytes_tp: str | None = None
    """the same with tensor parallelism (NCCL and all-reduce buffers); ``runtime_bytes`` when absent"""

    def runtime(self, tp: int) -> float:
        """Bytes of runtime memory on one GPU of a ``tp``-way group."""
        text = self.runtime_bytes_tp if tp > 1 and self.runtime_bytes_tp is not None else self.runtime_bytes
        return float(units.parse_size(text))


class _BySize(_Figure):
    """A default an engine lowers on GPUs under ``large_gpu_bytes`` of memory, or whose catalog id starts with one
    of ``small_gpus`` (vLLM from 0.9 treats A100 as small whatever its memory)."""

    large_gpu_bytes: str | None = None
    small_gpus: list[str] = Field(default_factory=list)

    def small(self, gpu: GPU) -> bool:
        if any(gpu.id.startswith(prefix) for prefix in self.small_gpus):
            return True
        return self.large_gpu_bytes is not None and gpu.hbm_bytes < units.parse_size(self.large_gpu_bytes)


class MaxBatch(_BySize):
    """Sequences the scheduler runs at once (``small_gpu_sequences`` on small GPUs)."""

    sequences: int = Field(ge=1)
    small_gpu_sequences: int | None = Field(None, ge=1)


class MaxBatchedTokens(_BySize):
    """Prompt tokens per forward pass, chunked prefill (``small_gpu_tokens`` on small GPUs)."""

    tokens: int = Field(ge=1)
    small_gpu_tokens: int | None = Field(None, ge=1)


class Host(_Figure):
    """Host work per engine step (scheduling, sampling, output processing): ``step_s`` a step plus ``per_seq_s`` for
    each sequence in it, added to the step, or run beside the previous step's GPU work (``overlapped``: only what
    exceeds it shows)."""

    step_s: str
    per_seq_s: str = "0s"
    overlapped: bool


class Scheduler(_Figure):
    """How the engine builds an iteration. ``mixed``: running decodes first, then prompt chunks in the same pass
    (vLLM V1, TensorRT-LLM in-flight batching); ``prefill_first``: a pass of prompts whenever one can be admitted,
    decodes otherwise (vLLM V0, SGLang). Prompts ``chunked_prefill`` or whole. KV ``on_demand`` (preempt by
    recompute when blocks run out) or ``reserve_full`` (admit a request only when its prompt and whole output fit:
    TensorRT-LLM's GUARANTEED_NO_EVICT). ``prefix_cache``: the engine reuses cached prompt prefixes by default."""

    policy: Literal["mixed", "prefill_first"]
    chunked_prefill: bool
    admission: Literal["on_demand", "reserve_full"]
    prefix_cache: bool


class StartupProfile(_Figure):
    """An engine that sizes its activation workspace once, at start-up, for its whole budget (vLLM's profile run): a
    forward pass of its max batched tokens, then its sampler over its max sequences at once. The larger peak stays
    reserved whatever batch it later runs. ``sampler_bytes_per_seq_vocab``: the sampler's peak bytes per sequence
    and vocabulary entry (FP32 logits and the copies sorting, softmax and log-probabilities make of them)."""

    sampler_bytes_per_seq_vocab: float = Field(gt=0)


class KernelFlag(_Figure):
    """Whether a release runs a kernel that changes what a step costs, with where that comes from."""

    value: bool
    notes: str = ""


MODERN_KERNELS = {"gqa_decode": True, "moe_sm80": False, "fixed_gemm_tiles": False, "fused_gate_up": True,
                  "fp8_mla_decode": False}
"""What an engine runs where its profile does not say: GQA-aware decode attention, native MoE GEMMs, GEMM tactics
tuned per token count, one fused gate/up GEMM, BF16 MLA decode attention."""


class Kernels(BaseModel):
    """Kernels a release runs where they changed a step's cost (``MODERN_KERNELS`` for a flag not given):
    ``gqa_decode`` (decode attention reads each KV head once per query group), ``moe_sm80`` (expert GEMMs on
    Ampere-generation kernels at the 16-bit rate), ``fixed_gemm_tiles`` (one GEMM tactic chosen for another shape:
    tile waves), ``fused_gate_up`` (gate and up projections as one GEMM), ``fp8_mla_decode`` (MLA generation in
    FP8 over an FP8 KV cache)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gqa_decode: KernelFlag | None = None
    moe_sm80: KernelFlag | None = None
    fixed_gemm_tiles: KernelFlag | None = None
    fused_gate_up: KernelFlag | None = None
    fp8_mla_decode: KernelFlag | None = None

    def runs(self, name: str) -> bool:
        """The flag ``name`` of ``MODERN_KERNELS`` as this release has it."""
        flag: KernelFlag | None = getattr(self, name)
        return MODERN_KERNELS[name] if flag is None else flag.value


LaunchField = Literal["tp", "pp", "dp", "ep", "tp_x_dp", "max_seqs", "max_batched_tokens", "memory_fraction",
                      "weights", "kv", "chunked_prefill"]


class LaunchFlag(BaseLaunchFlag):
    """One launch flag of an engine (``fabricsim.catalog.launch.LaunchFlag``), its field one of the serving plan's
    and its condition ``always``, ``gt1``, ``on``/``off`` (chunked prefill) or a weight or KV format."""

    field: LaunchField
    when: Literal["always", "gt1", "on", "off", "bf16", "fp8", "int4", "fp4"]


class Launch(_Figure):
    """How a release is started: ``command`` (``{model}`` and fields in braces formatted), ``flags``, the extra
    arguments of each disaggregated ``roles`` (prefill, decode), and the config file settings go to
    (``config_file``, passed with ``config_flag``)."""

    command: list[str] = Field(min_length=1)
    flags: list[LaunchFlag] = Field(default_factory=list)
    roles: dict[str, list[str]] = Field(default_factory=dict)
    config_file: str | None = None
    config_flag: str | None = None


class KvOffload(_Figure):
    """The engine keeps a tier of KV blocks in host memory (copies of what it computed, LRU): a prefix found there
    is loaded back over the GPU's host link instead of recomputed. ``args``: the launch flags that enable it;
    ``note``: how to enable it where a flag cannot say it all (a size to choose, a config entry)."""

    args: list[str] = Field(default_factory=list)
    note: str = ""


class EngineVersion(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    since: str
    label: str = ""
    kv_memory: KvMemory
    startup_profile: StartupProfile | None = None
    kernels: Kernels = Field(default_factory=Kernels)
    launch: Launch | None = None
    kv_offload: KvOffload | None = None
    max_batch: MaxBatch
    max_batched_tokens: MaxBatchedTokens
    host: Host
    scheduler: Scheduler


class Newest(_Figure):
    """The newest release series the profiles were read from (``0.11``: every 0.11.x); a later release is refused,
    not priced as this one (what it changed is not known)."""

    version: str


class Engine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    default_version: str
    newest: Newest
    versions: list[EngineVersion] = Field(min_length=1)


class EngineProfile(BaseModel):
    """One engine at one release: the figures the inference model reads."""

    model_config = ConfigDict(frozen=True)

    engine: str
    name: str
    version: str
    settings: EngineVersion

    @property
    def label(self) -> str:
        return f"{self.engine}@{self.version}"

    @property
    def host_step_s(self) -> float:
        return units.parse_duration(self.settings.host.step_s)

    @property
    def host_per_seq_s(self) -> float:
        return units.parse_duration(self.settings.host.per_seq_s)

    @property
    def host_overlapped(self) -> bool:
        return self.settings.host.overlapped

    @property
    def scheduler(self) -> Scheduler:
        return self.settings.scheduler

    def host_s(self, seqs: float) -> float:
        """Host seconds of a step of ``seqs`` sequences."""
        return self.host_step_s + self.host_per_seq_s * seqs

    def exposed_host_s(self, gpu_s: float, seqs: float) -> float:
        """Host time a step of ``seqs`` sequences and ``gpu_s`` GPU seconds shows (``exposed_host_s``)."""
        return float(exposed_host_s(self.host_s(seqs), self.host_overlapped, gpu_s))

    def kv_usable_bytes(self, gpu: GPU, weights_bytes: float, activations_bytes: float, tp: int = 1) -> float:
        """Memory the instance may fill (weights + activations + KV cache) on one GPU of a ``tp``-way group: the
        engine's fraction of the memory CUDA reports (or of what weights and activations leave), less its runtime
        memory."""
        kv = self.settings.kv_memory
        runtime = kv.runtime(tp)
        device = gpu.device_memory_bytes  # what CUDA reports, as the engine reads it
        if kv.of == "total":
            outside = activations_bytes if kv.holds == "weights_and_kv" else 0.0  # the workspace is not in it
            return max(0.0, min(device, kv.fraction * device + outside) - runtime)
        left = max(0.0, device - weights_bytes - activations_bytes - runtime)
        return min(device, weights_bytes + activations_bytes) + left * kv.fraction

    def max_batch(self, gpu: GPU) -> int:
        """Sequences the engine's scheduler runs at once on ``gpu`` (the KV cache may allow fewer)."""
        mb = self.settings.max_batch
        return mb.small_gpu_sequences if mb.small_gpu_sequences is not None and mb.small(gpu) else mb.sequences

    def max_batched_tokens(self, gpu: GPU) -> int:
        """Prompt tokens per forward pass on ``gpu`` (what the activation workspace is sized for)."""
        mt = self.settings.max_batched_tokens
        return mt.small_gpu_tokens if mt.small_gpu_tokens is not None and mt.small(gpu) else mt.tokens


def exposed_host_s(host_s: Any, overlapped: bool, gpu_s: Any) -> Any:
    """Host time a step shows beside ``gpu_s`` of GPU work (seconds, or an array of them): all of it, or
    (``overlapped``) only what exceeds the GPU's work."""
    return np.maximum(0.0, host_s - gpu_s) if overlapped else host_s


@lru_cache(maxsize=1)
def engines() -> dict[str, Engine]:
    """The packaged engine profiles by id."""
    doc = read_packaged_yaml("fabricsim.inference.data", ENGINES_FILE)
    out: dict[str, Engine] = {}
    for entry in doc["engines"]:
        if isinstance(entry, dict) and isinstance(entry.get("versions"), list):
            entry = {**entry, "versions": _inherited(entry["versions"])}
        try:
            engine = Engine.model_validate(entry)
        except ValidationError as exc:
            raise spec_error(exc, Engine, ENGINES_FILE) from None
        out[engine.id] = engine
    return out


def _inherited(versions: list[Any]) -> list[Any]:
    """Each release range with what it does not state taken from the range before it: a block whole, a block's
    fields one by one (its label and its ``since`` are its own)."""
    out: list[Any] = []
    previous: dict[str, Any] = {}
    for version in versions:
        if not isinstance(version, dict):
            out.append(version)
            continue
        merged = {k: v for k, v in previous.items() if k not in ("label", "since")}
        for key, value in version.items():
            before = merged.get(key)
            merged[key] = {**before, **value} if isinstance(before, dict) and isinstance(value, dict) else value
        out.append(merged)
        previous = merged
    return out


_VERSION = re.compile(r"\d+(\.\d+)*")


def _version_key(version: str) -> tuple[int, ...]:
    """A dotted release as numbers, trailing zeros dropped (``1`` is ``1.0``); anything else is an error."""
    if not _VERSION.fullmatch(version):
        raise SpecError(f"version {version!r} is not dotted numbers (e.g. 0.11 or 1.0.2); known: {known_engines()}",
                        field="--engine")
    key = [int(part) for part in version.split(".")]
    while len(key) > 1 and key[-1] == 0:
        key.pop()
    return tuple(key)


def _newer_than(version: str, newest: str) -> bool:
    """Whether ``version`` is past the ``newest`` release series (``0.11.2`` is in ``0.11``; ``0.12`` is not)."""
    n = len(newest.split("."))
    head = [int(part) for part in version.split(".")][:n]
    return tuple(head + [0] * (n - len(head))) > tuple(int(part) for part in newest.split("."))


def known_engines() -> str:
    """One line naming every engine and the releases its profiles cover."""
    return "; ".join(f"{e.id} ({e.name} {e.versions[0].since} through {e.newest.version}.x, profiles from "
                     + ", ".join(v.since for v in e.versions) + f"; default {e.default_version})"
                     for e in engines().values())


@lru_cache(maxsize=64)
def engine_profile(spec: str = DEFAULT_ENGINE) -> EngineProfile:
    """The profile of ``NAME`` (its default release) or ``NAME@VERSION``, a release from the first profile's through
    the newest series read; a one-line error names the known ones."""
    name, at, version = spec.strip().partition("@")
    name = name.lower()  # names are case-insensitive, as network and system names are
    table = engines()
    if name not in table:
        raise SpecError(f"unknown engine {name!r}; known: {known_engines()}", field="--engine")
    engine = table[name]
    if at and not version:
        raise SpecError(f"{spec.strip()!r} names no version after '@' (e.g. {name}@{engine.default_version}, or "
                        f"{name} for the default); known: {known_engines()}", field="--engine")
    version = version or engine.default_version
    key = _version_key(version)
    fitting = [v for v in engine.versions if _version_key(v.since) <= key]
    if not fitting:
        raise SpecError(f"{engine.name} {version} is older than its first profile ({engine.versions[0].since}); "
                        f"known: {known_engines()}", field="--engine")
    if _newer_than(version, engine.newest.version):
        raise SpecError(f"{engine.name} {version} is newer than the releases fabricsim has profiles for (through "
                        f"{engine.newest.version}.x): pick one of those; known: {known_engines()}", field="--engine")
    chosen = max(fitting, key=lambda v: _version_key(v.since))
    return EngineProfile(engine=engine.id, name=engine.name, version=version, settings=chosen)
