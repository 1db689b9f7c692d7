"""Error bands for a command's predictions: each predicted time or rate with the band of measured values that
comparable published cases put around it (``errors.band``), for JSON (``<key>_band``) and for tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fabricsim.catalog import GPU
from fabricsim.validation.error_model import LEVEL, Band, NoBand, band
from fabricsim.validation.error_table import published_residuals
from fabricsim.validation.regimes import DECODE, TTFT, Regime, inference_regime

BandResult = Band | NoBand


def bands(values: Mapping[str, tuple[float, bool]], regime: Regime, calibration: Sequence[str] = (),
          level: float = LEVEL) -> dict[str, BandResult]:
    """The band of each named value ``{key: (value, time_like)}`` in one regime, from the published residuals
    under the ``calibration`` overlays (the residuals after calibration)."""
    residuals = published_residuals(tuple(str(p) for p in calibration))
    return {key: band(value, time_like, regime, residuals, level) for key, (value, time_like) in values.items()}


def unvalidated_band(reason: str, level: float = LEVEL) -> NoBand:
    """The answer for a figure no published measurement covers (the reason says why), for its ``<key>_band``."""
    return NoBand(reason, level)


def band_fields(found: Mapping[str, BandResult]) -> dict[str, object]:
    """``{<key>_band: {low, high, level, cases, bias, estimate, comparable}}`` for a JSON object."""
    return {f"{key}_band": b.to_json() for key, b in found.items()}


def band_text(b: BandResult, scale: float = 1.0, fmt: str = "{:.3g}", unit: str = "") -> str:
    """A band as 'low-high unit' (``scale`` converts from SI for display), or its reason when there is none."""
    if isinstance(b, NoBand):
        return "no comparable published measurement"
    return f"{fmt.format(b.low * scale)}-{fmt.format(b.high * scale)}{unit}"


def band_note(found: Mapping[str, BandResult]) -> str:
    """One line for under a table: the level, how many comparable cases and which regime, or why there is none."""
    shown = list(found.values())
    banded = [b for b in shown if isinstance(b, Band)]
    if not banded:
        reasons = sorted({b.reason for b in shown if isinstance(b, NoBand)})
        return "error band: " + ("; ".join(reasons) if reasons else "none")
    first = banded[0]
    cases = sorted({b.cases for b in banded})
    count = str(cases[0]) if len(cases) == 1 else f"{cases[0]}-{cases[-1]}"
    missing = len(shown) - len(banded)
    tail = f"; {missing} without comparable published cases" if missing else ""
    return (f"error band: {first.level:.0%} of measurements expected inside, from {count} comparable published "
            f"cases ({first.matched}); model bias on them {first.bias:+.0%}{tail}")


def inference_bands(values: Mapping[str, tuple[float, bool, str]], engine: str, gpu: GPU, moe: bool, served: bool,
                    weights: str, calibration: Sequence[str] = ()) -> dict[str, BandResult]:
    """Bands of inference figures ``{key: (value, time_like, family)}``: a TTFT from the published TTFTs, a TPOT,
    throughput or end-to-end time from the published decode rates, each with the engine's own cases."""
    out: dict[str, BandResult] = {}
    for family in dict.fromkeys(f for _, _, f in values.values()):
        regime = inference_regime(family, engine, gpu, moe, served, weights)
        chosen = {k: (v, t) for k, (v, t, f) in values.items() if f == family}
        out.update(bands(chosen, regime, calibration))
    return {k: out[k] for k in values}


def static_inference_values(ttft_s: float, tpot_s: float, e2e_s: float, tokens_per_s: float,
                            tokens_per_s_per_gpu: float) -> dict[str, tuple[float, bool, str]]:
    """A static batch's predicted figures with their orientation and family (``inference_bands``)."""
    return {"ttft_s": (ttft_s, True, TTFT), "tpot_s": (tpot_s, True, DECODE), "e2e_s": (e2e_s, True, DECODE),
            "output_tokens_per_s": (tokens_per_s, False, DECODE),
            "output_tokens_per_s_per_gpu": (tokens_per_s_per_gpu, False, DECODE)}


def served_values(percentiles: Mapping[str, float | None], tokens_per_s: float
                  ) -> dict[str, tuple[float, bool, str]]:
    """A serving simulation's latency percentiles (``ttft_s_p50`` ...) and output rate, for ``inference_bands``."""
    out: dict[str, tuple[float, bool, str]] = {}
    for key, value in percentiles.items():
        if value is not None and value > 0:
            out[key] = (value, True, TTFT if key.startswith("ttft") else DECODE)
    if tokens_per_s > 0:
        out["served_output_tokens_per_s"] = (tokens_per_s, False, DECODE)
    return out
