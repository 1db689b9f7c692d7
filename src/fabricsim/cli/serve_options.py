"""`fabricsim infer --rate ...`: serve Poisson arrivals (or a trace) on continuous-batching replicas priced by the
inference model, and report latency percentiles, throughput, goodput and overload."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from fabricsim import units
from fabricsim.errors import SpecError

Rate = Annotated[float | None, typer.Option("--rate", help="serve Poisson arrivals at this many requests/s "
                                            "(continuous batching; lengths from --prompt/--output)")]
Duration = Annotated[str, typer.Option("--duration", help="arrival window with --rate, e.g. 600s or 10min")]
Trace = Annotated[Path | None, typer.Option("--trace", help="JSONL requests {arrival_s, prompt_tokens, "
                                            "output_tokens} to serve instead of Poisson arrivals")]
SloTtft = Annotated[str | None, typer.Option("--slo-ttft", help="time-to-first-token SLO for goodput, e.g. 2s")]
SloTpot = Annotated[str | None, typer.Option("--slo-tpot", help="time-per-output-token SLO for goodput, e.g. 50ms")]
Disagg = Annotated[str | None, typer.Option("--disagg", help="P:D prefill and decode replicas (each one "
                                            "tp*pp*dp group); the KV cache moves over NVLink or the network")]
Replicas = Annotated[int, typer.Option("--replicas", help="co-located replicas (data parallel serving)")]
MaxSeqs = Annotated[int, typer.Option("--max-seqs", help="scheduler: sequences per iteration (vLLM "
                                      "max_num_seqs)")]
MaxBatchedTokens = Annotated[int, typer.Option("--max-batched-tokens", help="scheduler: tokens per iteration "
                                               "(vLLM max_num_batched_tokens)")]
ChunkedPrefill = Annotated[bool, typer.Option("--chunked-prefill/--no-chunked-prefill",
                                              help="split long prompts over iterations")]
Seed = Annotated[int, typer.Option("--seed", help="random seed of the Poisson arrivals")]


@dataclass(frozen=True)
class ServeRequest:
    """The serving options of one `infer` call, parsed and checked."""

    rate_per_s: float | None
    duration_s: float
    trace: Path | None
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    disagg: tuple[int, int] | None
    replicas: int
    max_seqs: int
    max_batched_tokens: int
    chunked_prefill: bool
    seed: int

    @property
    def active(self) -> bool:
        return self.rate_per_s is not None or self.trace is not None

    def to_json(self) -> dict[str, Any]:
        return {"rate_per_s": self.rate_per_s, "duration_s": self.duration_s,
                "trace": None if self.trace is None else str(self.trace), "slo_ttft_s": self.slo_ttft_s,
                "slo_tpot_s": self.slo_tpot_s, "disagg": None if self.disagg is None else list(self.disagg),
                "replicas": self.replicas, "max_seqs": self.max_seqs, "max_batched_tokens": self.max_batched_tokens,
                "chunked_prefill": self.chunked_prefill, "seed": self.seed}


MAX_RATE_PER_S = 1e5  # beyond any single deployment; keeps a typo from simulating billions of requests
MAX_DURATION_S = 7 * 86400.0


def parse_disagg(text: str | None) -> tuple[int, int] | None:
    """'P:D' -> (P, D), each a positive integer."""
    if text is None:
        return None
    parts = text.split(":")
    try:
        p, d = (int(x) for x in parts) if len(parts) == 2 else (0, 0)
    except ValueError:
        p = d = 0
    if p < 1 or d < 1:
        raise SpecError(f"expected P:D with positive integers (e.g. 1:3), got {text!r}", field="--disagg")
    return p, d


def serve_request(*, rate: float | None, duration: str, trace: Path | None, slo_ttft: str | None,
                  slo_tpot: str | None, disagg: str | None, replicas: int, max_seqs: int, max_batched_tokens: int,
                  chunked_prefill: bool, seed: int) -> ServeRequest:
    """Parse and check the serving options (one-line errors naming the option)."""
    if rate is not None and not (math.isfinite(rate) and 0 < rate <= MAX_RATE_PER_S):
        raise SpecError(f"must be a finite rate in (0, {MAX_RATE_PER_S:g}] requests/s, got {rate}", field="--rate")
    if rate is not None and trace is not None:
        raise SpecError("give --rate or --trace, not both", field="--trace")
    duration_s = units.parse_duration(duration, field="--duration")
    if not 0 < duration_s <= MAX_DURATION_S:
        raise SpecError(f"must be in (0 s, 7 days], got {duration!r}", field="--duration")
    ttft = None if slo_ttft is None else units.parse_duration(slo_ttft, field="--slo-ttft")
    tpot = None if slo_tpot is None else units.parse_duration(slo_tpot, field="--slo-tpot")
    for name, value in (("--slo-ttft", ttft), ("--slo-tpot", tpot)):
        if value is not None and value <= 0:
            raise SpecError(f"must be > 0 s, got {value}", field=name)
    for name, value in (("--replicas", replicas), ("--max-seqs", max_seqs),
                        ("--max-batched-tokens", max_batched_tokens)):
        if value < 1:
            raise SpecError(f"must be >= 1, got {value}", field=name)
    split = parse_disagg(disagg)
    if split is not None and replicas != 1:
        raise SpecError("give --replicas or --disagg, not both", field="--disagg")
    return ServeRequest(rate, duration_s, trace, ttft, tpot, split, replicas, max_seqs, max_batched_tokens,
                        chunked_prefill, seed)
