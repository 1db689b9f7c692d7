"""Traffic on a cluster for the flow simulator: patterns, job placements and background transfers as flows.

A job is GPUs placed on the cluster (packed: the first free GPUs; scattered: free nodes spread evenly over the
cluster; random: seeded random free GPUs) running a pattern, each GPU sending `bytes` in total:
permutation (to one other GPU, a seeded derangement), all_to_all (bytes / n to every GPU, itself included as
nccl-tests does), ring (to the next GPU), incast (all to the job's first GPU), a CSV matrix of bytes between
the job's ranks, or a collective (all_reduce, all_gather, reduce_scatter: NCCL-style multi-channel rings, one
stage per step). Background: checkpoint writes (a job's GPUs to storage nodes) and storage reads (back), where
the storage nodes are the last nodes of the cluster, kept out of the jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fabricsim.collectives import schedule
from fabricsim.errors import SpecError
from fabricsim.network import (
    FloatArray,
    IntArray,
    LinkKinds,
    check_memory,
    flow_count_bound,
    link_kinds,
    representative_gpus,
)
from fabricsim.topology import Topology

if TYPE_CHECKING:
    import numpy.typing as npt

ID_DTYPE = np.int32
"""GPU ranks and stage numbers of flows (a cluster and a traffic have far fewer than 2^31 of each)"""
PATTERNS = ("permutation", "all_to_all", "ring", "incast", "all_reduce", "all_gather", "reduce_scatter")
KV_TIER = "kv_tier"
"""a jobs file's serving job whose GPUs load KV from a networked KV tier (the storage nodes) over the fabric"""
JOB_PATTERNS = (*PATTERNS, KV_TIER)
PLACEMENTS = ("packed", "scattered", "random")
BACKGROUND = ("checkpoint_write", "storage_read")
DEFAULT_CLASS = "default"
"""the traffic class of a job or transfer that names none (weight 1 unless the jobs file's `classes` says)"""


@dataclass(frozen=True)
class JobSpec:
    """One job: its size, placement, traffic pattern (or a CSV matrix file) and per-GPU bytes."""

    name: str
    gpus: int
    pattern: str
    bytes: float
    placement: str = "packed"
    start: float = 0.0
    seed: int = 0
    traffic_class: str = DEFAULT_CLASS
    every: float = 0.0
    """pattern kv_tier: seconds between one load and the next (each GPU receives ``bytes`` a load)"""
    loads: int = 1
    """pattern kv_tier: loads, released at start, start + every, ... whatever the fabric does to the earlier ones"""


@dataclass(frozen=True)
class BackgroundSpec:
    """Bulk transfers between a job's GPUs and the storage nodes: `bytes` per GPU, starting at `start`."""

    kind: str
    job: str
    bytes: float
    start: float = 0.0
    traffic_class: str = DEFAULT_CLASS


@dataclass
class Traffic:
    """Flows (GPU to GPU, bytes, stage), stages (release time, owner), stage dependencies, job GPU sets."""

    src: list[IntArray] = field(default_factory=list)
    dst: list[IntArray] = field(default_factory=list)
    size: list[FloatArray] = field(default_factory=list)
    stage: list[IntArray] = field(default_factory=list)
    release: list[float] = field(default_factory=list)
    owner: list[str] = field(default_factory=list)
    """job (or background) name of every stage"""
    dep_before: list[int] = field(default_factory=list)
    dep_after: list[int] = field(default_factory=list)
    gpus: dict[str, IntArray] = field(default_factory=dict)
    classes: dict[str, float] = field(default_factory=lambda: {DEFAULT_CLASS: 1.0})
    """traffic classes (service levels, priorities) in order, with their arbitration weights"""
    stage_class: list[int] = field(default_factory=list)
    """class (index into `classes`) of every stage"""
    count: list[IntArray | None] = field(default_factory=list)
    """flows each row of a stage stands for (None: one a row); see `add_stage`"""
    member_ids: list[IntArray | None] = field(default_factory=list)
    """the stage-local flow ids of each counted row's members, grouped by row (None: row i is flow i)"""
    symmetric: LinkKinds | None = None
    """set when the traffic is symmetric and stored as a quotient (`symmetric_traffic`): each row is a
    representative GPU's flow standing for its `count` images on the other GPUs of its kind, not identical flows"""

    def add_stage(self, owner: str, release: float, src: IntArray, dst: IntArray, size: FloatArray,
                  after: int | None = None, traffic_class: str = DEFAULT_CLASS, count: IntArray | None = None,
                  member_ids: IntArray | None = None) -> int:
        """Append a stage of flows in a traffic class; it waits for stage `after` when given. Returns its index.

        With `count`, row i stands for count[i] identical flows (same GPUs, size, stage) whose positions in the
        stage's per-flow form are `member_ids` (grouped by row, in row order; `count_pairs` makes both): routed
        and simulated as classes, with the results of the flows one by one."""
        k = len(self.release)
        self.count.append(None if count is None else np.asarray(count, dtype=np.int64))
        self.member_ids.append(None if member_ids is None else np.asarray(member_ids, dtype=np.int64))
        if traffic_class not in self.classes:
            raise SpecError(f"unknown traffic class {traffic_class!r}; the jobs file's classes: "
                            f"{', '.join(self.classes)}", field="class")
        self.stage_class.append(list(self.classes).index(traffic_class))
        self.release.append(release)
        self.owner.append(owner)
        self.src.append(np.asarray(src, dtype=ID_DTYPE))  # GPU ranks and stages: int32 (16.8M flows: 200 MB less)
        self.dst.append(np.asarray(dst, dtype=ID_DTYPE))
        self.size.append(np.broadcast_to(size, src.shape).astype(np.float64))
        self.stage.append(np.full(len(src), k, dtype=ID_DTYPE))
        if after is not None:
            self.dep_before.append(after)
            self.dep_after.append(k)
        return k

    def stage_flows(self) -> IntArray:
        """Flows of every stage (its rows' counts summed)."""
        return np.asarray([len(s) if c is None else int(c.sum()) for s, c in zip(self.src, self.count, strict=True)],
                          dtype=np.int64)

    @property
    def num_flows(self) -> int:
        return int(self.stage_flows().sum())

    def counted(self) -> tuple[IntArray, IntArray] | None:
        """(count of every row, the global flow ids of their members grouped by row) over all stages, or None when
        every row is one flow. A flow's id is its index in the per-flow form (the stages' flows one after another,
        as `arrays` would list them uncounted): the ECMP hash key the flow would have on its own."""
        if all(c is None for c in self.count):
            return None
        if self.symmetric is not None:
            raise SpecError("symmetric traffic is kept as a quotient: its rows are kinds of flows, not counted "
                            "flows", field="flows")
        offset = np.concatenate([[0], np.cumsum(self.stage_flows())[:-1]])
        counts, ids = [], []
        for k, (s, c, m) in enumerate(zip(self.src, self.count, self.member_ids, strict=True)):
            counts.append(np.ones(len(s), dtype=np.int64) if c is None else c)
            ids.append(offset[k] + (np.arange(len(s), dtype=np.int64) if m is None else m))
        return np.concatenate(counts), np.concatenate(ids)

    def class_weights(self) -> FloatArray:
        """Arbitration weight of every class, in index order."""
        return np.asarray(list(self.classes.values()), dtype=np.float64)

    def stage_classes(self) -> IntArray:
        """Class index of every stage."""
        return np.asarray(self.stage_class, dtype=np.int64)

    def stage_groups(self) -> IntArray:
        """Connection group of every stage: its owner's (a job's stages reuse the job's connections)."""
        owners = {name: k for k, name in enumerate(dict.fromkeys(self.owner))}
        return np.asarray([owners[name] for name in self.owner], dtype=np.int64)

    def arrays(self, rows: bool = False) -> tuple[IntArray, IntArray, FloatArray, IntArray]:
        """(src, dst, bytes, stage) of all flows, one by one in their per-flow order (counted rows expanded); with
        `rows`, of the rows as stored (see `counted`). A single uncounted stage's own arrays, not copies: treat as
        read-only."""
        def cat(parts: list[IntArray]) -> IntArray:
            if len(parts) == 1:
                return parts[0]
            return np.concatenate(parts) if parts else np.zeros(0, dtype=ID_DTYPE)
        src, dst, size, stage = self.src, self.dst, self.size, self.stage
        if not rows and self.symmetric is not None:
            raise SpecError("symmetric traffic is kept as a quotient (its flows are not built)", field="flows")
        if not rows and any(c is not None for c in self.count):
            def each(parts: list[npt.NDArray[Any]]) -> list[npt.NDArray[Any]]:
                return [_expand(a, c, m) for a, c, m in zip(parts, self.count, self.member_ids, strict=True)]
            src, dst, size, stage = each(self.src), each(self.dst), each(self.size), each(self.stage)
        joined = size[0] if len(size) == 1 else np.concatenate(size) if size else np.zeros(0)
        return cat(src), cat(dst), joined, cat(stage)


def _expand(values: npt.NDArray[Any], count: IntArray | None, members: IntArray | None) -> npt.NDArray[Any]:
    """A counted stage's row values given to each of its flows, at the flows' per-flow positions."""
    if count is None or members is None:
        return values
    out = np.empty(len(members), dtype=values.dtype)
    out[members] = np.repeat(values, count)
    return out


def count_pairs(src: IntArray, dst: IntArray, size: FloatArray
                ) -> tuple[IntArray, IntArray, FloatArray, IntArray, IntArray] | None:
    """A stage's flows as counted rows: (src, dst, size, count, member ids) with one row per distinct (src, dst,
    size) in order of first appearance and the positions of its flows grouped by row; None when no two flows are
    alike (nothing to count)."""
    n = len(src)
    if n < 2:
        return None
    b = np.broadcast_to(np.asarray(size, dtype=np.float64), np.shape(src))
    order = np.lexsort((np.arange(n), b, dst, src))
    s, d, z = src[order], dst[order], b[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1]) | (z[1:] != z[:-1])
    if new.all():
        return None
    group = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    rank = np.argsort(order[starts], kind="stable")  # groups in order of their first flow
    place = np.empty(len(starts), dtype=np.int64)
    place[rank] = np.arange(len(starts))
    by = np.argsort(place[group], kind="stable")  # members by row, in their order within it
    count = np.bincount(place[group], minlength=len(starts)).astype(np.int64)
    first = order[starts][rank]
    return (np.asarray(src)[first], np.asarray(dst)[first], b[first].copy(), count,
            order[by].astype(np.int64))


def check_choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    name = value.strip().lower().replace("-", "_")
    if name not in allowed:
        raise SpecError(f"unknown {what} {value!r}; choose one of {', '.join(allowed)}", field=what)
    return name


def check_pattern(value: str, allowed: tuple[str, ...] = PATTERNS) -> str:
    """A pattern name (of ``allowed``: a jobs file's also kv_tier), or a path to an existing CSV matrix."""
    if value.lower().endswith(".csv"):
        if not Path(value).is_file():
            raise SpecError(f"matrix file {value} not found", field="pattern")
        return value
    return check_choice(value, allowed, "pattern")


def place(topology: Topology, free: IntArray, gpus: int, placement: str, seed: int) -> IntArray:
    """GPUs for a job from the free ones (ascending), by placement; SpecError when too few are free."""
    if gpus < 1:
        raise SpecError(f"a job needs at least 1 GPU, got {gpus}", field="gpus")
    if gpus > len(free):
        raise SpecError(f"job needs {gpus} GPUs but only {len(free)} of the cluster's {topology.num_gpus} are free",
                        field="gpus")
    if placement == "random":
        return np.random.default_rng(seed).choice(free, gpus, replace=False)  # ranks in random order too
    if placement == "scattered":
        gpn = topology.gpus_per_node
        nodes, counts = np.unique(free // gpn, return_counts=True)
        whole = nodes[counts == gpn]
        need = -(-gpus // gpn)
        if need <= len(whole):
            pick = whole[(np.arange(need) * len(whole)) // need]
            out: IntArray = (pick[:, None] * gpn + np.arange(gpn)).ravel()[:gpus]
            return out
        return free[(np.arange(gpus) * len(free)) // gpus]
    return free[:gpus]


def read_matrix(path: str, n: int) -> FloatArray:
    """An n x n CSV matrix of bytes (row: source rank, column: destination rank); SpecError when malformed."""
    import warnings

    try:
        with warnings.catch_warnings():  # numpy warns on an empty file; the SpecError below says it instead
            warnings.simplefilter("ignore", UserWarning)
            m = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    except (ValueError, OSError) as exc:
        raise SpecError(f"cannot read matrix {path}: {str(exc).splitlines()[0]}", field="pattern") from exc
    if m.size == 0:
        raise SpecError(f"matrix {path} is empty; it needs {n} rows of {n} comma-separated byte counts",
                        field="pattern")
    if m.shape != (n, n):
        raise SpecError(f"matrix {path} is {m.shape[0]}x{m.shape[1]}, the job has {n} GPUs", field="pattern")
    if not np.isfinite(m).all() or (m < 0).any():
        raise SpecError(f"matrix {path} has negative or non-numeric entries", field="pattern")
    return m


def pattern_flows(topology: Topology, pattern: str, g: IntArray, nbytes: float, seed: int
                  ) -> list[tuple[IntArray, IntArray, FloatArray]]:
    """The stages of a pattern on GPUs g: a list of (src, dst, bytes) run one after another."""
    n = len(g)
    idx = np.arange(n)
    if pattern.lower().endswith(".csv"):
        m = read_matrix(pattern, n)
        s, d = np.nonzero(m)
        return [(g[s], g[d], m[s, d])]
    if pattern == "permutation":
        perm = np.random.default_rng(seed).permutation(n)
        if n > 1:  # derangement: send to the next in a random cycle
            perm = perm[(np.argsort(perm) + 1) % n]
        return [(g, g[perm], np.full(n, nbytes))]
    if pattern == "all_to_all":
        s, d = np.repeat(idx, n), np.tile(idx, n)
        keep = s != d
        return [(g[s[keep]], g[d[keep]], np.full(int(keep.sum()), nbytes / n))]
    if pattern == "ring":
        return [(g, g[(idx + 1) % n], np.full(n, nbytes))]
    if pattern == "incast":
        return [(g[1:], np.full(n - 1, g[0]), np.full(n - 1, nbytes))]
    if n < 2:
        raise SpecError(f"{pattern} needs at least 2 GPUs", field="gpus")
    gpn = topology.gpus_per_node
    phases = schedule("ring", pattern, n, gpn, nbytes, channels=min(gpn, n))
    return [(g[ph.src], g[ph.dst], np.asarray(ph.bytes, dtype=np.float64)) for ph in phases]


TRAFFIC_FLOW_WORDS = 8
"""8-byte words a flow costs while traffic is built and handed to the simulator: the stage's source,
destination, size and stage arrays, and their joined copies (`Traffic.arrays`)"""
SHRINK_HINT = "fewer --nodes or --gpus, a pattern with fewer flows such as ring or permutation, or ecmp routing"


def pattern_flow_count(pattern: str, n: int, gpus_per_node: int) -> int:
    """Flows `pattern_flows` makes for a job of n GPUs, counted without building them (0 for a CSV matrix: its
    size is known once read)."""
    if pattern.lower().endswith(".csv"):
        return 0
    counts = {"permutation": n, "all_to_all": n * (n - 1), "ring": n, "incast": n - 1}
    if pattern in counts:
        return counts[pattern]
    steps = 2 * (n - 1) if pattern == "all_reduce" else n - 1
    return steps * n * min(gpus_per_node, n) if n >= 2 else 0


def check_seed(seed: int, field: str | None = None) -> int:
    """A random seed numpy's generators take: 0 and up (one rule for --seed, a jobs file and build_traffic)."""
    if seed < 0:
        raise SpecError(f"seed must be >= 0, got {seed}", field=field)
    return seed


def check_traffic_size(topology: Topology, jobs: list[JobSpec], background: list[BackgroundSpec]) -> None:
    """Refuse in one line, before any flow is built, traffic whose flows alone would not fit in memory."""
    flows = sum(max(j.gpus, 0) * j.loads if check_pattern(j.pattern, JOB_PATTERNS) == KV_TIER else
                pattern_flow_count(check_pattern(j.pattern), max(j.gpus, 0), topology.gpus_per_node) for j in jobs)
    flows += sum(j.gpus for j in jobs for bg in background if bg.job == j.name)
    check_memory(flow_count_bound(flows, len(jobs), TRAFFIC_FLOW_WORDS), hint=SHRINK_HINT)


def build_traffic(topology: Topology, jobs: list[JobSpec], background: list[BackgroundSpec],
                  storage_nodes: int = 0, reserved_gpus: int = 0, classes: dict[str, float] | None = None,
                  symmetric_ok: bool = False) -> Traffic:
    """Place the jobs in order on the GPUs outside the storage nodes and the first `reserved_gpus` (a job modelled
    elsewhere, e.g. the training step of `train --sim flow`), and turn everything into stages of their traffic
    classes (`classes`: name -> arbitration weight; the default class weighs 1 unless named).

    With `symmetric_ok` (flows split evenly over their equal-cost paths may stand for the routing), a single
    all-to-all over every GPU with more than `SYMMETRIC_FROM_FLOWS` flows is kept as a quotient
    (`fabricsim.network.symmetry`), its flows never built."""
    if storage_nodes >= topology.num_nodes:
        raise SpecError(f"{storage_nodes} storage nodes leave no compute nodes", field="storage_nodes")
    tr = Traffic(classes=traffic_classes(classes))
    compute = topology.num_gpus - storage_nodes * topology.gpus_per_node
    if not 0 <= reserved_gpus <= compute:
        raise SpecError(f"{reserved_gpus} reserved GPUs do not fit the {compute} compute GPUs", field="--cluster-nodes")
    free = np.arange(reserved_gpus, compute, dtype=np.int64)
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise SpecError("job names must be unique", field="jobs")
    if symmetric_ok and symmetric_job(topology, jobs, background, storage_nodes, reserved_gpus):
        return symmetric_traffic(topology, jobs[0], tr)
    check_traffic_size(topology, jobs, background)
    storage = np.arange(compute, topology.num_gpus, dtype=np.int64)
    for job in jobs:
        check_seed(job.seed)
        g = place(topology, free, job.gpus, check_choice(job.placement, PLACEMENTS, "placement"), job.seed)
        free = np.setdiff1d(free, g, assume_unique=True)
        tr.gpus[job.name] = g
        if check_pattern(job.pattern, JOB_PATTERNS) == KV_TIER:
            _kv_tier_loads(tr, job, g, storage)
            continue
        prev: int | None = None
        for s, d, b in pattern_flows(topology, check_pattern(job.pattern), g, job.bytes, job.seed):
            rows = count_pairs(s, d, b)  # a collective's channels between the same GPUs: counted, not repeated
            if rows is None:
                prev = tr.add_stage(job.name, job.start, s, d, b, prev, job.traffic_class)
            else:
                prev = tr.add_stage(job.name, job.start, rows[0], rows[1], rows[2], prev, job.traffic_class,
                                    rows[3], rows[4])
    for k, bg in enumerate(background):
        kind = check_choice(bg.kind, BACKGROUND, "background kind")
        if bg.job not in tr.gpus:
            raise SpecError(f"background {kind} names unknown job {bg.job!r}", field="background")
        if len(storage) == 0:
            raise SpecError("background traffic needs storage nodes (storage_nodes >= 1)", field="storage_nodes")
        g = tr.gpus[bg.job]
        peer = storage[np.arange(len(g)) % len(storage)]
        s, d = (g, peer) if kind == "checkpoint_write" else (peer, g)
        tr.add_stage(f"{kind}:{bg.job}#{k}", bg.start, s, d, np.full(len(g), bg.bytes), None, bg.traffic_class)
    return tr


SYMMETRIC_FROM_FLOWS = 1 << 27
"""flows above which a symmetric all-to-all is run as a quotient (`build_traffic`'s `symmetric_ok`): 512 nodes of
8 GPUs (16.8M flows) and 1,024 (67M) still run every flow with its own ECMP hash; 2,048 (268M) cannot be held"""


SYMMETRIC_FABRICS = ("fat-tree", "rail-only")
"""fabrics whose colour refinement tests/test_flow_symmetry.py checks against every flow (fat trees of 1-3 tiers,
rail-optimized or not, oversubscribed, multi-plane; rail-only)"""


def symmetric_job(topology: Topology, jobs: list[JobSpec], background: list[BackgroundSpec], storage_nodes: int,
                  reserved_gpus: int) -> bool:
    """Whether the traffic is one all-to-all over every GPU of the cluster, larger than `SYMMETRIC_FROM_FLOWS`:
    the same from every GPU of a kind whatever the placement (every pair of GPUs exchanges the same bytes)."""
    if len(jobs) != 1 or background or storage_nodes or reserved_gpus or topology.fabric.kind not in SYMMETRIC_FABRICS:
        return False
    job = jobs[0]
    if check_pattern(job.pattern, JOB_PATTERNS) != "all_to_all" or job.gpus != topology.num_gpus:
        return False
    return pattern_flow_count("all_to_all", job.gpus, topology.gpus_per_node) > SYMMETRIC_FROM_FLOWS


def symmetric_traffic(topology: Topology, job: JobSpec, tr: Traffic) -> Traffic:
    """The all-to-all of `job` over every GPU as a quotient: each representative GPU of a kind sends bytes / n to
    every other GPU, each of those flows standing for its images from the GPUs of its kind."""
    kinds = link_kinds(topology)
    reps, many = representative_gpus(kinds)
    n = topology.num_gpus
    src = np.repeat(reps, n - 1)
    dst = np.concatenate([np.delete(np.arange(n, dtype=np.int64), r) for r in reps])
    tr.gpus[job.name] = np.arange(n, dtype=np.int64)
    tr.add_stage(job.name, job.start, src, dst, np.full(len(src), job.bytes / n), None, job.traffic_class,
                 np.repeat(many, n - 1))
    tr.symmetric = kinds
    return tr


def _kv_tier_loads(tr: Traffic, job: JobSpec, g: IntArray, storage: IntArray) -> None:
    """A serving job's loads from a networked KV tier: the storage nodes' GPU endpoints stand for the tier's servers
    (spread over the job's GPUs in turn); every ``every`` seconds each GPU receives ``bytes``, ``loads`` times, each
    load released on time whether or not the last one finished (requests arrive regardless)."""
    if len(storage) == 0:
        raise SpecError(f"job {job.name!r} loads from a KV tier: the jobs file needs storage_nodes >= 1 (the tier's "
                        "servers)", field="storage_nodes")
    peer = storage[np.arange(len(g)) % len(storage)]
    for k in range(job.loads):
        tr.add_stage(job.name, job.start + k * job.every, peer, g, np.full(len(g), job.bytes), None,
                     job.traffic_class)


def traffic_classes(classes: dict[str, float] | None) -> dict[str, float]:
    """The classes in order with the default class first (weight 1 unless given); SpecError on a weight that is
    not finite and positive."""
    out = {DEFAULT_CLASS: 1.0}
    for name, weight in (classes or {}).items():
        if not (isinstance(weight, (int, float)) and not isinstance(weight, bool) and 0 < weight < float("inf")):
            raise SpecError(f"class {name!r}: weight must be a positive number, got {weight!r}", field="classes")
        out[name] = float(weight)
    return out
