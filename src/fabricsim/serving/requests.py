"""Request streams for the serving simulation: seeded Poisson arrivals or a JSONL trace file.

A trace file holds one request per line, ``{"arrival_s": 0.12, "prompt_tokens": 1024, "output_tokens": 256}``
(``timestamp`` is accepted for ``arrival_s``; an optional ``cached_tokens`` says how much of the prompt the
engine's prefix cache already holds; other keys are ignored, blank lines skipped). Bad input raises a one-line
``SpecError`` naming the file and the line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.serving.datasets import DatasetLengths

if TYPE_CHECKING:
    from numpy.typing import NDArray

LengthKind = Literal["fixed", "uniform", "lognormal"]

# Caps on trace input so that a corrupt or hostile file fails fast instead of exhausting memory.
MAX_TRACE_BYTES = 256 * 2**20  # ~3M requests of JSONL; a larger file is almost surely not a trace
MAX_TRACE_REQUESTS = 10_000_000  # 10M requests; the simulation itself is the bottleneck well before this
MAX_REQUEST_TOKENS = 10_000_000  # 10M tokens: the largest advertised context window (Llama 4 Scout, 2025)
MAX_ARRIVAL_S = 366 * 24 * 3600.0  # one year of wall time: anything later is a unit error (ms or ns stamps)
ARRIVAL_KEYS = ("arrival_s", "timestamp")


@dataclass(frozen=True)
class LengthDist:
    """How many tokens a prompt or an output has: fixed, or drawn around a mean (rounded, at least 1)."""

    mean_tokens: int
    kind: LengthKind = "fixed"
    spread: float = 0.0  # uniform: half-width as a fraction of the mean; lognormal: sigma of log(tokens)

    def __post_init__(self) -> None:
        if not 1 <= self.mean_tokens <= MAX_REQUEST_TOKENS:
            raise SpecError(f"must be 1..{MAX_REQUEST_TOKENS}, got {self.mean_tokens}", field="mean_tokens")
        if self.kind not in ("fixed", "uniform", "lognormal"):
            raise SpecError(f"unknown kind {self.kind!r}; allowed: fixed, lognormal, uniform", field="kind")
        if not (math.isfinite(self.spread) and self.spread >= 0.0):
            raise SpecError(f"must be finite and >= 0, got {self.spread}", field="spread")
        if self.kind == "uniform" and self.spread > 1.0:
            raise SpecError(f"uniform half-width must be <= 1 (fraction of the mean), got {self.spread}",
                            field="spread")

    def draw(self, rng: np.random.Generator, n: int) -> NDArray[np.int64]:
        """n lengths: fixed; uniform integers in mean*(1 +- spread); lognormal with this mean and sigma=spread."""
        if self.kind == "fixed" or self.spread == 0.0:
            return np.full(n, self.mean_tokens, dtype=np.int64)
        if self.kind == "uniform":
            lo = max(1, round(self.mean_tokens * (1.0 - self.spread)))
            hi = max(lo, round(self.mean_tokens * (1.0 + self.spread)))
            return rng.integers(lo, hi + 1, size=n, dtype=np.int64)
        mu = math.log(self.mean_tokens) - self.spread**2 / 2.0  # E[X] = exp(mu + sigma^2/2) = mean
        drawn = np.rint(rng.lognormal(mu, self.spread, size=n))
        return np.clip(drawn, 1, MAX_REQUEST_TOKENS).astype(np.int64)


@dataclass(frozen=True, eq=False)
class RequestTrace:
    """Requests sorted by arrival: arrival time (s), prompt and output lengths (tokens); the arrival window (s);
    the prompt tokens found in the prefix cache (``cached_tokens``, none when absent: at most the prompt less one,
    since an engine recomputes the last prompt token for its logits); ``load_s``: seconds after its arrival before a
    request can be scheduled (its cached prefix copied back from a host-memory tier; none when absent)."""

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    duration_s: float
    cached_tokens: NDArray[np.int64] | None = None
    load_s: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if len(self.prompt_tokens) != n or len(self.output_tokens) != n:
            raise SpecError("arrival_s, prompt_tokens and output_tokens must have the same length", field="trace")
        if self.cached_tokens is not None and (
                len(self.cached_tokens) != n
                or (n and (self.cached_tokens.min() < 0 or np.any(self.cached_tokens >= self.prompt_tokens)))):
            raise SpecError("cached_tokens must be 0 .. prompt_tokens - 1 for every request", field="cached_tokens")
        if self.load_s is not None and (len(self.load_s) != n or (n and (
                not np.all(np.isfinite(self.load_s)) or self.load_s.min() < 0.0))):
            raise SpecError("load_s must be finite and >= 0 for every request", field="load_s")
        if n and (not np.all(np.isfinite(self.arrival_s)) or self.arrival_s.min() < 0.0):
            raise SpecError("arrival times must be finite and >= 0", field="arrival_s")
        if n > 1 and np.any(np.diff(self.arrival_s) < 0.0):
            raise SpecError("arrival times must be sorted", field="arrival_s")
        if n and (self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1):
            raise SpecError("prompt and output lengths must be >= 1 token", field="tokens")
        if not (math.isfinite(self.duration_s) and self.duration_s >= 0.0):
            raise SpecError(f"must be finite and >= 0, got {self.duration_s}", field="duration_s")

    @property
    def requests(self) -> int:
        """Number of requests in the trace."""
        return len(self.arrival_s)

    @property
    def cached(self) -> NDArray[np.int64]:
        """Prompt tokens each request finds in the prefix cache (zeros when the trace gives none)."""
        return np.zeros(self.requests, dtype=np.int64) if self.cached_tokens is None else self.cached_tokens

    @property
    def ready_s(self) -> NDArray[np.float64]:
        """When each request can first be scheduled: its arrival, plus its host-tier load."""
        return self.arrival_s if self.load_s is None else self.arrival_s + self.load_s

    def with_host_hit(self, host: float, load_s_per_token: float) -> RequestTrace:
        """The same requests with the fraction ``host`` of every prompt, past what the prefix cache already holds,
        found in a host-memory tier: those tokens join ``cached_tokens`` (at most the prompt less one) and the
        request waits ``load_s_per_token`` a token for them to be copied back."""
        if not (math.isfinite(load_s_per_token) and load_s_per_token >= 0.0):
            raise SpecError(f"must be finite and >= 0, got {load_s_per_token}", field="load_s_per_token")
        before = self.cached
        cached = np.minimum(before + self._share(host, "--prefix-host"), self.prompt_tokens - 1)
        return RequestTrace(self.arrival_s, self.prompt_tokens, self.output_tokens, self.duration_s, cached,
                            (cached - before) * load_s_per_token)

    def with_network_hit(self, share: float, load_s_per_token: float, latency_s: float) -> RequestTrace:
        """The same requests with the fraction ``share`` of every prompt, past what they already find cached, in a
        networked KV tier: those tokens join ``cached_tokens`` (at most the prompt less one) and each request that
        finds any waits ``latency_s`` plus ``load_s_per_token`` a token for them, after any load it waits already."""
        for name, value in (("load_s_per_token", load_s_per_token), ("latency_s", latency_s)):
            if not (math.isfinite(value) and value >= 0.0):
                raise SpecError(f"must be finite and >= 0, got {value}", field=name)
        before = self.cached
        cached = np.minimum(before + self._share(share, "--prefix-network"), self.prompt_tokens - 1)
        tokens = cached - before
        load = np.where(tokens > 0, latency_s + tokens * load_s_per_token, 0.0)
        if self.load_s is not None:
            load = load + self.load_s
        return RequestTrace(self.arrival_s, self.prompt_tokens, self.output_tokens, self.duration_s, cached, load)

    def with_prefix_hit(self, hit: float) -> RequestTrace:
        """The same requests with the fraction ``hit`` of every prompt in the prefix cache (rounded down, at most
        the prompt less one token)."""
        cached = np.minimum(self._share(hit, "--prefix-hit"), self.prompt_tokens - 1)
        return RequestTrace(self.arrival_s, self.prompt_tokens, self.output_tokens, self.duration_s, cached)

    def _share(self, fraction: float, field: str) -> NDArray[np.int64]:
        """The fraction ``fraction`` (checked 0..1) of every prompt, in whole tokens rounded down."""
        if not (math.isfinite(fraction) and 0.0 <= fraction <= 1.0):
            raise SpecError(f"must be a fraction 0..1, got {fraction}", field=field)
        tokens: NDArray[np.int64] = np.floor(fraction * self.prompt_tokens).astype(np.int64)
        return tokens


def poisson_requests(rate_per_s: float, duration_s: float, *, seed: int, prompt: LengthDist | int = 1024,
                     output: LengthDist | int = 256, dataset: DatasetLengths | None = None) -> RequestTrace:
    """Poisson arrivals at rate_per_s over [0, duration_s) with lengths from prompt/output (ints mean fixed), or,
    with ``dataset``, its per-request lengths scaled to prompt/output's means."""
    if not (math.isfinite(rate_per_s) and rate_per_s > 0.0):
        raise SpecError(f"must be finite and > 0, got {rate_per_s}", field="rate")
    if not (math.isfinite(duration_s) and duration_s > 0.0):
        raise SpecError(f"must be finite and > 0, got {duration_s}", field="duration_s")
    if rate_per_s * duration_s > MAX_TRACE_REQUESTS:
        raise SpecError(f"rate x duration is over {MAX_TRACE_REQUESTS} requests", field="rate")
    prompt_dist = prompt if isinstance(prompt, LengthDist) else LengthDist(prompt)
    output_dist = output if isinstance(output, LengthDist) else LengthDist(output)
    rng = np.random.default_rng(seed)
    # Draw enough exponential gaps in one go (mean + 10 sigma of the Poisson count), then cut at the window.
    expected = rate_per_s * duration_s
    gaps = rng.exponential(1.0 / rate_per_s, size=int(expected + 10.0 * math.sqrt(expected) + 10.0))
    arrivals = np.cumsum(gaps)
    while arrivals[-1] < duration_s:  # practically never: extend rather than truncate the process
        more = arrivals[-1] + np.cumsum(rng.exponential(1.0 / rate_per_s, size=len(gaps)))
        arrivals = np.concatenate([arrivals, more])
    arrivals = arrivals[arrivals < duration_s]
    n = len(arrivals)
    if dataset is not None:
        prompts, outputs = dataset.draw(n, prompt_dist.mean_tokens, output_dist.mean_tokens)
        return RequestTrace(arrivals.astype(np.float64), prompts, outputs, float(duration_s))
    return RequestTrace(arrivals.astype(np.float64), prompt_dist.draw(rng, n), output_dist.draw(rng, n),
                        float(duration_s))


def all_at_once(n: int, *, prompt: int, output: int, dataset: DatasetLengths | None = None) -> RequestTrace:
    """``n`` requests arriving together at time 0 (a benchmark that sends every prompt at once): each of
    ``prompt``/``output`` tokens, or, with ``dataset``, its per-request lengths scaled to those means."""
    if n < 1:
        raise SpecError(f"must be >= 1, got {n}", field="requests")
    if dataset is not None:
        prompts, outputs = dataset.draw(n, prompt, output)
    else:
        prompts, outputs = np.full(n, prompt, dtype=np.int64), np.full(n, output, dtype=np.int64)
    return RequestTrace(np.zeros(n), prompts, outputs, 0.0)


def _int_field(record: dict[str, object], key: str, where: str, source: str) -> int:
    """One token-count field of a trace line: an integer in 1..MAX_REQUEST_TOKENS."""
    if key not in record:
        raise SpecError(f"{where}: missing {key!r}", source=source)
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"{where}: {key} must be an integer, got {value!r}", source=source)
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise SpecError(f"{where}: {key} must be an integer, got {value!r}", source=source)
    count = int(value)
    if not 1 <= count <= MAX_REQUEST_TOKENS:
        raise SpecError(f"{where}: {key} must be 1..{MAX_REQUEST_TOKENS}, got {count}", source=source)
    return count


def _cached_field(record: dict[str, object], prompt: int, where: str, source: str) -> int:
    """The optional ``cached_tokens`` of a trace line: prompt tokens already in the prefix cache, 0..prompt - 1."""
    value = record.get("cached_tokens", 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and not (math.isfinite(value) and value.is_integer())):
        raise SpecError(f"{where}: cached_tokens must be an integer, got {value!r}", source=source)
    if not 0 <= int(value) < prompt:
        raise SpecError(f"{where}: cached_tokens must be 0..prompt_tokens - 1 ({prompt - 1}), got {int(value)}",
                        source=source)
    return int(value)


def _arrival_field(record: dict[str, object], where: str, source: str) -> float:
    """The arrival time of a trace line (``arrival_s`` or its alias ``timestamp``): finite seconds >= 0."""
    present = [key for key in ARRIVAL_KEYS if key in record]
    if not present:
        raise SpecError(f"{where}: missing 'arrival_s' (or 'timestamp')", source=source)
    if len(present) > 1:
        raise SpecError(f"{where}: give 'arrival_s' or 'timestamp', not both", source=source)
    value = record[present[0]]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"{where}: {present[0]} must be a number of seconds, got {value!r}", source=source)
    seconds = float(value)
    if not (math.isfinite(seconds) and 0.0 <= seconds <= MAX_ARRIVAL_S):
        raise SpecError(f"{where}: {present[0]} must be finite seconds in 0..{MAX_ARRIVAL_S:.0f}, got {value!r}",
                        source=source)
    return seconds


def parse_request_trace(data: bytes, source: str = "<trace>") -> RequestTrace:
    """Requests from JSONL bytes (one object a line), sorted by arrival; the window ends at the last arrival."""
    if len(data) > MAX_TRACE_BYTES:
        raise SpecError(f"trace is {len(data)} bytes, over the {MAX_TRACE_BYTES} byte limit", source=source)
    try:
        text = data.decode("utf-8-sig")  # a leading byte-order mark is harmless
    except UnicodeDecodeError as exc:
        bad_line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(f"line {bad_line}: not UTF-8 text (byte {exc.start})", source=source) from None
    arrivals: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    cached: list[int] = []
    for number, row in enumerate(text.split("\n"), start=1):  # JSONL lines end at \n only
        if not row.strip():
            continue
        where = f"line {number}"
        try:
            record = json.loads(row)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{where}: bad JSON ({exc.msg} at column {exc.colno})", source=source) from None
        except RecursionError:
            raise SpecError(f"{where}: bad JSON (nested too deeply)", source=source) from None
        if not isinstance(record, dict):
            raise SpecError(f"{where}: expected a JSON object, got {type(record).__name__}", source=source)
        arrivals.append(_arrival_field(record, where, source))
        prompts.append(_int_field(record, "prompt_tokens", where, source))
        outputs.append(_int_field(record, "output_tokens", where, source))
        hit = _cached_field(record, prompts[-1], where, source)
        cached.append(hit)
        if len(arrivals) > MAX_TRACE_REQUESTS:
            raise SpecError(f"{where}: more than {MAX_TRACE_REQUESTS} requests", source=source)
    if not arrivals:
        raise SpecError("no requests (empty trace)", source=source)
    arrival = np.asarray(arrivals, dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    hits = np.asarray(cached, dtype=np.int64)[order]
    return RequestTrace(arrival[order], np.asarray(prompts, dtype=np.int64)[order],
                        np.asarray(outputs, dtype=np.int64)[order], float(arrival.max()),
                        hits if hits.any() else None)


def load_request_trace(path: str | Path) -> RequestTrace:
    """Requests from a JSONL trace file (see ``parse_request_trace``), read through the shared bounded reader
    (never more than the size cap, so /dev/zero or a huge file is refused, not loaded)."""
    from fabricsim.inputs import read_text

    return parse_request_trace(read_text(path, "trace", max_bytes=MAX_TRACE_BYTES).encode("utf-8"), str(path))
