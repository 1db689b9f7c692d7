"""Free parameters of the inference model, read from the packaged ``data/inference.yaml`` (each entry carries its
source): kernel latency and inventory, engine features by version, routing skew. The engines' memory, scheduler
and host figures are ``data/engines.yaml``."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from fabricsim import units
from fabricsim.catalog import read_packaged_yaml

INFERENCE_FILE = "inference.yaml"


@lru_cache(maxsize=1)
def inference_defaults() -> Any:
    """The packaged ``data/inference.yaml``: the inference model's and the engines' free parameters."""
    return read_packaged_yaml("fabricsim.inference.data", INFERENCE_FILE)


@lru_cache(maxsize=1)
def kernel_latency_s() -> float:
    """Seconds every kernel of a forward pass takes beyond its roofline work (``inference.kernel_latency``)."""
    return units.parse_duration(str(inference_defaults()["kernel_latency"]["seconds"]))


@lru_cache(maxsize=1)
def layer_kernels() -> dict[str, int]:
    """Kernels of a decoder layer beside the weight GEMMs of its shapes, by component (``inference.layer_kernels``)."""
    spec = inference_defaults()["layer_kernels"]
    return {k: int(spec[k]) for k in ("norms", "attention", "mla_gemms", "mla_norms", "mlp_activation", "moe")}


def expert_load_dispersion() -> float:
    """Coefficient of variation of one routed expert's load beyond balanced routing (``fabricsim.model``'s
    ``data/routing.yaml``, shared with training)."""
    from fabricsim.model import expert_load_dispersion as dispersion

    return dispersion()
