"""What `size --inference` searches: a model served at a request rate under TTFT and TPOT SLOs, the candidate
systems, fabrics and per-replica plan knobs, and how cost is counted (pydantic; defaults from data/defaults.yaml)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fabricsim.errors import SpecError
from fabricsim.sizing.defaults import YEAR_S, sizing_defaults

WeightFormat = Literal["bf16", "fp8", "int4", "fp4"]
KvFormat = Literal["bf16", "fp8"]
DEFAULT_WEIGHTS: tuple[WeightFormat, ...] = ("bf16", "fp8", "int4")  # fp4 only when asked (Blackwell only)
DEFAULT_KV: tuple[KvFormat, ...] = ("bf16", "fp8")
# CLI flag of each field, so a bad value names the option the user typed.
FLAGS = {"rate_per_s": "--rate", "slo_ttft_s": "--slo-ttft", "slo_tpot_s": "--slo-tpot", "prompt_tokens": "--prompt",
         "output_tokens": "--output", "duration_s": "--duration", "max_gpus": "--max-gpus",
         "slo_percentile": "--slo-percentile", "target_utilization": "--utilization", "weights": "--weights",
         "kv": "--kv", "confirm_top": "--confirm", "max_replicas": "--max-replicas", "engine": "--engine",
         "lengths": "--lengths", "kv_tier": "--kv-tier", "prefix_network": "--prefix-network",
         "kv_server": "--kv-server", "kv_servers": "--kv-servers"}


def _default(key: str) -> float:
    return sizing_defaults()[key].value


def _percentile_default() -> Literal[50, 90, 99]:
    value = int(_default("inference_slo_percentile"))
    if value not in (50, 90, 99):
        raise SpecError(f"must be 50, 90 or 99, got {value}", field="inference_slo_percentile")
    return value  # type: ignore[return-value]


class InferenceSizingSpec(BaseModel):
    """A serving sizing question: serve ``model`` at ``rate_per_s`` requests of ``prompt_tokens`` in and
    ``output_tokens`` out, TTFT and TPOT at their SLO percentile; which system, plan and replica count is cheapest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | dict[str, Any]
    rate_per_s: float = Field(gt=0, allow_inf_nan=False)
    slo_ttft_s: float = Field(gt=0, allow_inf_nan=False)
    slo_tpot_s: float = Field(gt=0, allow_inf_nan=False)
    prompt_tokens: int = Field(2048, ge=1)
    output_tokens: int = Field(256, ge=2)  # TPOT needs a second token
    systems: tuple[str, ...] | None = None  # None: every catalog system with a price
    fabrics: tuple[str, ...] | None = None  # None: per system the cheapest of DEFAULT_FABRICS that builds
    weights: tuple[WeightFormat, ...] = DEFAULT_WEIGHTS
    kv: tuple[KvFormat, ...] = DEFAULT_KV
    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    max_gpus: int | None = Field(None, ge=1)
    max_replicas: int = Field(default_factory=lambda: int(_default("inference_max_replicas")), ge=1)
    target_utilization: float = Field(default_factory=lambda: _default("inference_target_utilization"), gt=0, le=1)
    slo_percentile: Literal[50, 90, 99] = Field(default_factory=lambda: _percentile_default())
    duration_s: float = Field(default_factory=lambda: _default("inference_duration_s"), gt=0, allow_inf_nan=False)
    seed: int = 0
    confirm_top: int = Field(default_factory=lambda: int(_default("inference_confirm_top")), ge=0)
    whole_nodes: bool = False  # bill whole nodes (racks for NVL72) instead of the GPUs the replicas use
    rail_optimized: bool = True
    amortize_s: float = Field(4 * YEAR_S, gt=0)
    gpu_hour_usd: float | None = Field(None, gt=0)  # > 0: a free rental makes every cost $0
    pue: float = Field(1.3, ge=1.0)
    kwh_usd: float = Field(0.08, ge=0.0)
    top: int = Field(10, ge=1)
    engine: str = "trtllm"  # the serving engine (NAME[@VERSION]): its memory, scheduler and host time per step
    disagg: bool = False  # also search disaggregated prefill and decode pools (each pool's plan, the P:D ratio)
    checkpoint: str | None = None  # the checkpoint path or hub id the launch commands name (None: the model's name)
    lengths: str = "fixed"  # the simulated requests' lengths: fixed, or a dataset's spread scaled to the means
    kv_tier: Literal["none", "network"] = "none"  # a networked KV-cache tier beside every plan (inference.kvtier)
    prefix_network: float = Field(0.0, ge=0.0, le=1.0, allow_inf_nan=False)  # share of a prompt found in the tier
    kv_server: str | None = None  # the tier's server (catalog storage_servers; None: the default KV server)
    kv_servers: int | None = Field(None, ge=1)  # at least this many servers (None: the server's fewest sold)

    @property
    def longest_request_tokens(self) -> int:
        """Prompt + output tokens of the longest simulated request (the means with fixed lengths)."""
        from fabricsim.serving import length_dataset

        dataset = length_dataset(self.lengths)
        if dataset is None:
            return self.prompt_tokens + self.output_tokens
        return dataset.longest(self.prompt_tokens, self.output_tokens)

    @field_validator("lengths")
    @classmethod
    def _known_lengths(cls, value: str) -> str:
        from fabricsim.serving import length_dataset

        try:
            found = length_dataset(value)
        except SpecError as exc:  # an unknown dataset: the message names the known ones
            raise ValueError(exc.message) from None
        return "fixed" if found is None else found.id

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        from fabricsim.inference import engine_profile

        try:
            return engine_profile(value).label
        except SpecError as exc:  # an unknown engine or release: the message names the known ones
            raise ValueError(exc.message) from None

    @field_validator("tp", "pp", "ep")
    @classmethod
    def _positive(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is not None and (not value or min(value) < 1):
            raise ValueError("values must be at least 1")
        return value

    @classmethod
    def build(cls, **fields: Any) -> InferenceSizingSpec:
        """Validate, turning pydantic's error into a one-line SpecError naming the CLI flag."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            name = str(err["loc"][0]) if err["loc"] else "spec"
            message = str(err["msg"]).removeprefix("Value error, ")
            raise SpecError(f"{message} (got {err.get('input')!r})", field=FLAGS.get(name, name)) from None
