"""Routed experts under a step's tokens: how many distinct experts they touch, and how much more than the mean
the most loaded expert-parallel rank carries (balanced top-k routing noise plus the routing skew)."""

from __future__ import annotations

from functools import lru_cache
from math import erf, pi, sqrt

import numpy as np

from fabricsim.inference.params import expert_load_dispersion


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


def expert_load_terms(experts: int, top_k: int, ep: int) -> tuple[float, float, float]:
    """(z, a, b) with which the most loaded of the ep expert-parallel ranks carries (1 + z x sqrt(a / T + b)) x the
    mean rank's routed tokens for T tokens in the step: a / T is the multinomial variance of balanced-random top-k
    routing (each token picks k distinct experts of E; a rank holds E / ep), b the skew of real routing
    (``expert_load_dispersion`` squared over the E / ep experts a rank sums), z the expected maximum of ep normal
    draws. (0, 0, 0) without expert parallelism: every GPU then holds a slice of every expert."""
    if experts == 0 or ep <= 1 or top_k >= experts:
        return 0.0, 0.0, 0.0
    a = (ep - 1) * (experts - top_k) / ((experts - 1) * top_k)
    b = expert_load_dispersion() ** 2 * ep / experts
    return expected_max_normal(ep), a, b


def expert_load_peak(experts: int, top_k: int, ep: int, tokens: float) -> float:
    """The most loaded expert-parallel rank's routed tokens over the mean rank's (1 when balanced or ep = 1): the
    MoE GEMMs and the dispatch/combine of a step wait for that rank."""
    z, a, b = expert_load_terms(experts, top_k, ep)
    if z == 0.0 or tokens <= 0:
        return 1.0
    return 1.0 + z * sqrt(a / tokens + b)


def touched_experts(experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts a step's tokens route to: E x (1 - (1 - k / E)^tokens)."""
    if experts == 0 or tokens <= 0:
        return 0.0
    return float(experts * (1.0 - (1.0 - top_k / experts) ** tokens))
