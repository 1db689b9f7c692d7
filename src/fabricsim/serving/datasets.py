"""Per-request lengths of the datasets serving benchmarks sample (``data/datasets.yaml``): a benchmark that sends a
dataset's prompts (vLLM's ShareGPT sampler) mixes short and long requests, and with every prompt sent at once the
longest outputs set how long the run lasts. A run priced at the mean lengths misses that tail; one drawn from the
dataset's own per-request lengths keeps it.

Each dataset is the (prompt, output) token pairs of one published run of the benchmark's sampler, in the order the
sampler draws them. A replay of ``n`` requests takes the first ``n`` pairs (cycled past the sample's end) and scales
each column to the means the replay names, so a run measured with another tokenizer or chat template keeps its own
mean lengths and takes the dataset's spread."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.errors import SpecError, unknown_name_error

if TYPE_CHECKING:
    from numpy.typing import NDArray

FIXED = "fixed"


@dataclass(frozen=True, eq=False)
class DatasetLengths:
    """One dataset's per-request (prompt, output) token counts, in its sampler's order, and where they were read."""

    id: str
    name: str
    source: str
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]

    def __post_init__(self) -> None:
        if len(self.prompt_tokens) == 0 or len(self.prompt_tokens) != len(self.output_tokens):
            raise ValueError(f"dataset {self.id}: prompt and output lengths must be non-empty and paired")
        if self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1:
            raise ValueError(f"dataset {self.id}: every length must be >= 1 token")

    def draw(self, n: int, prompt_mean: float, output_mean: float) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``n`` requests' (prompt, output) lengths: the first ``n`` pairs (cycled past the sample's end), each
        column scaled to its mean (rounded, at least 1 token)."""
        if n < 0:
            raise SpecError(f"must be >= 0, got {n}", field="requests")
        index = np.arange(n) % len(self.prompt_tokens)
        return _scaled(self.prompt_tokens[index], prompt_mean), _scaled(self.output_tokens[index], output_mean)

    def longest(self, prompt_mean: float, output_mean: float) -> int:
        """An upper bound on the longest request (prompt + output tokens) of a replay of any size at these means:
        a replay of n <= the sample's size scales by its first n pairs' means (each n tried); a longer one by a
        mean between those and the whole sample's, so each column takes the larger of the two scales."""
        p, o = self.prompt_tokens.astype(np.float64), self.output_tokens.astype(np.float64)
        n = np.arange(1, len(p) + 1)
        scale_p, scale_o = prompt_mean / (np.cumsum(p) / n), output_mean / (np.cumsum(o) / n)
        short = np.tril(p[None, :] * scale_p[:, None] + o[None, :] * scale_o[:, None])  # row n-1: the first n
        whole_p, whole_o = prompt_mean / p.mean(), output_mean / o.mean()
        long = p * np.maximum(scale_p.max(), whole_p) + o * np.maximum(scale_o.max(), whole_o)
        return int(np.ceil(max(short.max(), long.max()))) + 1  # rounding to whole tokens adds at most 1


def _scaled(tokens: NDArray[np.int64], mean: float) -> NDArray[np.int64]:
    if not len(tokens):
        return tokens.astype(np.int64)
    if not mean >= 1.0:
        raise SpecError(f"mean length must be >= 1 token, got {mean}", field="tokens")
    out: NDArray[np.int64] = np.maximum(1, np.rint(tokens * (mean / tokens.mean()))).astype(np.int64)
    return out


@cache
def length_datasets() -> dict[str, DatasetLengths]:
    """Every packaged dataset by id."""
    from fabricsim.catalog import read_packaged_yaml

    out = {}
    for item in read_packaged_yaml("fabricsim.serving.data", "datasets.yaml")["datasets"]:
        out[item["id"]] = DatasetLengths(
            id=item["id"], name=item["name"], source=item["source"],
            prompt_tokens=np.asarray(item["prompt_tokens"], dtype=np.int64),
            output_tokens=np.asarray(item["output_tokens"], dtype=np.int64))
    return out


def length_dataset(name: str, *, field: str = "--lengths") -> DatasetLengths | None:
    """The dataset ``name`` names (``fixed``: none, every request at the stated lengths); an unknown name is a
    SpecError listing the known ones."""
    key = name.strip().lower()
    if key == FIXED:
        return None
    known = length_datasets()
    if key not in known:
        raise unknown_name_error("length dataset", key, [FIXED, *known], field=field)
    return known[key]
