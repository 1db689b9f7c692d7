"""The serving options of `infer` (request rate or trace, SLOs, replicas, disaggregated pools, scheduler limits),
parsed and checked into one request; every error names the CLI option."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricsim import units
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from fabricsim.serving import DatasetLengths


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
    budget_from_engine: bool = False  # --max-batched-tokens not given: the engine's (whole prompts: the longest)
    lengths: DatasetLengths | None = None  # --lengths: a dataset's per-request spread (None: fixed lengths)

    @property
    def active(self) -> bool:
        return self.rate_per_s is not None or self.trace is not None

    def to_json(self) -> dict[str, Any]:
        return {"rate_per_s": self.rate_per_s, "duration_s": self.duration_s,
                "trace": None if self.trace is None else str(self.trace), "slo_ttft_s": self.slo_ttft_s,
                "slo_tpot_s": self.slo_tpot_s, "disagg": None if self.disagg is None else list(self.disagg),
                "replicas": self.replicas, "max_seqs": self.max_seqs, "max_batched_tokens": self.max_batched_tokens,
                "chunked_prefill": self.chunked_prefill, "seed": self.seed,
                "lengths": "fixed" if self.lengths is None else self.lengths.id}


MAX_RATE_PER_S = 1e5  # beyond any single deployment; keeps a typo from simulating billions of requests
MAX_DURATION_S = 7 * 86400.0


@dataclass(frozen=True)
class DecodePool:
    """A disaggregated decode pool's own plan: its parallelism and system (None: the prefill pool's)."""

    tp: int | None = None
    ep: int | None = None
    dp: int | None = None
    system: str | None = None


def decode_pool(disagg: tuple[int, int] | None, *, tp: int | None, ep: int | None, dp: int | None,
                system: str | None) -> DecodePool | None:
    """The --decode-* options, checked: positive sizes, and only with --disagg (None when none is given)."""
    given = {"--decode-tp": tp, "--decode-ep": ep, "--decode-dp": dp, "--decode-system": system}
    if all(v is None for v in given.values()):
        return None
    if disagg is None:
        name = next(k for k, v in given.items() if v is not None)
        raise SpecError("sets the decode pool of a disaggregated layout: add --disagg P:D", field=name)
    for name, value in (("--decode-tp", tp), ("--decode-ep", ep), ("--decode-dp", dp)):
        if value is not None and value < 1:
            raise SpecError(f"must be >= 1, got {value}", field=name)
    return DecodePool(tp, ep, dp, system)


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


DEFAULT_DURATION = "600s"


def serve_request(*, rate: float | None, duration: str | None, trace: Path | None, slo_ttft: str | None,
                  slo_tpot: str | None, disagg: str | None, replicas: int | None, max_seqs: int | None,
                  max_batched_tokens: int | None, chunked_prefill: bool | None, seed: int | None,
                  engine_max_seqs: int, engine_max_batched_tokens: int, engine_chunked_prefill: bool = True,
                  lengths: str | None = None) -> ServeRequest:
    """Parse and check the serving options (one-line errors naming the option). Every serving option acts only on
    the serving simulation, so one given without --rate or --trace is an error naming them, not silently unused.
    --max-seqs, --max-batched-tokens and --chunked-prefill default to the engine's scheduler (``engine_*``;
    --engine's profile)."""
    if rate is not None and not (math.isfinite(rate) and 0 < rate <= MAX_RATE_PER_S):
        raise SpecError(f"must be a finite rate in (0, {MAX_RATE_PER_S:g}] requests/s, got {rate}", field="--rate")
    if rate is not None and trace is not None:
        raise SpecError("give --rate or --trace, not both (--trace is an input: the requests to serve)",
                        field="--trace")
    given = {"--slo-ttft": slo_ttft, "--slo-tpot": slo_tpot, "--disagg": disagg, "--replicas": replicas,
             "--max-seqs": max_seqs, "--max-batched-tokens": max_batched_tokens,
             "--chunked-prefill/--no-chunked-prefill": chunked_prefill, "--duration": duration, "--seed": seed,
             "--lengths": lengths}
    if rate is None and trace is None:
        for name, option in given.items():
            if option is not None:
                raise SpecError("acts only on the serving simulation: add --rate N (Poisson requests/s) or --trace "
                                "FILE (a JSONL request trace)", field=name)
    if trace is not None:
        for name in ("--duration", "--seed", "--lengths"):
            if given[name] is not None:
                raise SpecError("sets --rate's Poisson arrivals; a --trace gives its own arrival times and lengths",
                                field=name)
    duration = DEFAULT_DURATION if duration is None else duration
    replicas = 1 if replicas is None else replicas
    max_seqs = engine_max_seqs if max_seqs is None else max_seqs
    budget_from_engine = max_batched_tokens is None
    max_batched_tokens = engine_max_batched_tokens if max_batched_tokens is None else max_batched_tokens
    chunked_prefill = engine_chunked_prefill if chunked_prefill is None else chunked_prefill
    seed = 0 if seed is None else seed
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
    from fabricsim.serving import length_dataset  # numpy: loaded when a command runs, not for --help

    dataset = None if lengths is None else length_dataset(lengths, field="--lengths")
    return ServeRequest(rate, duration_s, trace, ttft, tpot, split, replicas, max_seqs, max_batched_tokens,
                        chunked_prefill, seed, budget_from_engine, dataset)
