"""Validate the collective model against published nccl-tests figures: busbw at one size, time at one size, and
the average or peak busbw over a whole nccl-tests sweep."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fabricsim.catalog import Catalog, default_catalog
from fabricsim.collectives import CollectiveModel, group_shape
from fabricsim.errors import SpecError
from fabricsim.validation.regimes import collective_regime

BANDWIDTH_METRICS = ("busbw_GBps", "avg_busbw_GBps", "peak_busbw_GBps")
LATENCY_METRICS = ("time_us",)
METRICS = BANDWIDTH_METRICS + LATENCY_METRICS
LATENCY_TOLERANCE = 0.30
FLOAT_BYTES = 4  # nccl-tests' default datatype; a size is rounded down to whole elements as nccl-tests does


class CaseResult(BaseModel):
    """One counted case: the published and predicted value, the relative error and whether it is in tolerance."""

    id: str
    kind: str
    measured: float
    predicted: float
    unit: str
    error: float
    tolerance: float
    passed: bool
    detail: str
    source: str
    group: str = ""
    metric: str = ""
    engine: str = ""  # inference: the serving engine profile the case ran (trtllm@0.9, sglang@0.5, ...)
    regime: dict[str, Any] = {}  # where the case sits (``Regime.to_json``): the error model compares like with like
    time_like: bool = False  # the metric is a duration (a band turns over between durations and rates)


def tolerance_for_size(size_bytes: int) -> float:
    """Allowed relative busbw error by message size (issue 4): 15% at >=64 MiB, 25% at >=16 MiB, else 30%."""
    if size_bytes >= 64 * 2**20:
        return 0.15
    if size_bytes >= 16 * 2**20:
        return 0.25
    return 0.30


def sweep_sizes(spec: Any) -> list[int]:
    """The sizes of an nccl-tests sweep `{start, step | factor, max}`: start, start+step, ... (-i) or start,
    start*factor, ... (-f), up to max; each rounded down to whole float elements as nccl-tests does."""
    if not isinstance(spec, dict) or "start" not in spec or "max" not in spec or ("step" in spec) == ("factor" in spec):
        raise SpecError("expected {start, max} and exactly one of step or factor", field="sizes")
    start, top = int(spec["start"]), int(spec["max"])
    if start < 1 or top < start:
        raise SpecError(f"need 1 <= start <= max, got start {start}, max {top}", field="sizes")
    sizes: list[int] = []
    size = start
    if "factor" in spec:
        factor = int(spec["factor"])
        if factor < 2:
            raise SpecError(f"factor must be an integer >= 2, got {spec['factor']}", field="sizes.factor")
        while size <= top:
            sizes.append(size)
            size *= factor
    else:
        step = int(spec["step"])
        if step < 1:
            raise SpecError(f"step must be >= 1, got {step}", field="sizes.step")
        while size <= top:
            sizes.append(size)
            size += step
    return [max(FLOAT_BYTES, s // FLOAT_BYTES * FLOAT_BYTES) for s in sizes]


def case_metric(case: dict[str, Any]) -> str:
    """The compared quantity: the case's `metric`, else busbw at `size_bytes` (the nccl_tests.yaml layout)."""
    metric = str(case.get("metric", "busbw_GBps"))
    if metric not in METRICS:
        raise SpecError(f"unknown metric {metric!r}; allowed: {', '.join(METRICS)}", field=f"{case.get('id')}.metric")
    return metric


def case_tolerance(case: dict[str, Any], metric: str, size_bytes: int) -> float:
    """The case's own `tol`/`tolerance`, else the size rule for busbw and 30% for latency."""
    for key in ("tol", "tolerance"):
        if case.get(key) is not None:
            return float(case[key])
    return LATENCY_TOLERANCE if metric in LATENCY_METRICS else tolerance_for_size(size_bytes)


def case_model(case: dict[str, Any], cat: Catalog) -> CollectiveModel:
    """The collective model of the case's group: `gpus` (default nodes x GPUs per node) spread evenly over `nodes`."""
    system = cat.system(str(case["system"]))
    nodes = case.get("nodes")  # without it the group takes whole nodes first
    gpus = int(case.get("gpus") or int(nodes or 1) * system.gpus_per_node)
    per_node = None if nodes is None else -(-gpus // int(nodes))
    return CollectiveModel(group_shape(system, gpus, ranks_per_node=per_node, catalog=cat), catalog=cat)


def measured_value(case: dict[str, Any], metric: str) -> float:
    """The published figure: the field named after the metric, else `value`."""
    value = case.get(metric, case.get("value"))
    if value is None:
        raise SpecError(f"no measured value: expected a {metric!r} or 'value' field", field=str(case.get("id")))
    return float(value)


def run_collective_case(case: dict[str, Any], catalog: Catalog | None = None) -> CaseResult:
    """Predict one collective case with the metric it names and compare with the published figure."""
    cat = catalog or default_catalog()
    metric = case_metric(case)
    model = case_model(case, cat)
    op, algo = str(case["op"]), str(case.get("algo", "auto"))
    sizes = sweep_sizes(case.get("sizes")) if metric in ("avg_busbw_GBps", "peak_busbw_GBps") \
        else [int(case["size_bytes"])]
    rows = model.predict(op, sizes, algo=algo).rows
    busbw = [r.busbw_GBps for r in rows]
    if metric == "avg_busbw_GBps":
        predicted, unit, row = sum(busbw) / len(busbw), "avg busbw GB/s", rows[-1]
    elif metric == "peak_busbw_GBps":
        row = max(rows, key=lambda r: r.busbw_GBps)
        predicted, unit = row.busbw_GBps, "peak busbw GB/s"
    elif metric == "time_us":
        row = rows[0]
        predicted, unit = row.time_s * 1e6, "us"
    else:
        row = rows[0]
        predicted, unit = row.busbw_GBps, "busbw GB/s"
    measured = measured_value(case, metric)
    error = (predicted - measured) / measured
    tol = case_tolerance(case, metric, max(sizes))
    where = f"{len(sizes)} sizes" if len(sizes) > 1 else f"{sizes[0]} B"
    return CaseResult(
        id=str(case["id"]), kind="nccl-tests", measured=measured, predicted=predicted, unit=unit,
        error=error, tolerance=tol, passed=abs(error) <= tol,
        detail=f"{op} {model.shape.nranks} GPUs/{model.shape.nnodes} nodes {where} "
               f"{row.algorithm}/{row.protocol} bound={row.bound}",
        source=str(case.get("source", "")),
        group="collective latency" if metric in LATENCY_METRICS else "collective bandwidth", metric=metric,
        regime=collective_regime(model.shape.nnodes, row.bound, op, cat.gpu(cat.system(str(case["system"])).gpu)
                                 ).to_json(),
        time_like=metric in LATENCY_METRICS,
    )
