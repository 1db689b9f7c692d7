"""Validate the collective model against published nccl-tests bus bandwidths."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fabricsim.catalog import Catalog, default_catalog
from fabricsim.collectives import CollectiveModel, group_shape


class CaseResult(BaseModel):
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


def tolerance_for_size(size_bytes: int) -> float:
    """Allowed relative busbw error by message size (issue 4): 15% at >=64 MiB, 25% at >=16 MiB, else 30%."""
    if size_bytes >= 64 * 2**20:
        return 0.15
    if size_bytes >= 16 * 2**20:
        return 0.25
    return 0.30


def run_collective_case(case: dict[str, Any], catalog: Catalog | None = None) -> CaseResult:
    cat = catalog or default_catalog()
    gpus = int(case["gpus"])
    nodes = case.get("nodes")  # the GPUs spread evenly over the case's nodes; whole nodes first when not given
    per_node = None if nodes is None else -(-gpus // int(nodes))
    shape = group_shape(case["system"], gpus, ranks_per_node=per_node, catalog=cat)
    model = CollectiveModel(shape, catalog=cat)
    row = model.predict(case["op"], [int(case["size_bytes"])], algo=case.get("algo", "auto")).rows[0]
    measured = float(case["busbw_GBps"])
    error = (row.busbw_GBps - measured) / measured
    tol = tolerance_for_size(int(case["size_bytes"]))
    return CaseResult(
        id=str(case["id"]), kind="nccl-tests", measured=measured, predicted=row.busbw_GBps, unit="busbw GB/s",
        error=error, tolerance=tol, passed=abs(error) <= tol,
        detail=f"{case['op']} {case['gpus']} GPUs {row.algorithm}/{row.protocol} bound={row.bound}",
        source=str(case.get("source", "")),
    )
