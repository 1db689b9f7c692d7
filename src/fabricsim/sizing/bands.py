"""Error bands of an inference sizing result (its latency percentiles and its cost per output token, which scales
as the inverse of the decode rate) from comparable published inference cases of the engine, and its ties."""

from __future__ import annotations

import math
from typing import Any

from fabricsim.catalog import Catalog
from fabricsim.inference import engine_profile
from fabricsim.model import ModelSpec
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
    recommend one among them by fewer GPUs, then tensor parallelism inside one NVLink domain, then fewer
    pipeline stages."""
    if not passed:
        return None
    best = passed[0]
    gpu = catalog.gpu(catalog.system(str(best["system"])).gpu)
    regime = inference_regime(DECODE, engine_profile(engine).label, gpu, model.moe is not None, True,
                              str(best["plan"]["weights"]))
    band = comparison_band(regime, published_residuals())
    cheapest = best["usd_per_million_output_tokens"]
    limit = None if cheapest is None or not isinstance(band, ComparisonBand) else cheapest * math.exp(band.high)
    for i, e in enumerate(passed):
        cost = e["usd_per_million_output_tokens"]
        e["tie"] = i == 0 or (limit is not None and cost is not None and cost <= limit)
    tied = [(i, e) for i, e in enumerate(passed) if e["tie"]]

    def key(item: tuple[int, dict[str, Any]]) -> tuple[Any, ...]:
        i, e = item
        outside = int(e["plan"]["tp"] > catalog.system(str(e["system"])).nvlink_domain_gpus)
        return (e["gpus"], outside, e["plan"]["pp"], i)

    return {"count": len(tied), "comparison_band": band.to_json(), "secondary": INFERENCE_SECONDARY,
            "recommended": min(tied, key=key)[1],
            "rule": "confirmed plans whose cost per token is within the model's error on comparing two plans (paired "
                    "published residuals) of the cheapest are ties; the secondary objective picks among them"}


INFERENCE_SECONDARY = "fewer GPUs, then tensor parallelism inside one NVLink domain, then fewer pipeline stages"
