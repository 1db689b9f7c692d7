"""Error bands of an inference sizing result (its latency percentiles and its cost per output token, which scales
as the inverse of the decode rate) from comparable published inference cases of the engine, and its ties."""

from __future__ import annotations

import math
from typing import Any

from fabricsim.catalog import Catalog
from fabricsim.inference import engine_profile
from fabricsim.model import ModelSpec
from fabricsim.sizing.rank import secondary_text, tie_mask, tie_winner
from fabricsim.validation import (
    DECODE,
    ComparisonBand,
    band_fields,
    comparison_band,
    inference_bands,
    inference_regime,
    published_residuals,
    served_values,
)


def result_bands(engine: str, model: ModelSpec, system: str, weights: str, catalog: Catalog,
                 latencies: dict[str, Any], usd_per_million: float | None, served: bool) -> dict[str, object]:
    """``<key>_band`` for each known latency percentile (``ttft_s_p50`` ...) and the cost per million output tokens;
    ``served``: the figures come from the serving simulation (else from the static screen)."""
    values = served_values(latencies, 0.0)
    if usd_per_million is not None and usd_per_million > 0:
        values["usd_per_million_output_tokens"] = (usd_per_million, True, DECODE)
    gpu = catalog.gpu(catalog.system(system).gpu)
    return band_fields(inference_bands(values, engine_profile(engine).label, gpu, model.moe is not None, served,
                                       weights))


def inference_ties(engine: str, model: ModelSpec, passed: list[dict[str, Any]], catalog: Catalog
                   ) -> dict[str, Any] | None:
    """Tag the confirmed results (cheapest first) whose cost per token is within the model's error on comparing
    two serving plans (paired published residuals of the engine's decode rates) of the cheapest as ``tie``, and
    recommend one among them by the training search's tie-break with cost as the objective (``rank.tie_mask``,
    ``rank.tie_winner``): fewer GPUs, then tensor parallelism inside one NVLink domain, then fewer pipeline
    stages."""
    import pandas as pd

    if not passed:
        return None
    best = passed[0]
    gpu = catalog.gpu(catalog.system(str(best["system"])).gpu)
    regime = inference_regime(DECODE, engine_profile(engine).label, gpu, model.moe is not None, True,
                              str(best["plan"]["weights"]))
    band = comparison_band(regime, published_residuals())
    frame = pd.DataFrame({
        "cost_usd": [math.nan if e["usd_per_million_output_tokens"] is None else e["usd_per_million_output_tokens"]
                     for e in passed],
        "gpus": [e["gpus"] for e in passed], "tp": [e["plan"]["tp"] for e in passed],
        "pp": [e["plan"]["pp"] for e in passed], "system": [e["system"] for e in passed]})
    # without comparable published pairs the model's comparison error is unknown: only plans as cheap as the
    # cheapest (spread 0) are ties
    mask = tie_mask(frame, "cost", band.high if isinstance(band, ComparisonBand) else 0.0)
    for e, tie in zip(passed, mask, strict=True):
        e["tie"] = bool(tie)
    nvlink = {s: catalog.system(str(s)).nvlink_domain_gpus for s in set(frame["system"])}
    return {"count": int(mask.sum()), "comparison_band": band.to_json(), "secondary": secondary_text("cost"),
            "recommended": passed[tie_winner(frame, mask, nvlink, "cost")],
            "rule": "confirmed plans whose cost per token is within the model's error on comparing two plans (paired "
                    "published residuals) of the cheapest are ties; the secondary objective picks among them"}
