"""Routed experts under a step's tokens: how many distinct experts they touch, and how much more than the mean
the most loaded expert-parallel rank carries (balanced top-k routing noise plus the routing skew). Shared by the
training and inference models; the skew figure lives in ``data/routing.yaml`` with its source."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import erf, pi, sqrt
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.catalog import read_packaged_yaml

if TYPE_CHECKING:
    from numpy.typing import NDArray


@lru_cache(maxsize=1)
def expert_load_dispersion() -> float:
    """Coefficient of variation of one routed expert's load beyond balanced routing (``data/routing.yaml``)."""
    return float(read_packaged_yaml("fabricsim.model.data", "routing.yaml")["expert_load_dispersion"]["value"])


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normal draws] (0 for n = 1), by quadrature of n x phi(x) x Phi(x)^(n-1)."""
    if n <= 1:
        return 0.0
    x = np.linspace(-10.0, 10.0, 8001)
    pdf = np.exp(-0.5 * x * x) / sqrt(2.0 * pi)
    cdf = 0.5 * (1.0 + np.array([erf(v / sqrt(2.0)) for v in x]))
    density = n * pdf * cdf ** (n - 1)
    return float(np.sum(x * density) * (x[1] - x[0]))


@dataclass(frozen=True)
class ExpertLoad:
    """How much more than the mean expert-parallel rank the most loaded one carries, for T routed tokens:
    ``min(cap, 1 + z x sqrt(a / T + b))`` (``expert_load_terms``); the one formula every MoE cost uses."""

    z: float = 0.0
    a: float = 0.0
    b: float = 0.0
    cap: float = 1.0

    def peak(self, tokens: float) -> float:
        """The most loaded rank's routed tokens over the mean rank's (1 when balanced or without EP)."""
        if self.z == 0.0 or tokens <= 0:
            return 1.0
        return min(self.cap, 1.0 + self.z * sqrt(self.a / tokens + self.b))

    def peak_many(self, tokens: NDArray[np.float64]) -> NDArray[np.float64] | float:
        """``peak`` over an array of token counts (the same arithmetic)."""
        if self.z == 0.0:
            return 1.0
        raw = 1.0 + self.z * np.sqrt(self.a / np.maximum(tokens, 1e-300) + self.b)
        return np.where(tokens > 0, np.minimum(self.cap, raw), 1.0)


def expert_load_terms(experts: int, top_k: int, ep: int, dispersion: float | None = None) -> ExpertLoad:
    """The load of the most loaded of the ep expert-parallel ranks: (1 + z x sqrt(a / T + b)) x the mean rank's
    routed tokens for T tokens in the step, at most ``cap`` x. a / T is the multinomial variance of balanced-random
    top-k routing (each token picks k distinct experts of E; a rank holds E / ep), b the skew of real routing
    (``dispersion``, default ``expert_load_dispersion``, squared over the E / ep experts a rank sums; 0 for
    balanced-random routing), z the expected maximum of ep normal
    draws. ``cap`` = min(ep, E / k) is what a rank can physically receive: each token sends a rank at most
    min(k, E / ep) of its k picks, against k / ep on the mean rank; the normal approximation overshoots it when k
    nears E (at k = E every rank gets every token: cap 1, balanced), and the cap keeps a rank's load k x peak
    non-decreasing in k and continuous up to k = E. No terms without expert parallelism: every GPU then holds a
    slice of every expert."""
    if experts == 0 or ep <= 1 or top_k < 1:
        return ExpertLoad()
    k = min(top_k, experts)
    cap = min(float(ep), experts / k)
    if cap <= 1.0:
        return ExpertLoad()
    a = (ep - 1) * (experts - k) / ((experts - 1) * k)
    b = (expert_load_dispersion() if dispersion is None else dispersion) ** 2 * ep / experts
    return ExpertLoad(expected_max_normal(ep), a, b, cap)


def expert_load_peak(experts: int, top_k: int, ep: int, tokens: float) -> float:
    """The most loaded expert-parallel rank's routed tokens over the mean rank's (1 when balanced or ep = 1): the
    MoE GEMMs and the dispatch/combine of a step wait for that rank."""
    return expert_load_terms(experts, top_k, ep).peak(tokens)


def touched_experts(experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts a step's tokens route to: E x (1 - (1 - k / E)^tokens)."""
    if experts == 0 or tokens <= 0:
        return 0.0
    return float(experts * (1.0 - (1.0 - top_k / experts) ** tokens))


def expected_remote_nodes(experts: int, top_k: int, nodes: int) -> float:
    """Expected distinct OTHER nodes a token's top_k experts sit on, experts spread evenly over ``nodes`` nodes and
    picked uniformly: (nodes - 1) x (1 - C(E - E/n, k) / C(E, k)). A node-aware dispatcher (DeepEP, HybridEP)
    sends a token over the network once per such node and fans it out over NVLink there."""
    if nodes <= 1 or experts < 1 or top_k < 1:
        return 0.0
    k = min(top_k, experts)
    off = experts - experts / nodes  # experts not on one given node
    if off < k:
        return float(nodes - 1)
    from math import lgamma

    log_none = lgamma(off + 1) - lgamma(off - k + 1) - (lgamma(experts + 1) - lgamma(experts - k + 1))
    return float((nodes - 1) * (1.0 - np.exp(log_none)))
