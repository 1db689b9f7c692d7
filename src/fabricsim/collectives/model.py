"""Predict collective time and bandwidth for a group shape: pick the algorithm/protocol as NCCL's tuner does.

`CollectiveModel(shape).predict(op, sizes)` returns rows in nccl-tests conventions (time, algbw, busbw) with
the algorithm, protocol and bounding link kind of each size. Costs are closed forms cached per group shape,
so a whole sweep is a few numpy operations (this is a hot path of the sizing search).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from fabricsim.caching import ByIdentity
from fabricsim.catalog import Catalog, Tuning, default_catalog
from fabricsim.collectives.algorithms import (
    ALGORITHMS,
    Algorithm,
    gpus_per_launch_thread,
    launch_floor,
    nvls_efficiency,
)
from fabricsim.collectives.conventions import busbw_factor, check_op, dtype_bytes
from fabricsim.collectives.cost import Cost
from fabricsim.collectives.group import GroupShape
from fabricsim.collectives.result import CollectiveRow, Prediction
from fabricsim.errors import SpecError, unknown_name_error

PROTOCOLS = ("LL", "LL128", "Simple")


@dataclass(frozen=True)
class Choice:
    algorithm: str
    protocol: str
    cost: Cost


def check_algorithm(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    if key != "auto" and key not in ALGORITHMS:
        raise unknown_name_error("algorithm", name, ["auto", *ALGORITHMS], field="--algo")
    return key


def _candidates(op: str, shape: GroupShape, algo: str, proto: str) -> list[tuple[Algorithm, str]]:
    if shape.nranks < 2:
        raise SpecError(f"a collective needs at least 2 ranks, got {shape.nranks}", field="--gpus")
    if proto != "auto" and proto not in PROTOCOLS:
        raise SpecError(f"unknown protocol {proto!r}; allowed: auto, {', '.join(PROTOCOLS)}", field="--proto")
    if algo == "auto":
        algos = [a for a in ALGORITHMS.values() if (a.nccl or (a.name == "collnet" and shape.collnet))
                 and op in a.ops and a.requirement(shape) is None]
        if not algos:
            raise SpecError(f"no algorithm can run {op} on this group", field="--op")
    else:
        chosen = ALGORITHMS[algo]
        if op not in chosen.ops:
            raise SpecError(f"{algo} does not implement {op}; it serves {', '.join(chosen.ops)}", field="--algo")
        reason = chosen.requirement(shape)
        if reason:
            raise SpecError(reason, field="--algo")
        algos = [chosen]
    out = [(a, p) for a in algos for p in a.protocols if proto in ("auto", p)]
    if not out:
        raise SpecError(f"protocol {proto} is not available for {algo}", field="--proto")
    return out


@lru_cache(maxsize=65536)
def _choices_cached(op: str, shape: GroupShape, algo: str, proto: str,
                    tuning: ByIdentity[Tuning]) -> tuple[Choice, ...]:
    floor = launch_floor(shape, tuning.value)
    return tuple(Choice(a.name, p, replace(a.cost(op, shape, p, tuning.value), floor_s=floor))
                 for a, p in _candidates(op, shape, algo, proto))


def choices(op: str, shape: GroupShape, tuning: Tuning, algo: str = "auto", proto: str = "auto") -> tuple[Choice, ...]:
    """Every (algorithm, protocol) that may run `op` on `shape`, with its cost (cached per shape and tuning)."""
    return _choices_cached(check_op(op), shape, check_algorithm(algo), proto, ByIdentity(tuning))


def _time_table(opts: Sequence[Choice], sizes: np.ndarray) -> np.ndarray:
    """Physical time of every option (rows) at every size (columns)."""
    return np.stack([c.cost.times(sizes) for c in opts])


def _pick(opts: Sequence[Choice], sizes: np.ndarray) -> np.ndarray:
    """Index of the option NCCL's tuner picks at every size: minimum of the time as NCCL prices it."""
    picks: np.ndarray = np.stack([c.cost.selection_times(sizes) for c in opts]).argmin(axis=0)
    return picks


def best(options: Sequence[Choice], size_bytes: float) -> Choice:
    """The option NCCL picks at one size (its rule: minimum time by its own cost model)."""
    return min(options, key=lambda c: c.cost.selection_time_s(size_bytes))


class CollectiveModel:
    """The analytical collective model bound to one group shape and one parameter set."""

    def __init__(self, shape: GroupShape, catalog: Catalog | None = None, tuning: Tuning | None = None) -> None:
        self.shape = shape
        self.catalog = catalog or default_catalog()
        self.tuning = tuning or self.catalog.tuning("default")

    def time_s(self, op: str, size_bytes: float, algo: str = "auto", proto: str = "auto") -> float:
        """Predicted time of one collective of `size_bytes` (nccl-tests size convention)."""
        return best(choices(op, self.shape, self.tuning, algo, proto), size_bytes).cost.time_s(size_bytes)

    def choose(self, op: str, size_bytes: float, algo: str = "auto", proto: str = "auto") -> Choice:
        return best(choices(op, self.shape, self.tuning, algo, proto), size_bytes)

    def times_s(self, op: str, sizes: Iterable[float], algo: str = "auto", proto: str = "auto") -> np.ndarray:
        """Vectorised best time for many sizes."""
        opts = choices(op, self.shape, self.tuning, algo, proto)
        grid = np.asarray(list(sizes), dtype=np.float64)
        table = _time_table(opts, grid)
        times: np.ndarray = table[_pick(opts, grid), np.arange(grid.size)]
        return times

    def predict(
        self, op: str, sizes: Iterable[int], algo: str = "auto", proto: str = "auto", dtype: str = "float"
    ) -> Prediction:
        """Rows in nccl-tests conventions for each size, plus the assumptions behind them."""
        name = check_op(op)
        opts = choices(name, self.shape, self.tuning, algo, proto)
        size_list = [int(s) for s in sizes]
        grid = np.asarray(size_list, dtype=np.float64)
        table = _time_table(opts, grid)
        pick = _pick(opts, grid)
        factor = busbw_factor(name, self.shape.nranks)
        elem = dtype_bytes(dtype)
        rows = []
        for j, size in enumerate(size_list):
            chosen = opts[int(pick[j])]
            t = float(table[pick[j], j])
            algbw = size / t / 1e9 if t > 0 else 0.0
            rows.append(CollectiveRow(
                op=name, size_bytes=size, count=size // elem, dtype=dtype, time_s=t, algbw_GBps=algbw,
                busbw_GBps=algbw * factor, algorithm=chosen.algorithm, protocol=chosen.protocol,
                bound=chosen.cost.bound(size),
            ))
        return Prediction(rows=rows, assumptions=self.assumptions(name, algo, proto))

    def assumptions(self, op: str, algo: str, proto: str) -> dict[str, Any]:
        sh = self.shape
        t = self.tuning
        return {
            "op": op,
            "system": sh.system_id,
            "ranks": sh.nranks,
            "nodes": sh.nnodes,
            "ranks_per_node": sh.ranks_per_node,
            "intra_node": {"kind": sh.intra_kind, "achievable_bytes_per_s": sh.intra_bytes_per_s,
                           "line_bytes_per_s": sh.intra_line_bytes_per_s},
            "network": {"kind": sh.net_kind, "link": sh.fabric_link_id, "switch": sh.fabric_switch_id,
                        "nics_per_node": sh.nics_used_per_node,
                        "achievable_bytes_per_s_per_node": sh.net_bytes_per_s_per_node,
                        "line_bytes_per_s_per_node": sh.net_line_bytes_per_s_per_node,
                        "oversubscription": sh.oversubscription},
            "nvls_available": sh.nvls,
            "sharp_available": sh.sharp,
            "algorithm": algo,
            "protocol": proto,
            "tuning": t.id,
            "launch_floor_s": launch_floor(sh, t),
            "hosts": sh.hosts or sh.nnodes,
            "gpus_per_launch_thread": gpus_per_launch_thread(sh, t),
            "efficiencies": {"nvls": nvls_efficiency(sh, t), "tree": t.tree_efficiency, "p2p": t.p2p_efficiency,
                             "protocols": {k: v.bandwidth_efficiency for k, v in t.protocols.items()}},
            "notes": list(sh.notes),
        }


MAX_SWEEP_ROWS = 10_000  # sizes in one sweep (a step factor of 1.0000001 would never end)


def size_sweep(min_bytes: int, max_bytes: int, step_factor: float = 2.0) -> list[int]:
    """nccl-tests -b/-e/-f sizes: min, min*f, ... up to max (inclusive)."""
    if min_bytes < 1:
        raise SpecError(f"minimum size must be at least 1 byte, got {min_bytes}", field="--min")
    if max_bytes < min_bytes:
        raise SpecError(f"maximum size {max_bytes} is below the minimum {min_bytes}", field="--max")
    if not math.isfinite(step_factor) or step_factor <= 1:
        raise SpecError(f"step factor must be a finite number > 1, got {step_factor}", field="--step-factor")
    rows = math.floor(math.log(max_bytes / min_bytes) / math.log(step_factor) + 1e-9) + 1
    if rows > MAX_SWEEP_ROWS:
        raise SpecError(f"{min_bytes}..{max_bytes} by {step_factor!r} is {rows:,} sizes (at most "
                        f"{MAX_SWEEP_ROWS:,}); give a larger --step-factor", field="--step-factor")
    sizes = []
    size = float(min_bytes)
    while size <= max_bytes * (1 + 1e-12):
        sizes.append(round(size))
        size *= step_factor
    return sizes
