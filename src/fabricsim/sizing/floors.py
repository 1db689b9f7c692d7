"""Each candidate plan's lower bound of its time to train on a cluster, for the branch and bound
(`fabricsim.sizing.bound`): the network-free part once per task (system, size and GPU power: the stage floors and
windows of `training.plan_floor`), and per network only the collectives, priced once per distinct collective
shape (`training.comm_row`: plans that differ in batch and recompute share them), then `training.network_floors`
over every plan at once."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fabricsim.comm import Cluster
from fabricsim.model import ModelSpec
from fabricsim.training import (
    COMM_FIELDS,
    LAYER_FIELDS,
    STAGE_FIELDS,
    ParallelPlan,
    comm_keys,
    layer_row,
    network_floors,
    pipeline_bubble_fractions,
    plan_floor,
    shard_row,
)

Batches = Sequence[tuple[int, int]]  # (gbs, micro-batches)


@dataclass(frozen=True)
class TaskFloors:
    """The network-free parts of a task's candidate plans: per plan its `STAGE_FIELDS` row and optimizer update,
    and the indices of its distinct layer collectives and sharding collectives (``*_plans``: one plan of each,
    with its floor and parameter stages for the latter); per (plan, batch) row its owner, micro-batches, bubble
    fraction and tokens per step."""

    stage: np.ndarray
    optimizer: np.ndarray
    layer_keys: np.ndarray
    layer_plans: list[ParallelPlan]
    shard_keys: np.ndarray
    shard_plans: list[tuple[ParallelPlan, int, int]]
    owner: np.ndarray
    starts: np.ndarray  # plan k's (plan, batch) rows are starts[k]:starts[k + 1]
    m: np.ndarray
    bubble: np.ndarray
    tokens: np.ndarray
    compute: np.ndarray  # per plan: the network-free lower bound of its time to train (seconds, all tokens)


def task_floors(model: ModelSpec, plans: Sequence[tuple[ParallelPlan, Batches]], cluster: Cluster, seq: int,
                tokens: float) -> TaskFloors:
    """The network-free parts of ``plans`` (each with its valid batches) on any cluster of ``cluster``'s system
    and GPU."""
    rows, optimizer, layer_keys, shard_keys = [], [], [], []
    layer_index: dict[Hashable, int] = {}
    shard_index: dict[Hashable, int] = {}
    layer_plans: list[ParallelPlan] = []
    shard_plans: list[tuple[ParallelPlan, int, int]] = []
    for plan, _ in plans:
        floor, opt, worst = plan_floor(model, plan, cluster)
        rows.append(floor.row)
        optimizer.append(opt)
        layer, shard = comm_keys(plan, floor.stage, worst)
        if layer not in layer_index:
            layer_index[layer] = len(layer_plans)
            layer_plans.append(plan)
        if shard not in shard_index:
            shard_index[shard] = len(shard_plans)
            shard_plans.append((plan, floor.stage, worst))
        layer_keys.append(layer_index[layer])
        shard_keys.append(shard_index[shard])
    owner = np.repeat(np.arange(len(plans)), [len(b) for _, b in plans])
    gbs = np.array([g for _, b in plans for g, _ in b], dtype=np.float64)
    m = np.array([mm for _, b in plans for _, mm in b], dtype=np.int64)
    pp = np.array([p.pp for p, _ in plans], dtype=np.int64)[owner]
    vpp = np.array([p.virtual_stages for p, _ in plans], dtype=np.int64)[owner]
    stage = np.array(rows, dtype=np.float64).reshape(len(plans), len(STAGE_FIELDS))
    opt_arr = np.array(optimizer, dtype=np.float64)
    bubble = pipeline_bubble_fractions(pp, m, vpp)
    per_token = tokens / (gbs * seq)
    compute = np.full(len(plans), np.inf)
    np.minimum.at(compute, owner, per_token * ((m + bubble) * stage[owner, 0] + opt_arr[owner]))
    starts = np.concatenate([[0], np.cumsum([len(b) for _, b in plans])]).astype(np.int64)
    return TaskFloors(stage, opt_arr, np.array(layer_keys, dtype=np.int64), layer_plans,
                      np.array(shard_keys, dtype=np.int64), shard_plans, owner, starts, m, bubble, per_token, compute)


@dataclass
class ClusterLows:
    """A task's candidates' network-aware bounds on one timing cluster, computed as a search reaches them: each
    distinct layer and sharding collective priced once (`training.floor`), NaN where not yet needed."""

    model: ModelSpec
    floors: TaskFloors
    cluster: Cluster
    lows: np.ndarray = field(init=False)
    layer: np.ndarray = field(init=False)
    shard: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.lows = np.full(len(self.floors.stage), np.nan)
        self.layer = np.full((len(self.floors.layer_plans), LAYER_FIELDS), np.nan)
        self.shard = np.full((len(self.floors.shard_plans), len(COMM_FIELDS) - LAYER_FIELDS), np.nan)

    def of(self, plans: np.ndarray) -> np.ndarray:
        """The bounds of ``plans`` (indices)."""
        todo = plans[np.isnan(self.lows[plans])]
        if len(todo):
            self.lows[todo] = network_lows(self, todo)
        out: np.ndarray = self.lows[plans]
        return out


def network_lows(at: ClusterLows, plans: np.ndarray) -> np.ndarray:
    """The lower bound of the time to train of each of ``plans`` (indices) on the cluster (seconds, all tokens;
    its least over its batches): (m + bubble) x (floor + micro-batch collectives) + sync + optimizer
    (`training.network_floors`)."""
    floors, cluster, model = at.floors, at.cluster, at.model
    layer_keys = floors.layer_keys[plans]
    shard_keys = floors.shard_keys[plans]
    for k in np.unique(layer_keys[np.isnan(at.layer[layer_keys, 0])]).tolist():
        at.layer[k] = layer_row(model, floors.layer_plans[k], cluster)
    for k in np.unique(shard_keys[np.isnan(at.shard[shard_keys, 0])]).tolist():
        plan, stage, worst = floors.shard_plans[k]
        at.shard[k] = shard_row(model, plan, cluster, stage, worst)
    comm = np.hstack([at.layer[layer_keys], at.shard[shard_keys]])
    mb, once = network_floors(floors.stage[plans], comm, floors.optimizer[plans])
    counts = floors.starts[plans + 1] - floors.starts[plans]
    rows = np.concatenate([np.arange(floors.starts[k], floors.starts[k + 1]) for k in plans.tolist()]) \
        if len(plans) else np.zeros(0, dtype=np.int64)
    o = np.repeat(np.arange(len(plans)), counts)
    lows = np.full(len(plans), np.inf)
    np.minimum.at(lows, o, floors.tokens[rows] * ((floors.m[rows] + floors.bubble[rows]) * mb[o] + once[o]))
    out: np.ndarray = np.maximum(lows, floors.compute[plans])
    return out
