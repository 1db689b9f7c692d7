"""Result rows of the collective model, in nccl-tests conventions (GB/s = 1e9 bytes/s)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class CollectiveRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    op: str
    size_bytes: int
    count: int
    dtype: str
    time_s: float
    algbw_GBps: float
    busbw_GBps: float
    algorithm: str
    protocol: str
    bound: str
    congestion_s: float | None = None
    """flow simulation only: seconds beyond the same algorithm and protocol alone on the fabric (the analytical
    time), i.e. what contention costs"""


class Prediction(BaseModel):
    rows: list[CollectiveRow]
    assumptions: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        keys = ("size_bytes", "time_s", "algbw_GBps", "busbw_GBps", "algorithm", "protocol", "bound")
        rows = [{k: getattr(r, k) for k in keys} | ({} if r.congestion_s is None else {"congestion_s": r.congestion_s})
                for r in self.rows]
        return {"rows": rows, "assumptions": self.assumptions}
