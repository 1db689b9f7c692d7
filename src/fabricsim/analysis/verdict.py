"""The one-line verdict of `whatif`: which layer's speed-up buys the most, and whether any priced swap pays for
itself (throughput per capital dollar improves), said plainly when the plan is compute-bound."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricsim.analysis.deltas import LayerDelta, SwapDelta
from fabricsim.training import TrainingPrediction
from fabricsim.validation import ComparisonBand, NoBand

ON_CHIP = ("compute", "hbm")


@dataclass(frozen=True)
class Verdict:
    """Where the next dollar goes: the layer whose speed-up buys the most, the swap that pays (if any), a sentence."""

    layer: str
    sentence: str
    swap: str | None
    compute_bound: bool

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, "sentence": self.sentence, "swap": self.swap, "compute_bound": self.compute_bound}


def usd(value: float) -> str:
    """``2_150_000`` -> ``+$2.15M``; ``-40_000`` -> ``-$0.04M``."""
    return f"{'-' if value < 0 else '+'}${abs(value) / 1e6:,.2f}M"


def trade_phrase(s: SwapDelta, totals: bool = False) -> str | None:
    """What an upgrade or a downgrade trades, as a rate only over a measurable change (`MEASURABLE_PERCENT`):
    ``+0.52% per $1M`` or ``no measurable speed-up for +$0.07M``; ``saves $0.52M per 1% slower`` or ``saves $0.62M
    at no measurable cost``; with ``totals``, led by the change and its cost (``+1.2% for +$2.15M, ...``). None for
    any other kind (a win, a loss, no change, cost unknown). The one wording of `whatif`'s table and verdict."""
    cost = s.cost_delta_usd
    if cost is None or s.kind not in ("upgrade", "downgrade"):
        return None
    if s.kind == "upgrade":
        per = s.percent_per_million_usd
        if per is None:
            return f"no measurable speed-up for {usd(cost)}"
        return (f"{s.percent_faster:+.1f}% for {usd(cost)}, " if totals else "") + f"{per:+.2f}% per $1M"
    saves, saved = f"saves ${-cost / 1e6:,.2f}M", s.savings_usd_per_percent_slower
    if saved is None:
        return f"{saves} at no measurable cost"
    rate = f"${saved / 1e6:,.2f}M per 1% slower"
    return f"{saves} for {s.percent_slower:.1f}% slower, {rate}" if totals else f"saves {rate}"


def _swap_phrase(s: SwapDelta) -> str:
    """A swap with what it trades (`trade_phrase`), or its speed-up for its cost when it is neither an upgrade nor
    a downgrade."""
    trade = trade_phrase(s, totals=True)
    if trade is not None:
        return f"{s.swap} ({trade})"
    cost = "cost unknown" if s.cost_delta_usd is None else usd(s.cost_delta_usd)
    return f"{s.swap} ({s.percent_faster:+.1f}% for {cost})"


def _downgrade_note(swaps: tuple[SwapDelta, ...], base_capex_usd: float | None) -> str:
    """The downgrade that saves the most per 1% slower (one at no measurable cost first, the largest saving
    first) among those that raise the work done per capital dollar, said as a saving (never as the next dollar)."""
    downs = [s for s in swaps if s.kind == "downgrade" and (s.work_per_usd_change(base_capex_usd) or 0.0) > 0]
    if not downs:
        return ""
    top = max(downs, key=lambda s: (not s.measurable,
                                    s.savings_usd_per_percent_slower or -(s.cost_delta_usd or 0.0)))
    change = top.work_per_usd_change(base_capex_usd)
    work = "" if change is None else f"; work per capital dollar {change * 100:+.1f}%"
    return f"; a downgrade, if time allows: {_swap_phrase(top)}{work}"


def _within_error_note(swaps: tuple[SwapDelta, ...], base_capex_usd: float | None,
                       comparison: ComparisonBand | NoBand | None) -> str:
    """Swaps that would pay at the predicted speed-up but not beyond the model's error on comparisons."""
    close = [s for s in swaps if s.within_error(base_capex_usd)]
    if not close:
        return ""
    names = ", ".join(s.swap for s in close)
    if isinstance(comparison, ComparisonBand):
        why = (f"within the model's error on a speed-up (±{comparison.percent:.0f}% at {comparison.level:.0%}, "
               f"{comparison.pairs} pairs of comparable published runs)")
    else:
        why = "not bounded: " + (comparison.reason if isinstance(comparison, NoBand) else "no error model")
    return f"; {names} would pay at the predicted speed-up, but the gain is {why}: not a clear gain"


def _rank(s: SwapDelta) -> float:
    """Gain per dollar; a swap that costs nothing (or saves money) and is faster ranks first."""
    per = s.percent_per_million_usd
    return float("inf") if per is None else per


def verdict(base: TrainingPrediction, factor: float, layers: tuple[LayerDelta, ...], swaps: tuple[SwapDelta, ...],
            base_capex_usd: float | None, missing_prices: tuple[str, ...] = (),
            comparison: ComparisonBand | NoBand | None = None) -> Verdict:
    """The layer with the largest speed-up (the first listed on ties), and the best swap that pays for itself."""
    best = max(layers, key=lambda d: d.speedup)
    compute_bound = best.layer in ON_CHIP
    head = f"{factor:g}x faster {best.layer} buys the most: the step gets {best.speedup:.2f}x faster"
    if compute_bound:
        network = [d for d in layers if d.layer not in ON_CHIP]
        most = max(network, key=lambda d: d.speedup, default=None)
        if most is not None:
            head += f" (the plan is compute-bound: {factor:g}x faster {most.layer} gives only {most.speedup:.2f}x)"
    worth = [s for s in swaps if s.worth_it(base_capex_usd)]  # only faster clusters: a downgrade is said apart
    unknown = [s for s in swaps if s.worth_it(base_capex_usd) is None]
    pick: str | None = None
    if worth:
        top = max(worth, key=_rank)
        pick = top.swap
        tail = f"; the next dollar goes to {_swap_phrase(top)}"
    elif swaps:
        priced = [s for s in swaps if s.percent_per_million_usd is not None]
        reason = "no network upgrade pays for its cost" if compute_bound else "no upgrade pays for its cost"
        tail = f"; {reason}"
        if priced:
            tail += " (best per dollar: " + _swap_phrase(max(priced, key=_rank)) + ")"
    else:
        tail = "; no network upgrade would pay" if compute_bound else f"; the next dollar goes to {best.layer}"
    tail += _within_error_note(swaps, base_capex_usd, comparison)
    tail += _downgrade_note(swaps, base_capex_usd)
    if unknown:
        missing = sorted({m for s in unknown for m in s.missing_prices} | set(missing_prices))
        tail += (f"; not priced: {', '.join(s.swap for s in unknown)}"
                 + (f" (catalog lacks {', '.join(missing)})" if missing else ""))
    return Verdict(best.layer, head + tail, pick, compute_bound)
