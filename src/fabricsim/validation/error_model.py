"""The error model: how wrong fabricsim has been on published measurements like the question asked, turned into a
band around each prediction.

Each counted validation case leaves a residual, ``ln(predicted / measured)`` of its rate (a duration's residual is
turned over, so a step time and a tokens/s figure share one sign convention). A question's comparable cases are those
of its kind and family that share its regime's features, dropping the least telling feature until enough remain
(``fabricsim.validation.regimes``). The band is the split-conformal interval of their residuals (Lei, G'Sell,
Rinaldo, Tibshirani & Wasserman, 'Distribution-Free Predictive Inference for Regression', JASA 2018): with n
residuals sorted, order statistics j = floor((n + 1)(1 - level) / 2) and n + 1 - j, which cover a new exchangeable
case with probability at least ``level``. Few cases widen the band by themselves (the order statistics move out);
fewer than 2 / (1 - level) - 1 cases (9 at 80%) give no finite band, and the answer says so instead of pretending.

Two things keep the band honest about a run the model has never seen (issue 45). The residuals are out of sample:
a case's blind residual (its prediction as first made, `fabricsim.validation.ledger`) where the ledger has one and the
model still makes that prediction (a mechanism that changed it leaves the model's own residual).
And cases of one published campaign share an offset (a random effect per document): the comparable cases often
come from one or two documents, whose spread says nothing about how far a new campaign sits from them. So a new
campaign's case is modelled as a campaign offset plus a deviation within its campaign, each drawn from what was
seen (``campaign_interval``): the offsets of the documents' mean residuals of the question's kind and family from
their median, each shrunk by its reliability (``campaign_offsets``), and the comparable cases' deviations from
their own document's mean; the band is the level's
quantiles of every such sum about the comparable cases' median (an empirical random-effects prediction interval:
heavy-tailed offsets, a few campaigns far off, widen it only as often as they occur, where a normal term in
quadrature with the pooled interval counted the campaigns' spread twice). ``between_campaign`` reports the
offsets' spread as a standard deviation (DerSimonian & Laird, Controlled Clinical Trials 1986).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fabricsim.caching import ByIdentity
from fabricsim.validation.regimes import Regime

LEVEL = 0.8
"""The band's nominal coverage: 80% (10th to 90th percentile of the comparable errors, widened when they are few)."""


@dataclass(frozen=True)
class Residual:
    """One published case's error in rate orientation: ``log_ratio = ln(predicted rate / measured rate)``."""

    id: str
    source: str  # the document it is from (``source_key``): cross-validation leaves a whole one out
    regime: Regime
    log_ratio: float  # out of sample: the blind residual where the ledger has one and the prediction stands
    own: bool = False  # a measurement of the user's own cluster kept in a calibration overlay
    model_log_ratio: float | None = None  # the model's own residual as it stands (None: ``log_ratio``)

    @property
    def current(self) -> float:
        """The residual of the model as it stands (comparisons of two of its predictions pair these)."""
        return self.log_ratio if self.model_log_ratio is None else self.model_log_ratio


@dataclass(frozen=True)
class Band:
    """Where the measured value of a prediction should lie, at ``level``, from ``cases`` comparable published
    cases; ``bias`` is their median relative error on this quantity ((predicted - measured) / measured) and
    ``estimate`` the prediction with that bias taken out (always inside the band)."""

    low: float
    high: float
    level: float
    cases: int
    bias: float
    estimate: float
    matched: str

    def to_json(self) -> dict[str, object]:
        return {"low": self.low, "high": self.high, "level": self.level, "cases": self.cases, "bias": self.bias,
                "estimate": self.estimate, "comparable": self.matched}

    def text(self, show: Callable[[float], str] = "{:.4g}".format) -> str:
        """'(low-high, 80% band from n comparable published cases)', ``show`` writing the bounds."""
        return (f"({show(self.low)}-{show(self.high)}, {self.level:.0%} band from {self.cases} comparable published "
                "cases)")

    def holds(self, value: float) -> bool:
        """Whether ``value`` lies inside the band."""
        return self.low <= value <= self.high

    def shown(self, raw: float) -> float:
        """The figure printed beside the band: the model's ``raw`` one where the band holds it, else its centre."""
        return raw if self.holds(raw) else self.estimate

    def figure(self, raw: float, show: Callable[[float], str] = "{:.4g}".format) -> str:
        """A figure with its band, the printed figure always inside it: the model's ``raw`` figure where the band
        holds it, otherwise the band's centre (``estimate``) with the raw figure and the bias named, so the reader
        knows which to plan with ('24.62ms (18.67ms-43.35ms, 80% band ...; model's raw figure 18.13ms, its bias
        there -26%)')."""
        if self.holds(raw):
            return f"{show(raw)} {self.text(show)}"
        return (f"{show(self.shown(raw))} ({show(self.low)}-{show(self.high)}, {self.level:.0%} band from {self.cases} "
                f"comparable published cases; model's raw figure {show(raw)}, its bias there {self.bias:+.0%})")


@dataclass(frozen=True)
class NoBand:
    """No band: no comparable published measurement (the reason says what was missing)."""

    reason: str
    level: float = LEVEL

    def to_json(self) -> dict[str, object]:
        return {"low": None, "high": None, "level": self.level, "cases": 0, "bias": None, "estimate": None,
                "comparable": None, "reason": self.reason}

    def text(self, show: Callable[[float], str] = "{:.4g}".format) -> str:
        return f"({self.reason})"

    def shown(self, raw: float) -> float:
        """No band: the model's figure as it is."""
        return raw

    def figure(self, raw: float, show: Callable[[float], str] = "{:.4g}".format) -> str:
        """The model's figure and why it has no band."""
        return f"{show(raw)} {self.text(show)}"


def shown_figure(value: float, band: Mapping[str, object] | None) -> float:
    """The figure to print beside a band in its JSON form (``<key>_band``): ``value`` where the band holds it (or
    there is none), else the band's centre, so no printed figure lies outside its printed band (`Band.shown` for
    the band object)."""
    if not band:
        return value
    low, high, estimate = band.get("low"), band.get("high"), band.get("estimate")
    if not (isinstance(low, float | int) and isinstance(high, float | int) and isinstance(estimate, float | int)):
        return value
    return value if low <= value <= high else float(estimate)


def minimum_cases(level: float = LEVEL) -> int:
    """The fewest residuals that give a finite two-sided conformal band at ``level`` (9 at 80%)."""
    return max(1, math.ceil(2.0 / (1.0 - level) - 1.0 - 1e-9))


def conformal_interval(log_ratios: Sequence[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The split-conformal interval of the residuals at ``level``; None when they are too few for a finite one."""
    n = len(log_ratios)
    j = math.floor((n + 1) * (1.0 - level) / 2.0 + 1e-9)
    if j < 1:
        return None
    ordered = np.sort(np.asarray(log_ratios, dtype=float))
    return float(ordered[j - 1]), float(ordered[n - j])


def _deepest(regime: Regime, same: Sequence[Residual], need: int) -> tuple[list[Residual], int] | None:
    """The residuals sharing the most leading features of ``regime`` (at least its essential ones) that still
    number ``need``, and how many features they share."""
    for depth in range(len(regime.features), regime.essential - 1, -1):
        key = regime.features[:depth]
        matched = [r for r in same if r.regime.features[:depth] == key]
        if len(matched) >= need:
            return matched, depth
    return None


def comparable(regime: Regime, residuals: Sequence[Residual], level: float = LEVEL
               ) -> tuple[list[Residual], int] | NoBand:
    """The residuals comparable with ``regime`` and how many of its features they share: the most features that
    still leave enough cases, never fewer than its essential ones. The user's own calibration measurements, where
    enough of them are comparable, stand alone: they are the errors left on this very cluster. Found once per
    regime of a cached residual tuple (every band of every prediction asks)."""
    if isinstance(residuals, tuple):
        found = _cached_comparable(regime, ByIdentity(residuals), level)
        return found if isinstance(found, NoBand) else (list(found[0]), found[1])
    return _comparable(regime, residuals, level)


@lru_cache(maxsize=1024)
def _cached_comparable(regime: Regime, residuals: ByIdentity[tuple[Residual, ...]], level: float
                       ) -> tuple[tuple[Residual, ...], int] | NoBand:
    found = _comparable(regime, residuals.value, level)
    return found if isinstance(found, NoBand) else (tuple(found[0]), found[1])


def _comparable(regime: Regime, residuals: Sequence[Residual], level: float) -> tuple[list[Residual], int] | NoBand:
    """`comparable`, found."""
    need = minimum_cases(level)
    same = [r for r in residuals if r.regime.kind == regime.kind and r.regime.family == regime.family]
    for pool in ([r for r in same if r.own], [r for r in same if not r.own]):
        found = _deepest(regime, pool, need)
        if found is not None:
            return found
    same = [r for r in same if not r.own]
    essential = [r for r in same if r.regime.features[: regime.essential] == regime.features[: regime.essential]]
    return NoBand(f"no comparable published measurement: {len(essential)} published case(s) of "
                  f"{regime.describe(regime.essential)}; {need} are needed for an {level:.0%} band", level)


def between_campaign(regime: Regime, residuals: Sequence[Residual]) -> float:
    """The spread (standard deviation, log ratio) of published campaigns' mean residuals in ``regime``'s kind and
    family beyond what their own case noise explains: the method-of-moments between-document variance of a
    random-effects model, 0 where fewer than two documents or the documents agree."""
    docs = _documents(regime, residuals)
    if len(docs) < 2:
        return 0.0
    means = [statistics.fmean(v) for v in docs.values()]
    noise = [statistics.variance(v) / len(v) for v in docs.values() if len(v) > 1]
    return math.sqrt(max(0.0, statistics.variance(means) - (statistics.fmean(noise) if noise else 0.0)))


def campaign_interval(matched: Sequence[Residual], residuals: Sequence[Residual], regime: Regime,
                      level: float = LEVEL) -> tuple[tuple[float, float], float] | None:
    """The band of a new campaign's case (log ratios) and its centre, the comparable residuals' median: the
    ``level`` quantiles of every sum of a campaign offset (each document's mean residual in ``residuals`` of the
    regime's kind and family, less their median) and a within-campaign deviation (each of ``matched`` less its
    document's mean). The user's own calibration cases (one cluster, one campaign) keep the conformal interval of
    ``matched`` alone; None where too few residuals give a finite interval."""
    logs = [r.log_ratio for r in matched]
    interval = conformal_interval(logs, level)
    if interval is None:
        return None
    centre = statistics.median(logs)
    if matched and matched[0].own:
        return interval, centre
    by_document: dict[str, list[float]] = {}
    for r in matched:
        by_document.setdefault(r.source, []).append(r.log_ratio)
    within = np.array([x - statistics.fmean(v) for v in by_document.values() for x in v])
    sums = (campaign_offsets(regime, residuals)[:, None] + within[None, :]).ravel()
    # the (n + 1) q-th order statistic, as the split-conformal interval takes it (numpy's 'weibull' quantile)
    low, high = weibull_quantiles(sums, ((1.0 - level) / 2.0, (1.0 + level) / 2.0))
    return (centre + low, centre + high), centre


def weibull_quantiles(values: np.ndarray, quantiles: Sequence[float]) -> list[float]:
    """``np.quantile(values, quantiles, method="weibull")``, computed as numpy computes it (virtual index n q + q - 1
    clipped to the sample, numpy's two-sided linear interpolation), so to the bit; without np.quantile, whose
    np.unique imports numpy.ma (10 ms of every banded command's start). NaN samples go to numpy itself."""
    arr = np.sort(np.asarray(values, dtype=np.float64))
    q = np.asarray(quantiles, dtype=np.float64)
    if arr.size == 0 or np.isnan(arr).any() or np.isnan(q).any():
        return [float(v) for v in np.quantile(values, quantiles, method="weibull")]
    n = arr.size
    virtual = n * q + (0 + q * (1 - 0 - 0)) - 1
    previous = np.floor(virtual)
    following = previous + 1
    above, below = virtual >= n - 1, virtual < 0
    previous[above] = following[above] = -1
    previous[below] = following[below] = 0
    lo, hi = previous.astype(np.intp), following.astype(np.intp)
    gamma = virtual - lo
    a, b = arr[lo], arr[hi]
    diff = b - a
    out = a + diff * gamma
    late = gamma >= 0.5
    out[late] = (b - diff * (1 - gamma))[late]
    return [float(v) for v in out]


def campaign_offsets(regime: Regime, residuals: Sequence[Residual]) -> np.ndarray:
    """Each published campaign's offset in ``regime``'s kind and family: its mean residual less the campaigns'
    median, shrunk toward 0 by its reliability tau^2 / (tau^2 + s^2 / n) (tau: ``between_campaign``; s^2: the mean
    squared deviation of a case from its campaign's mean; n: the campaign's cases), the best linear unbiased
    predictor of a random effect, so a campaign of two cases does not pass its noise off as an offset; [0] where
    fewer than two campaigns. Computed once per kind and family of a cached residual tuple (every band of every
    prediction asks for it; the exact-arithmetic variances cost ~2 ms a call)."""
    if isinstance(residuals, tuple):
        return _cached_offsets(regime.kind, regime.family, ByIdentity(residuals))
    return _offsets(regime, residuals)


@lru_cache(maxsize=64)
def _cached_offsets(kind: str, family: str, residuals: ByIdentity[tuple[Residual, ...]]) -> np.ndarray:
    out = _offsets(Regime(kind, family, ()), residuals.value)  # the offsets know a regime by its kind and family
    out.flags.writeable = False
    return out


def _offsets(regime: Regime, residuals: Sequence[Residual]) -> np.ndarray:
    """`campaign_offsets`, computed."""
    docs = _documents(regime, residuals)
    if len(docs) < 2:
        return np.zeros(1)
    tau2 = between_campaign(regime, residuals) ** 2
    deviations = [x - statistics.fmean(v) for v in docs.values() for x in v]
    s2 = statistics.fmean(d * d for d in deviations)
    middle = statistics.median(statistics.fmean(v) for v in docs.values())
    return np.array([(statistics.fmean(v) - middle) * (tau2 / (tau2 + s2 / len(v)) if tau2 > 0 else 0.0)
                     for v in docs.values()])


def _documents(regime: Regime, residuals: Sequence[Residual]) -> dict[str, list[float]]:
    """The published residuals of ``regime``'s kind and family, by document (the user's own left out)."""
    docs: dict[str, list[float]] = {}
    for r in residuals:
        if r.regime.kind == regime.kind and r.regime.family == regime.family and not r.own:
            docs.setdefault(r.source, []).append(r.log_ratio)
    return docs


def band(value: float, time_like: bool, regime: Regime, residuals: Sequence[Residual], level: float = LEVEL
         ) -> Band | NoBand:
    """The band of one predicted ``value`` (a duration when ``time_like``, else a rate) in ``regime``."""
    found = comparable(regime, residuals, level)
    if isinstance(found, NoBand):
        return found
    matched, depth = found
    fit = campaign_interval(matched, residuals, regime, level)
    if fit is None:  # comparable() returns at least minimum_cases(level) residuals
        raise AssertionError("too few residuals for a conformal interval")
    (lo, hi), centre = fit
    sign = 1.0 if time_like else -1.0  # the measured value is value * exp(sign * log_ratio)
    ends = sorted((value * math.exp(sign * lo), value * math.exp(sign * hi)))
    estimate = value * math.exp(sign * centre)
    where = regime.describe(depth)
    if matched[0].own:
        where = f"your calibration measurements: {where}"
    return Band(low=ends[0], high=ends[1], level=level, cases=len(matched), bias=value / estimate - 1.0,
                estimate=estimate, matched=where)


def log_ratio(error: float, time_like: bool) -> float:
    """A case's relative error ((predicted - measured) / measured) as a rate-oriented log ratio."""
    value = math.log1p(error)
    return -value if time_like else value


_URL = re.compile(r"^(?:https?://)?(?:www\.)?(?P<host>[^/\s]+)/(?P<path>\S*)")
_REPO = re.compile(r"^[\w.-]+/[\w.-]+$")
_NUMBER = re.compile(r"^#?(\d+)")


def _stem(path: str) -> str:
    """A document's name without folders, extension or trailing punctuation."""
    name = path.rstrip("/,;:)'\"").rsplit("/", 1)[-1]
    return re.sub(r"\.(md|html?|txt|pdf|yaml)$", "", name)


def source_key(source: str) -> str:
    """The published document a case is from, so cross-validation can leave a whole one out: repository and
    document name (every release of TensorRT-LLM's performance.md is one document), an issue or pull request by
    number, a web page by host and name, a paper by its arXiv id or else its first author."""
    text = source.strip()
    url = _URL.match(text)
    if url and "." in url.group("host"):
        host, parts = url.group("host").lower(), url.group("path").split("/")
        if host in ("github.com", "raw.githubusercontent.com") and len(parts) >= 2:
            repo, rest = f"{parts[0]}/{parts[1]}", parts[2:]
            if len(rest) >= 2 and rest[0] in ("issues", "pull") and _NUMBER.match(rest[1]):
                return f"{repo}#{_NUMBER.match(rest[1]).group(1)}".lower()  # type: ignore[union-attr]
            return f"{repo}:{_stem('/'.join(rest))}".lower()
        if host.endswith(".github.io") and parts:
            return f"{host.split('.')[0]}/{parts[0]}:{_stem(url.group('path'))}".lower()
        return f"{host}:{_stem(url.group('path'))}".lower()
    tokens = text.split()
    if tokens and _REPO.match(tokens[0]):
        repo = tokens[0]
        for i, token in enumerate(tokens[1:4], start=1):
            if token.lower() in ("pr", "issue", "pull") and i + 1 < len(tokens) and _NUMBER.match(tokens[i + 1]):
                return f"{repo}#{_NUMBER.match(tokens[i + 1]).group(1)}".lower()  # type: ignore[union-attr]
            if "/" in token or re.search(r"\.(md|html?|txt|pdf|yaml)\b", token):
                return f"{repo}:{_stem(token)}".lower()
        return repo.lower()
    paper = _ARXIV.match(text)
    if paper:  # a paper named by its arXiv id: that paper, not every paper that starts 'arXiv ...'
        return f"arxiv:{paper.group(1)}"
    return (tokens[0].rstrip(",.;") if tokens else "unknown").lower()


_ARXIV = re.compile(r"arxiv[\s:]*(\d{4}\.\d{4,5})", re.IGNORECASE)


@dataclass(frozen=True)
class ComparisonBand:
    """How far the ratio of two predictions of one kind (a swap's speed-up, one plan against another) may be off:
    the conformal interval of the differences between residuals of cases from the same published document (one
    campaign: the model's errors on its cases move together), both orders, so it is symmetric about 0. Assumes the
    two plans compared are as alike as two cases of one document; the pairs are not independent, so the level is
    approximate."""

    low: float  # log ratio
    high: float
    level: float
    pairs: int
    matched: str

    def ratio_range(self, ratio: float) -> tuple[float, float]:
        """The range of the true ratio for a predicted ``ratio`` (a speed-up)."""
        return ratio * math.exp(self.low), ratio * math.exp(self.high)

    @property
    def percent(self) -> float:
        """The half-width as a percentage of the ratio (the high side)."""
        return math.expm1(self.high) * 100.0

    def to_json(self) -> dict[str, object]:
        return {"low": math.exp(self.low), "high": math.exp(self.high), "level": self.level, "pairs": self.pairs,
                "comparable": self.matched}


def comparison_band(regime: Regime, residuals: Sequence[Residual], level: float = LEVEL
                    ) -> ComparisonBand | NoBand:
    """The band of a ratio of two predictions in ``regime`` from paired residuals (``ComparisonBand``)."""
    found = comparable(regime, [r for r in residuals if not r.own], level)
    if isinstance(found, NoBand):
        return found
    matched, depth = found
    by_source: dict[str, list[float]] = {}
    for r in matched:  # the model as it stands: two of its predictions compared, one campaign's cases paired
        by_source.setdefault(r.source, []).append(r.current)
    diffs = [a - b for logs in by_source.values() for i, a in enumerate(logs) for j, b in enumerate(logs) if i != j]
    interval = conformal_interval(diffs, level)
    if interval is None:
        return NoBand(f"too few pairs of comparable published cases from one document ({len(diffs) // 2}) to "
                      "bound a comparison", level)
    return ComparisonBand(low=interval[0], high=interval[1], level=level, pairs=len(diffs) // 2,
                          matched=regime.describe(depth))
