"""Error bands of an inference sizing result: its latency percentiles and its cost per output token (which scales
as the inverse of the decode rate), from comparable published inference cases of the engine."""

from __future__ import annotations

from typing import Any

from fabricsim.catalog import Catalog
from fabricsim.inference import engine_profile
from fabricsim.model import ModelSpec
from fabricsim.validation import DECODE, band_fields, inference_bands, served_values


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
