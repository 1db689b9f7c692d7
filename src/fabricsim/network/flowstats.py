"""Per-flow statistics out of flow classes: each entry of a flow set counted as the flows it stands for
(`FlowSet.multiplicity`), so a run of classes reports what the run of every flow would, without per-flow arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.network.flowsim import FlowResult, FlowSet
from fabricsim.network.maxmin import FloatArray

if TYPE_CHECKING:
    import numpy.typing as npt

FINISH_QUANTILES = (0.5, 0.99, 1.0)
"""flow finish-time quantiles reported per job (median, p99, the last)"""


def weighted_quantiles(values: npt.ArrayLike, weights: npt.ArrayLike, q: Sequence[float]) -> FloatArray:
    """Quantiles of `values`, each counted `weights` times: the smallest value whose cumulative count reaches
    q x the total (numpy's ``inverted_cdf`` on the expanded values; NaN for no values)."""
    v = np.asarray(values, dtype=np.float64)
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64), v.shape)
    qs = np.asarray(q, dtype=np.float64)
    if len(v) == 0 or w.sum() <= 0:
        return np.full(len(qs), np.nan)
    if (w == 1.0).all():  # one flow an entry: numpy's own (a partition, no sort of every flow)
        plain: FloatArray = np.quantile(v, qs, method="inverted_cdf")
        return plain
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    at = np.searchsorted(cum, qs * cum[-1], side="left")
    out: FloatArray = v[order][np.minimum(at, len(v) - 1)]
    return out


def members(fs: FlowSet) -> FloatArray:
    """Flows each entry of the flow set stands for (ones where it has no multiplicities)."""
    out: FloatArray = fs.multiplicity if len(fs.multiplicity) else np.ones(fs.num_flows)
    return out


def finish_quantiles(fs: FlowSet, result: FlowResult, where: npt.NDArray[np.bool_] | None = None,
                     since: float = 0.0, q: Sequence[float] = FINISH_QUANTILES) -> FloatArray:
    """Quantiles of the flows' finish times (s after `since`) over the entries `where` selects (all: None), each
    weighed by the flows it stands for."""
    sel = np.ones(fs.num_flows, dtype=bool) if where is None else where
    return weighted_quantiles(result.flow_finish[sel] - since, members(fs)[sel], q)
