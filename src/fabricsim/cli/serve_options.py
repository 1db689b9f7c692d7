"""`fabricsim infer --rate ...`: serve Poisson arrivals (or a trace) on continuous-batching replicas priced by the
inference model, and report latency percentiles, throughput, goodput and overload."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fabricsim.api import infer
from fabricsim.cli.options import from_api


def _decode_size(size: str, what: str) -> Any:
    """The option --decode-SIZE: the decode pool's own ``what`` (default: --SIZE's)."""
    return typer.Option(f"--decode-{size}", help=f"with --disagg: the decode pool's {what} (default: --{size})")


# parameter name -> (declaration, default: `fabricsim.infer`'s), in `infer --help` order (`cli.options.declared`
# builds the signature): each option of serving declared once, here.
SERVE: dict[str, tuple[Any, Any]] = from_api(infer, {
    "rate": Annotated[float | None, typer.Option(
        "--rate",
        help="serve Poisson arrivals at this many requests/s (continuous batching; lengths from "
        "--prompt/--output)")],
    "duration": Annotated[str | None, typer.Option(
        "--duration", help="arrival window with --rate, e.g. 600s or 10min (default 600s)")],
    "trace": Annotated[Path | None, typer.Option(
        "--trace",
        help="input: a JSONL file of requests to serve instead of --rate's Poisson arrivals, one object a line: "
        "{\"arrival_s\": 0.5, \"prompt_tokens\": 1024, \"output_tokens\": 256}")],
    "slo_ttft": Annotated[str | None, typer.Option(
        "--slo-ttft",
        help="time-to-first-token SLO, e.g. 2s: what infer's goodput counts, what size --inference meets")],
    "slo_tpot": Annotated[str | None, typer.Option(
        "--slo-tpot",
        help="time-per-output-token SLO, e.g. 50ms: what infer's goodput counts, what size --inference meets")],
    "disagg": Annotated[str | None, typer.Option(
        "--disagg",
        help="P:D prefill and decode replicas (each one tp*pp*dp group); the KV cache moves over NVLink or the "
        "network")],
    "replicas": Annotated[int | None, typer.Option(
        "--replicas", help="co-located replicas (data parallel serving; default 1)")],
    "max_seqs": Annotated[int | None, typer.Option(
        "--max-seqs", help="scheduler: sequences per iteration (vLLM max_num_seqs; default: the engine's)")],
    "max_batched_tokens": Annotated[int | None, typer.Option(
        "--max-batched-tokens",
        help="scheduler: tokens per iteration (vLLM max_num_batched_tokens; default: the engine's)")],
    "chunked_prefill": Annotated[bool | None, typer.Option(
        "--chunked-prefill/--no-chunked-prefill",
        help="split long prompts over iterations (default: the engine's: on for vLLM V1 and SGLang, off for vLLM "
        "V0 and TensorRT-LLM)")],
    "seed": Annotated[int | None, typer.Option(
        "--seed", help="random seed of the Poisson arrivals (default 0)")],
})
PREFIX: dict[str, tuple[Any, Any]] = from_api(infer, {
    "prefix_hit": Annotated[float, typer.Option(
        "--prefix-hit",
        help="fraction of each prompt already in the engine's prefix cache (0..1; not computed again): TTFT, and "
        "every request served; a --trace may give cached_tokens per request instead")],
    "prefix_host": Annotated[float, typer.Option(
        "--prefix-host",
        help="fraction of each prompt found in the engine's host-memory KV tier (offloaded copies): copied back "
        "over PCIe or NVLink-C2C instead of computed (engines with one: fabricsim catalog engines --json, "
        "kv_offload)")],
})
DECODE: dict[str, tuple[Any, Any]] = from_api(infer, {
    "decode_tp": Annotated[int | None, _decode_size("tp", "tensor parallelism")],
    "decode_ep": Annotated[int | None, _decode_size("ep", "expert parallelism")],
    "decode_dp": Annotated[int | None, _decode_size("dp", "attention data parallelism")],
    "decode_system": Annotated[str | None, typer.Option(
        "--decode-system",
        help="with --disagg: the decode pool's system (its own GPU type; default: --system); the KV cache then "
        "crosses the scale-out network")],
})
