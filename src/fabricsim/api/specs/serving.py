"""The options of one served model (`infer`): the serving plan and its numeric formats, the requests served on
continuous-batching replicas, the engine, the prefix cache, a disaggregated decode pool and the launch command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar

from fabricsim.api.specs.fields import ApiFunction, OptionGroup, opt
from fabricsim.api.specs.runs import CalibrationOptions
from fabricsim.api.specs.shared import (
    EpOption,
    GpuPowerOption,
    KvServerOption,
    KvServersOption,
    KvTierOption,
    ModelOption,
    NetworkOption,
    OversubscriptionOption,
    PpOption,
    PrefixNetworkOption,
    SystemOption,
    TpOption,
)

PromptOption = Annotated[int, opt(2048, "prompt tokens per sequence", unit="tokens")]
OutputOption = Annotated[int, opt(256, "output tokens per sequence", unit="tokens")]
SloTtftOption = Annotated[str | None, opt(None, "time-to-first-token SLO, e.g. 2s: what infer's goodput counts, what "
                                          "size --inference meets", unit="s")]
SloTpotOption = Annotated[str | None, opt(None, "time-per-output-token SLO, e.g. 50ms: what infer's goodput counts, "
                                          "what size --inference meets", unit="s")]
LengthsOption = Annotated[str | None, opt(None, "request lengths of the simulated arrivals: fixed (default: every "
                                          "request --prompt/--output tokens) or sharegpt (vLLM's ShareGPT benchmark "
                                          "sample, its per-request spread scaled to those means)")]
CheckpointOption = Annotated[str | None, opt(None, "checkpoint path or hub id the printed engine launch command names "
                                             "(default: the model's name, to replace)")]


class ServingPlanOptions(OptionGroup):
    """The model, the serving group's parallel plan, the static batch, the numeric formats, speculative decoding
    and the network between nodes."""

    model: ModelOption
    system: SystemOption
    gpu_power: GpuPowerOption
    gpus: int | None = opt(None, "GPUs of the group (= tp*pp*dp); checked when given")
    tp: TpOption
    pp: PpOption
    ep: EpOption
    dp: int = opt(1, "attention data parallelism within the group (MoE: experts span it)")
    batch: int = opt(1, "sequences in the static batch", unit="sequences")
    prompt: PromptOption
    output: OutputOption
    weights: str = opt("bf16", "weight format: bf16, fp8, int4 (W4A16) or fp4 (NVFP4)")
    kv: str = opt("bf16", "KV-cache format: bf16 or fp8")
    draft_tokens: int = opt(0, "speculative decoding: draft tokens per sequence and step from the model's MTP module "
                            "(one layer + shared head); 0: none", unit="tokens")
    acceptance: float | None = opt(None, "speculative decoding: mean tokens a step yields per sequence, 1 + expected "
                                   "accepted drafts (1 to 1 + --draft-tokens); required with --draft-tokens")
    fabric: NetworkOption  # infer's keyword for the network (--ib)
    oversubscription: OversubscriptionOption


class ServeOptions(OptionGroup):
    """Requests served on continuous-batching replicas: the arrivals (a rate or a trace), the SLOs, the replicas
    (co-located or disaggregated) and the scheduler's limits."""

    rate: float | None = opt(None, "serve Poisson arrivals at this many requests/s (continuous batching; lengths from "
                             "--prompt/--output)", unit="requests/s")
    duration: str | None = opt(None, "arrival window with --rate, e.g. 600s or 10min (default 600s)", unit="s")
    trace: str | Path | None = opt(None, "input: a JSONL file of requests to serve instead of --rate's Poisson "
                                   "arrivals, one object a line: {\"arrival_s\": 0.5, \"prompt_tokens\": 1024, "
                                   "\"output_tokens\": 256}")
    slo_ttft: SloTtftOption
    slo_tpot: SloTpotOption
    disagg: str | None = opt(None, "P:D prefill and decode replicas (each one tp*pp*dp group); the KV cache moves "
                             "over NVLink or the network")
    replicas: int | None = opt(None, "co-located replicas (data parallel serving; default 1)")
    max_seqs: int | None = opt(None, "scheduler: sequences per iteration (vLLM max_num_seqs; default: the engine's)")
    max_batched_tokens: int | None = opt(None, "scheduler: tokens per iteration (vLLM max_num_batched_tokens; "
                                         "default: the engine's)", unit="tokens")
    chunked_prefill: bool | None = opt(None, "split long prompts over iterations (default: the engine's: on for vLLM "
                                       "V1 and SGLang, off for vLLM V0 and TensorRT-LLM)")
    seed: int | None = opt(None, "random seed of the Poisson arrivals (default 0)")
    lengths: LengthsOption


class EngineOptions(OptionGroup):
    """The serving engine and its release."""

    engine: str = opt("trtllm", "serving engine as NAME[@VERSION]: trtllm, vllm or sglang (e.g. vllm@0.6.3): the "
                      "KV-cache memory, batch, prefill chunk and host time per step of that release")


class PrefixOptions(OptionGroup):
    """The share of each prompt the engine finds cached (in GPU memory, or in its host-memory KV tier)."""

    prefix_hit: float = opt(0.0, "fraction of each prompt already in the engine's prefix cache (0..1; not computed "
                            "again): TTFT, and every request served; a --trace may give cached_tokens per request "
                            "instead")
    prefix_host: float = opt(0.0, "fraction of each prompt found in the engine's host-memory KV tier (offloaded "
                             "copies): copied back over PCIe or NVLink-C2C instead of computed (engines with one: "
                             "fabricsim catalog engines --json, kv_offload)")


class KvTierOptions(OptionGroup):
    """A networked KV-cache tier (servers on the scale-out fabric, as NVIDIA's BlueField-4 context memory storage or
    an LMCache server): the share of each prompt found there, the servers, their capacity and fabric traffic."""

    kv_tier: KvTierOption
    prefix_network: PrefixNetworkOption
    kv_server: KvServerOption
    kv_servers: KvServersOption


class DecodeOptions(OptionGroup):
    """With --disagg: the decode pool's own plan and system (default: the prefill pool's)."""

    decode_tp: int | None = opt(None, "with --disagg: the decode pool's tensor parallelism (default: --tp)")
    decode_ep: int | None = opt(None, "with --disagg: the decode pool's expert parallelism (default: --ep)")
    decode_dp: int | None = opt(None, "with --disagg: the decode pool's attention data parallelism (default: --dp)")
    decode_system: str | None = opt(None, "with --disagg: the decode pool's system (its own GPU type; default: "
                                    "--system); the KV cache then crosses the scale-out network")


class LaunchOptions(OptionGroup):
    """What the printed engine launch command names."""

    checkpoint: CheckpointOption


class InferRun(LaunchOptions, DecodeOptions, KvTierOptions, PrefixOptions, EngineOptions, ServeOptions,
               CalibrationOptions, ServingPlanOptions):
    """One served model: `fabricsim infer` and `fabricsim.infer`."""

    api: ClassVar[ApiFunction] = ApiFunction(
        "infer", "fabricsim.api.infer:run_infer", "fabricsim.api.infer:InferResult", None,
        "Predict serving one static batch and, with ``rate`` (requests/s) or ``trace`` (a JSONL file), serve "
        "requests on continuous-batching replicas (the options and defaults of `fabricsim infer`).")
