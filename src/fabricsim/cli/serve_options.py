"""`fabricsim infer --rate ...`: serve Poisson arrivals (or a trace) on continuous-batching replicas priced by the
inference model, and report latency percentiles, throughput, goodput and overload."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

Rate = Annotated[float | None, typer.Option("--rate", help="serve Poisson arrivals at this many requests/s "
                                            "(continuous batching; lengths from --prompt/--output)")]
Duration = Annotated[str | None, typer.Option("--duration", help="arrival window with --rate, e.g. 600s or 10min "
                                              "(default 600s)")]
Trace = Annotated[Path | None, typer.Option("--trace", help="input: a JSONL file of requests to serve instead of "
                                            "--rate's Poisson arrivals, one object a line: {\"arrival_s\": 0.5, "
                                            "\"prompt_tokens\": 1024, \"output_tokens\": 256}")]
SloTtft = Annotated[str | None, typer.Option("--slo-ttft", help="time-to-first-token SLO for goodput, e.g. 2s")]
SloTpot = Annotated[str | None, typer.Option("--slo-tpot", help="time-per-output-token SLO for goodput, e.g. 50ms")]
Disagg = Annotated[str | None, typer.Option("--disagg", help="P:D prefill and decode replicas (each one "
                                            "tp*pp*dp group); the KV cache moves over NVLink or the network")]
Replicas = Annotated[int | None, typer.Option("--replicas", help="co-located replicas (data parallel serving; "
                                              "default 1)")]
MaxSeqs = Annotated[int | None, typer.Option("--max-seqs", help="scheduler: sequences per iteration (vLLM "
                                             "max_num_seqs; default: the engine's)")]
MaxBatchedTokens = Annotated[int | None, typer.Option("--max-batched-tokens", help="scheduler: tokens per iteration "
                                                      "(vLLM max_num_batched_tokens; default: the engine's)")]
ChunkedPrefill = Annotated[bool | None, typer.Option("--chunked-prefill/--no-chunked-prefill",
                                                     help="split long prompts over iterations (default: the "
                                                     "engine's: on for vLLM V1 and SGLang, off for vLLM V0 and "
                                                     "TensorRT-LLM)")]


def _decode_size(size: str, what: str) -> Any:
    """The option --decode-SIZE: the decode pool's own ``what`` (default: --SIZE's)."""
    return typer.Option(f"--decode-{size}", help=f"with --disagg: the decode pool's {what} (default: --{size})")


DecodeTp = Annotated[int | None, _decode_size("tp", "tensor parallelism")]
DecodeEp = Annotated[int | None, _decode_size("ep", "expert parallelism")]
DecodeDp = Annotated[int | None, _decode_size("dp", "attention data parallelism")]
DecodeSystem = Annotated[str | None, typer.Option("--decode-system", help="with --disagg: the decode pool's system "
                                                  "(its own GPU type; default: --system); the KV cache then "
                                                  "crosses the scale-out network")]
PrefixHit = Annotated[float, typer.Option("--prefix-hit", help="fraction of each prompt already in the engine's "
                                          "prefix cache (0..1; not computed again): TTFT, and every request "
                                          "served; a --trace may give cached_tokens per request instead")]
PrefixHost = Annotated[float, typer.Option("--prefix-host", help="fraction of each prompt found in the engine's "
                                            "host-memory KV tier (offloaded copies): copied back over PCIe or "
                                            "NVLink-C2C instead of computed (engines with one: fabricsim catalog "
                                            "engines --json, kv_offload)")]
Seed = Annotated[int | None, typer.Option("--seed", help="random seed of the Poisson arrivals (default 0)")]
