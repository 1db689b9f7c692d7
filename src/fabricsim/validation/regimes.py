"""The regime of a prediction: the few facts that decide how wrong the model tends to be there (what is predicted,
which layer bounds it, which GPU generation, what scale). Published cases and a user's question are described the
same way, so the error model can compare like with like.

A regime is a kind (collective, training, inference), a family within it (the quantity: a collective's time, a
training step, an inference TTFT or decode rate) and features ordered from most to least telling. The first
``essential`` features must match for a case to be comparable at all; the others are dropped, last first, until
enough comparable cases remain (``fabricsim.validation.error_model``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricsim.catalog import GPU

LATENCY_BOUNDS = frozenset({"latency", "launch"})
SCALE_BANDS = ((8, "1-8 GPUs"), (64, "9-64 GPUs"), (512, "65-512 GPUs"))
LARGEST_SCALE = "over 512 GPUs"
TIME_METRICS = frozenset({"time_us", "ttft_first_token_latency", "ttft_mean", "ttft_median", "tpot_mean",
                          "tpot_median", "e2e_latency", "moe_dispatch_latency", "moe_combine_latency"})
"""Validation metrics that are durations (the others are rates): a band turns over between the two."""
TTFT = "ttft"
DECODE = "decode"
INFERENCE_FAMILIES = {"ttft_first_token_latency": TTFT, "ttft_mean": TTFT, "ttft_median": TTFT,
                      "moe_dispatch_latency": "moe_comm", "moe_combine_latency": "moe_comm",
                      "moe_dispatch_bottleneck_bandwidth": "moe_comm"}
"""Inference metrics by family; the rest (throughput, TPOT, end-to-end latency) measure the decode rate."""


@dataclass(frozen=True)
class Regime:
    """Where a prediction sits: its kind, family and ordered features (name, value), the first ``essential`` of
    which a comparable case must share."""

    kind: str
    family: str
    features: tuple[tuple[str, str], ...]
    essential: int = 0

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "family": self.family, "features": dict(self.features),
                "essential": [name for name, _ in self.features[: self.essential]]}

    def describe(self, depth: int | None = None) -> str:
        """The family and the first ``depth`` features (all by default) as words."""
        shown = self.features if depth is None else self.features[:depth]
        return ", ".join([f"{self.kind} {self.family}".strip(), *(value for _, value in shown)])


def architecture(gpu: GPU) -> str:
    """The GPU's architecture, or its id where the catalog does not name one."""
    return gpu.architecture or gpu.id


def scale_band(gpus: int) -> str:
    """A GPU count as one of four bands (one node; a few nodes; hundreds; over 512)."""
    for top, label in SCALE_BANDS:
        if gpus <= top:
            return label
    return LARGEST_SCALE


def collective_regime(nnodes: int, bound: str, op: str, gpu: GPU) -> Regime:
    """A collective: inside one NVLink domain or across nodes, latency- or bandwidth-bound (as the model finds it),
    the GPU generation, the operation. Scope and bound are essential: a latency-bound 8-byte all-reduce says
    nothing about a 1 GiB one."""
    scope = "one NVLink domain" if nnodes <= 1 else "across nodes"
    regime = "latency-bound" if bound in LATENCY_BOUNDS else "bandwidth-bound"
    return Regime("collective", "time", (("scope", scope), ("bound", regime), ("gpu", architecture(gpu)),
                                         ("op", op)), essential=2)


def training_regime(moe: bool, gpu: GPU, precision: str, gpus: int, sharded: bool = False) -> Regime:
    """A training step: dense or mixture-of-experts and whether the parameters are sharded over the data-parallel
    ranks (ZeRO-3 / FSDP: per-layer gathers on the critical path, the PyTorch-native and JAX stacks) (both
    essential: one kind of stack's errors say little about the other's), GPU generation, precision, scale band."""
    return Regime("training", "step", (("model", "moe" if moe else "dense"),
                                       ("sharding", "sharded (ZeRO-3/FSDP)" if sharded else "not sharded"),
                                       ("gpu", architecture(gpu)), ("precision", precision),
                                       ("scale", scale_band(gpus))), essential=1)


def inference_family(metric: str) -> str:
    """The family of an inference validation metric: ttft, moe_comm or decode."""
    return INFERENCE_FAMILIES.get(metric, DECODE)


def inference_regime(family: str, engine: str, gpu: GPU, moe: bool, served: bool, weights: str) -> Regime:
    """An inference figure: its family and serving engine (both essential: one engine's errors say little about
    another's), GPU generation, static batch or served requests, dense or MoE, weight format."""
    name = engine.split("@")[0] if engine else "kernel"
    return Regime("inference", family, (("engine", name), ("gpu", architecture(gpu)),
                                        ("batching", "served" if served else "static"),
                                        ("model", "moe" if moe else "dense"), ("weights", weights)), essential=1)
