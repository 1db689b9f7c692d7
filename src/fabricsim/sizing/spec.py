"""What `size` searches: the workload, the constraints, the candidate clusters and the plan knobs (pydantic)."""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from fabricsim import units
from fabricsim.catalog import Catalog, default_catalog, load_catalog
from fabricsim.errors import SpecError
from fabricsim.sizing.defaults import YEAR_S
from fabricsim.training import GoodputSpec

# Knob -> ParallelPlan field whose bounds it takes
KNOB_PLAN_FIELDS = {"tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "etp": "etp", "vpp": "virtual_stages", "mbs": "mbs",
                    "zero": "zero"}


@lru_cache(maxsize=4)
def overlay_catalog(paths: tuple[str, ...]) -> Catalog:
    """The packaged catalog with these overlay files applied (cached per search: every cluster shares it)."""
    return load_catalog(*paths) if paths else default_catalog()


def check_plan_value(plan_field: str, value: Any, option: str) -> None:
    """A SpecError naming ``option`` when ``value`` is not what ParallelPlan accepts for ``plan_field`` (its type
    and bounds: the validation `train` applies to the same option), so a bad knob or fixed option fails before
    the search, not in every plan."""
    from pydantic import TypeAdapter, ValidationError

    from fabricsim.training import ParallelPlan

    info = ParallelPlan.model_fields[plan_field]
    try:
        kind: Any = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
        TypeAdapter(kind).validate_python(value)
    except ValidationError as exc:
        msg = str(exc.errors()[0]["msg"]).removeprefix("Input should be ")
        raise SpecError(f"must be {msg}, got {value!r}", field=option) from None


DEFAULT_FABRICS = ("hdr", "ndr", "xdr", "eth-400g")
MAX_SIZE = 2**20  # GPUs or nodes: a 3-tier fat tree of 144-port switches reaches 746,496 ports
RECOMPUTE = ("none", "selective", "full")
Objective = Literal["time", "cost", "energy"]
# Plan fields a search keeps as given (not searched): flags of the era or framework being sized.
FIXED_FIELDS = ("flash_attention", "sequence_parallel", "overlap_grad_reduce", "overlap_param_gather",
                "tp_comm_overlap", "kernels", "attention_kernel", "grad_dtype", "dropout", "zero3_gathers_per_layer",
                "zero3_reduce_bucket_params", "fsdp_copy_out")


class Knobs(BaseModel):
    """Values each plan knob may take; None: the search's default candidates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    etp: tuple[int, ...] | None = None
    vpp: tuple[int, ...] | None = None
    mbs: tuple[int, ...] | None = None
    recompute: tuple[Literal["none", "selective", "full"], ...] | None = None
    zero: tuple[int, ...] | None = None
    precision: tuple[Literal["bf16", "fp8"], ...] | None = None

    @field_validator("tp", "pp", "cp", "ep", "etp", "vpp", "mbs", "zero")
    @classmethod
    def _in_plan_range(cls, value: tuple[int, ...] | None, info: ValidationInfo) -> tuple[int, ...] | None:
        """Each value within the range `train` accepts for the plan field (ParallelPlan's own bounds)."""
        if value is None:
            return None
        name = str(info.field_name)
        if not value:
            raise SpecError("no value given", field=f"--{name}")
        for v in value:
            check_plan_value(KNOB_PLAN_FIELDS[name], v, f"--{name}")
        return value


class SizingSpec(BaseModel):
    """A sizing question: train ``model`` on ``tokens`` under constraints; which cluster and plan is best."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | dict[str, Any]  # a preset name or YAML path, or a model spec mapping
    tokens: float = Field(gt=0)
    seq: int = Field(8192, ge=1)
    gbs: tuple[int, ...] = Field((1024,), min_length=1)
    gpus: tuple[int, ...] | None = None  # targets; per system rounded to whole nodes (or NVLink-domain racks)
    gpus_range: tuple[int, int] | None = None  # --gpus lo..hi: whole units inside it are searched too
    nodes: tuple[int, ...] | None = None

    @field_validator("gpus", "nodes")
    @classmethod
    def _at_most_max(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is not None and max(value) > MAX_SIZE:
            raise ValueError(f"at most {MAX_SIZE:,} (beyond any fabric the catalog's switches build), "
                             f"got {max(value):,}")
        return value

    @model_validator(mode="after")
    def _one_size(self) -> SizingSpec:
        if self.gpus is not None and self.nodes is not None:
            raise SpecError("give --gpus or --nodes, not both", field="--nodes")
        if self.gpus_range is not None and not 1 <= self.gpus_range[0] <= self.gpus_range[1]:
            raise SpecError(f"{self.gpus_range}: a range needs 1 <= low <= high", field="--gpus")
        return self

    systems: tuple[str, ...] | None = None  # None: every catalog system with a price
    fabrics: tuple[str, ...] = DEFAULT_FABRICS
    oversubscription: tuple[float, ...] = (1.0, 2.0)
    fabric_kinds: tuple[Literal["fat-tree", "rail-only", "2-plane"], ...] = Field(
        ("fat-tree",), min_length=1, description="scale-out designs: rail-optimized fat tree, rail-only, or a fat "
        "tree of 2 planes")
    rail_optimized: bool = True
    knobs: Knobs = Knobs()
    fixed: dict[str, Any] = Field(default_factory=dict)  # plan fields held fixed (FIXED_FIELDS)
    tp_max_domains: int = Field(2, ge=1, description="largest TP as a multiple of the NVLink domain (or node)")
    deadline_s: float | None = Field(None, gt=0)
    budget_usd: float | None = Field(None, gt=0)
    power_cap_w: float | None = Field(None, gt=0)
    """the facility power limit (IT x PUE) in W (`--facility`, once `--power-cap`)"""
    cooling: str | None = None
    """the facility's cooling class (catalog ``cooling`` id): a cluster whose systems it cannot host at their rack
    power is not searched (None: no rack check)"""
    objective: Objective = "cost"
    amortize_s: float = Field(4 * YEAR_S, gt=0)
    gpu_hour_usd: float | None = Field(None, gt=0)  # > 0: a free rental would make every cost $0
    pue: float = Field(1.3, ge=1.0)
    kwh_usd: float = Field(0.08, ge=0.0)
    top: int = Field(10, ge=1)
    goodput: GoodputSpec | None = GoodputSpec()
    """failures, checkpoints and restarts stretch each run to its wall-clock time (None: a healthy cluster)"""
    goodput_variants: tuple[GoodputSpec, ...] = ()
    """goodput options to search per cluster (storage tiers x spare counts; `sizing.reliability`); empty: just
    ``goodput``"""
    calibration: tuple[str, ...] = ()
    """catalog overlay files applied on top of the packaged catalog (`--calibration`, as `train` takes them)"""
    gpu_power: float | None = Field(None, gt=0)
    """board power limit of every candidate system's GPUs in W (`--gpu-power`; None: each GPU's rating)"""
    gpu_power_points: tuple[float, ...] = ()
    """GPU board power operating points searched per system (`--gpu-power-points`): a value up to 1 is a fraction of
    each GPU's rating, above 1 watts; empty: the rating (or ``gpu_power``) only"""

    @field_validator("gpu_power_points")
    @classmethod
    def _positive_points(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(not v > 0 for v in value):
            raise ValueError(f"operating points are positive fractions or watts, got {value}")
        return value

    def catalog(self) -> Catalog:
        """The catalog this search prices and times on: the packaged one with ``calibration`` applied and the
        candidate systems' GPUs at ``gpu_power``."""
        from fabricsim.catalog import limit_systems

        catalog = overlay_catalog(self.calibration)
        if self.gpu_power is None:
            return catalog
        return limit_systems(catalog, self.systems or catalog.priced_system_ids(), self.gpu_power, "--gpu-power")

    def digest(self) -> str:
        """A stable hash of everything that changes results (resume checks it; ``top`` does not count)."""
        data = self.model_dump(mode="json", exclude={"top"})
        for name, default in (("fabric_kinds", ["fat-tree"]), ("goodput_variants", []), ("calibration", []),
                              ("gpu_power", None), ("cooling", None), ("gpu_power_points", [])):
            if data[name] == default:  # fields added later: a run that leaves them as they were keeps its digest
                del data[name]
        for option in [data["goodput"], *data.get("goodput_variants", [])]:
            if isinstance(option, dict):  # whether separate was asked or the default: the same search
                option.pop("storage_network_given", None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _powers_of_two(lo: int, hi: int) -> tuple[int, ...]:
    out, k = [], 1
    while k <= hi:
        if k >= lo:
            out.append(k)
        k *= 2
    return tuple(out)


def parse_int_range(text: str, field: str) -> tuple[int, ...]:
    """``1024..16384`` -> powers of two in the range (and both ends); ``512,1024`` -> a list; ``64`` -> one."""
    value = text.strip()
    try:
        if ".." in value:
            lo_s, hi_s = value.split("..", 1)
            lo, hi = int(units.parse_count(lo_s, field=field)), int(units.parse_count(hi_s, field=field))
            if lo < 1 or hi < lo:
                raise SpecError(f"{text!r}: a range needs 1 <= low <= high", field=field)
            return tuple(sorted({lo, hi, *_powers_of_two(lo, hi)}))
        values = tuple(sorted({int(units.parse_count(part, field=field)) for part in value.split(",")}))
    except ValueError:
        raise SpecError(f"{text!r} is not a count, a list (512,1024) or a range (1024..16384)", field=field) from None
    if not values or min(values) < 1:
        raise SpecError(f"{text!r}: values must be at least 1", field=field)
    return values


def parse_list(text: str | None, field: str, kind: type = str) -> tuple[Any, ...] | None:
    """``'1,2'`` -> (1, 2) (or strings); None -> None; a list given empty (``''``) is a SpecError, not the default."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if any(parts) and not all(parts):  # '0,,5%' is a typo, not the list '0,5%'
        raise SpecError(f"{text!r} has an empty element; give values separated by single commas (e.g. 1,2)",
                        field=field)
    try:
        values = tuple(kind(p) for p in parts if p)
    except ValueError:
        raise SpecError(f"{text!r} is not a comma-separated list", field=field) from None
    if not values:
        raise SpecError(f"no value given ({text!r}); leave the option out for its default", field=field)
    return values


def parse_years(text: str, field: str) -> float:
    """Seconds from ``4y`` (years) or any duration `units.parse_duration` reads (``90d``)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*y\s*", text)
    if m:
        return float(m.group(1)) * YEAR_S
    return units.parse_duration(text, field=field)


def parse_money(text: str, field: str) -> float:
    """USD from ``50M``, ``$2.5``, ``1.2B``."""
    return units.parse_count(text.strip().lstrip("$"), field=field)


def parse_power_cap(text: str, field: str) -> float:
    """Watts from ``5MW``, ``800kW``."""
    return units.parse_power(text, field=field)


def parse_power_points(text: str | None, field: str) -> tuple[float, ...]:
    """GPU power operating points: ``rated`` -> 1.0, ``0.85`` or ``85%`` -> a fraction of the rating, ``500W`` (or
    a bare number above 1) -> watts; in the order given, repeats dropped; None -> () (the rating only)."""
    values = parse_list(text, field)
    if values is None:
        return ()
    out: list[float] = []
    for part in values:
        word = str(part).strip().lower()
        try:
            if word == "rated":
                value = 1.0
            elif word.endswith("%"):
                value = float(word[:-1]) / 100.0
            elif word.endswith("w"):
                value = units.parse_power(part, field=field)
            else:
                value = float(word)
        except ValueError:
            raise SpecError(f"{part!r} is not rated, a fraction of the rating (0.85, 85%) or watts (500W)",
                            field=field) from None
        if not value > 0 or (value < 1.0 and word.endswith("w")):
            raise SpecError(f"{part!r}: an operating point is a fraction in (0, 1] or watts above 1", field=field)
        out.append(value)
    return tuple(dict.fromkeys(out))
