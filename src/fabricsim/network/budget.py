"""What a flow-simulator run will cost before it starts: flows, incidence entries, peak memory; the guard that
refuses a run the machine cannot hold, and the progress hook long runs report through.

The peak-memory estimate counts the numpy arrays the router (`flowroute`, `Topology.route`) and the simulator
(`flowsim.simulate`, `fairshare`, `mintree`) allocate, in 8-byte words, from four sizes:

- n flows, E incidence entries after routing (one per (flow, link); a flow split over k paths has one entry per
  distinct link of its paths), P path entries before merging (k x path length summed: E for ECMP) and W, the widest
  path (the padded width `Topology.route_choices` builds for every flow);
- e, a, the entries and flows active at once: the sum over independent stage chains of each chain's largest stage
  (stages in a chain run one after another; a stage DAG that is not a set of chains counts every flow).

Links are numbered in int32 (half a word) below 2^31 links. Routing holds the sizes and flow ids and the int64
copies of the int32 GPU ranks `traffic` passes (4n); ECMP, besides,
per chunk of c <= `ROUTE_CHUNK` flows, padded matrices (fabric hops, the NIC legs and their offset copies, the
joined paths, the padded result: ``ROUTE_PAD_WORDS`` x W words a flow plus a byte mask), ``ROUTE_FLOW_WORDS``
per-flow index vectors, the chunk's routes (c + E_c) and their latency gather (2E_c); each chunk keeps
its lengths, latencies and int32 links (2n + E/2 over all chunks), joined at the end into one copy with the
offsets (3n + E/2); ECMP flows carry no weights. Spray and adaptive hold per path
(Q of them) its flow, choice and share (``SPLIT_PATH_WORDS``), route the paths in the same padded chunks, and then
merge them: per path entry the entry-to-path map, merge key, its sort and inverse, the gathered shares
(``SPLIT_ENTRY_WORDS`` x P).
The simulator holds the flow set (4n + E/2 words: offsets, sizes, latencies, stages; int32 links; E more of weights
for split flows), its own per-flow state (``SIM_FLOW_WORDS``), per flow in flight its slots, min trees and the
filling's rates (``ACTIVE_FLOW_WORDS`` x a) and per entry in flight the filling's int32 link-to-flow index
(``ACTIVE_ENTRY_HALF_WORDS`` x e / 2); stages, links and the fixed Python objects add ``STAGE_WORDS``,
``LINK_WORDS`` and ``BASE_BYTES``. The compiled kernels (`fairshare`, `mintree`) allocate through numba, outside
tracemalloc's view, so the test's measured peak is the Python side's and the kernels' arrays are counted as
well. Every coefficient is a count of arrays in
that code, not a fit; tests/test_flow_guard.py checks the estimate bounds tracemalloc's peak within a factor of 2.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.network.maxmin import IntArray
from fabricsim.topology import Topology

if TYPE_CHECKING:
    import numpy.typing as npt

WORD = 8
"""bytes of an int64 / float64 element"""
SAMPLE_SEED = 0
"""seed of the flows routed to learn path lengths (explicit: the same run, the same estimate)"""
ROUTE_CHUNK = 1 << 18
"""flows `Topology.route` routes per pass (its own ROUTE_CHUNK)"""
ROUTE_PAD_WORDS = 5
"""path matrices alive at once in a routing chunk: the padded result (W words a flow, and its byte mask), and
four as wide as the paths themselves (fabric hops, the NIC legs and their offset copies, the joined paths)"""
ROUTE_FLOW_WORDS = 24
"""per-flow index vectors of a routing chunk: src/dst, node and local ids, NICs, leaves, hashes, choice, lengths,
and the guard's own sample (ids, src, dst, path lengths) routed just before"""
ROUTE_INTRA_WORDS = 12
"""the same for a flow inside one node (no NICs, leaves or hashes): src/dst, node and local ids, the inside mask,
its fixed path row, lengths, and the guard's sample"""
SPLIT_PATH_WORDS = 8
"""spray/adaptive, per path: its flow, index among the flow's paths, stride, path count, choice, source,
destination, share"""
SPLIT_ENTRY_WORDS = 8
"""spray/adaptive, per path entry: flow of path, entry-to-path map, merge key (and its product), unique's sort,
sorted keys and inverse, the gathered shares"""
SIM_FLOW_WORDS = 4
"""simulator per-flow state: delivered, drained, the stage order and its sorted keys; start and finish (2 more)
are made at the end, when the filling's arrays are gone"""
ACTIVE_ENTRY_HALF_WORDS = 1
"""per entry in flight, in the filling (`fairshare`): its int32 link-to-flow index (the heap holds one entry a
link, counted per link)"""
ACTIVE_FLOW_WORDS = 12
"""per flow in flight: its slot arrays (id, rate, segment start, bytes then, drain time: 5), the two min trees
over drain times and rates (2 x 2 slots, rounded up to a power of two: 4 to 8, about 6) and the filling's new
rates (1)"""
STAGE_WORDS = 16
"""per stage: release, start, finish, flows left, waiting, offsets, successors, and its heap entry (a tuple)"""
LINK_WORDS = 8
"""per link: the link bytes and load, the filling's scratch (remaining capacity, weight, flow count, position,
share) and the utilisation pass's quotient (the kernel's own per-used-link lists and heap live outside
tracemalloc's view and are as small)"""
BASE_BYTES = 16 * 1024
"""numpy array headers and Python objects of one run (about 100 arrays of ~100 bytes, the result objects)"""
SAMPLE = 4096
"""flows routed to measure path lengths; all of them when there are fewer"""
MEMORY_ENV = "FABRICSIM_MEMORY_LIMIT"
"""bytes a flow simulation may use (e.g. 2G); default: the machine's available memory (/proc/meminfo)"""

ProgressHook = Callable[[str, int, int], None]
"""(what, done, total): called as routing and simulation advance"""
_PROGRESS: ContextVar[ProgressHook | None] = ContextVar("flow_progress", default=None)


@dataclass(frozen=True)
class FlowEstimate:
    """Sizes of a flow-simulator run and its estimated peak memory (bytes)."""

    flows: int
    entries: int
    """incidence entries after routing (flow, link)"""
    path_entries: int
    """entries before merging the paths of split flows (equal to `entries` for ECMP)"""
    width: int
    active_entries: int
    """entries active at once, at most"""
    peak_bytes: int
    lower_bound: bool = False
    """counted before the flows exist (one link a flow): the run needs at least this much"""

    @property
    def hops(self) -> float:
        return self.entries / self.flows if self.flows else 0.0


def memory_words(n: int, entries: int, paths: int, path_entries: int, width: int, active_flows: int,
                 active_entries: int, split: bool, between_nodes: float = 1.0) -> int:
    """Peak words of a run of the given sizes (`split`: spray or adaptive routing, Q = `paths`;
    `between_nodes`: the share of flows that leave their node): the larger of the routing and the simulation
    peaks."""
    per_flow = ROUTE_INTRA_WORDS + between_nodes * (ROUTE_FLOW_WORDS - ROUTE_INTRA_WORDS)

    def chunk(c: int, rows: int, cells: int) -> int:  # c of `rows` paths holding `cells` entries in all
        return int(c * (width + width // WORD + per_flow)) + (ROUTE_PAD_WORDS - 1) * cells * c // max(rows, 1)

    if split:
        route = 4 * n + SPLIT_PATH_WORDS * paths + max(
            chunk(min(paths, ROUTE_CHUNK), paths, path_entries) + paths + path_entries,
            SPLIT_ENTRY_WORDS * path_entries + 2 * entries)
    else:
        c = min(n, ROUTE_CHUNK)
        cells = entries * c // max(n, 1)
        kept = 2 * n + entries // 2  # every chunk's lengths, latencies and int32 links
        before_last = kept - (2 * c + cells // 2)  # what the earlier chunks keep while the last one routes
        route = 4 * n + max(before_last + chunk(c, n, entries) + c + 3 * cells, 2 * kept + n)
    held = 4 * n + entries // 2 + (entries if split else 0)  # offsets, sizes, latencies, stages; links; weights
    sim = held + SIM_FLOW_WORDS * n + max(ACTIVE_ENTRY_HALF_WORDS * active_entries // 2
                                          + ACTIVE_FLOW_WORDS * active_flows, 2 * n)  # the last: start, finish
    return max(route, sim)


def _concurrency(counts: npt.NDArray[np.float64], stages: int, before: IntArray, after: IntArray) -> float:
    """Largest total of `counts` (per stage) active at once: the sum over chains of each chain's largest stage;
    the plain total when the dependencies are not chains."""
    if len(before) == 0:
        return float(counts.sum())
    indeg = np.bincount(after, minlength=stages)
    outdeg = np.bincount(before, minlength=stages)
    if indeg.max() > 1 or outdeg.max() > 1:
        return float(counts.sum())
    nxt = np.full(stages, -1, dtype=np.int64)
    nxt[before] = after
    chain = np.full(stages, -1, dtype=np.int64)
    for h in np.flatnonzero(indeg == 0):
        k = int(h)
        while k >= 0 and chain[k] < 0:
            chain[k] = h
            k = int(nxt[k])
    if (chain < 0).any():  # a cycle: the simulator refuses it; count everything
        return float(counts.sum())
    best = np.zeros(stages)
    np.maximum.at(best, chain, counts)
    return float(best.sum())


def estimate_flow_run(topology: Topology, src: npt.ArrayLike, dst: npt.ArrayLike, stage: npt.ArrayLike,
                      stages: int, dep_before: npt.ArrayLike = (), dep_after: npt.ArrayLike = (),
                      routing: str = "ecmp") -> FlowEstimate:
    """Flows, entries and peak memory of routing and simulating these flows; path lengths from routing a sample
    of at most `SAMPLE` flows (all of them on small runs)."""
    from fabricsim.network.flowroute import route_flows, split_paths

    s = np.atleast_1d(np.asarray(src, dtype=np.int64))
    d = np.atleast_1d(np.asarray(dst, dtype=np.int64))
    st = np.atleast_1d(np.asarray(stage, dtype=np.int64))
    n = len(s)
    if d.shape != s.shape or st.shape != s.shape:
        raise SpecError(f"src, dst and stage differ in length ({len(s)}, {len(d)}, {len(st)})", field="dst")
    if n == 0:
        return FlowEstimate(0, 0, 0, 0, 0, 0)
    # A seeded random sample, not an even stride: patterns list flows source by source, so a stride near the
    # destination count aliases onto one offset (512-node all_to_all: every sampled flow 3 links long, not ~8).
    pick = np.arange(n) if n <= SAMPLE else np.sort(np.random.default_rng(SAMPLE_SEED).choice(n, SAMPLE,
                                                                                               replace=False))
    ecmp = topology.route(s[pick], d[pick], pick)
    lens, width = ecmp.lengths.astype(np.float64), int(ecmp.lengths.max(initial=0))
    del ecmp  # before routing the sample again: the guard's own peak stays below the run's
    k = np.ones(len(pick))
    merged = lens
    # paths routed a flow before merging (None: one hashed path a flow, plain ECMP); spray and adaptive route the
    # sample before counting them, so the guard's own peak stays below the run's, as for ECMP
    ways = split_paths(topology, s[pick], d[pick], routing) if routing == "ecmp" else None
    if routing != "ecmp" or ways is not None:  # spray, adaptive; ECMP striped over planes or choosing by UGAL
        merged = np.diff(route_flows(topology, s[pick], d[pick], routing).indptr).astype(np.float64)
        ways = split_paths(topology, s[pick], d[pick], routing) if ways is None else ways
        k = np.ones(len(pick)) if ways is None else ways.astype(np.float64)
    scale = n / len(pick)
    entries, path_entries = int(np.ceil(merged.sum() * scale)), int(np.ceil((k * lens).sum() * scale))
    paths = int(np.ceil(k.sum() * scale)) if ways is not None else n
    per_stage_flows = np.bincount(st, minlength=stages).astype(np.float64)
    per_stage_entries: npt.NDArray[np.float64] = per_stage_flows * float(merged.sum() / len(pick)) \
        if n > SAMPLE else np.bincount(st, weights=merged, minlength=stages).astype(np.float64)
    before = np.asarray(dep_before, dtype=np.int64)
    after = np.asarray(dep_after, dtype=np.int64)
    active_e = int(np.ceil(_concurrency(per_stage_entries, stages, before, after)))
    active_f = int(np.ceil(_concurrency(per_stage_flows, stages, before, after)))
    gpn = topology.gpus_per_node
    between = float(np.mean(s[pick] // gpn != d[pick] // gpn))
    words = memory_words(n, entries, paths, path_entries, width, active_f, active_e, ways is not None, between)
    peak = (words + STAGE_WORDS * stages + LINK_WORDS * topology.num_links) * WORD + BASE_BYTES
    return FlowEstimate(n, entries, path_entries, width, active_e, peak)


def flow_count_bound(flows: int, stages: int, extra_words_per_flow: int = 0) -> FlowEstimate:
    """A lower bound on a run's peak before its flows are built: each flow crossing one link, plus the caller's
    own `extra_words_per_flow` (e.g. the traffic arrays it holds); the simulator's flow set, per-flow state and
    final link-bytes pass are allocated whatever the paths."""
    words = memory_words(flows, flows, flows, flows, 1, 0, 0, False) + extra_words_per_flow * flows
    return FlowEstimate(flows, flows, flows, 1, 0, (words + STAGE_WORDS * stages) * WORD, lower_bound=True)


def available_memory_bytes() -> int | None:
    """Bytes a run may use: $FABRICSIM_MEMORY_LIMIT when set, else MemAvailable from /proc/meminfo (None when
    neither is known)."""
    from fabricsim.inputs import parse_buffer_size

    limit = os.environ.get(MEMORY_ENV)
    if limit:
        return int(parse_buffer_size(limit, MEMORY_ENV, max_bytes=2**60))
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _gb(x: float) -> str:
    return f"{x / 1e9:.1f} GB" if x >= 1e8 else f"{x / 1e6:.1f} MB"


def check_memory(estimate: FlowEstimate, limit: int | None = None, hint: str | None = None) -> None:
    """SpecError (one line) when the run's estimated peak exceeds `limit` (default: `available_memory_bytes`)."""
    cap = available_memory_bytes() if limit is None else limit
    if cap is None or estimate.peak_bytes <= cap:
        return
    how = hint or "fewer nodes or GPUs, fewer ranks per node, a smaller pattern, or ecmp routing"
    need = f"{estimate.flows:,} flows need at least" if estimate.lower_bound else \
        f"{estimate.flows:,} flows x {estimate.hops:.1f} links need about"
    raise SpecError(f"too large for this machine: {need} "
                    f"{_gb(estimate.peak_bytes)} of memory, {_gb(cap)} available; shrink the run: {how}; or set "
                    f"{MEMORY_ENV} (bytes)", field="flow simulation")


def guard_flows(topology: Topology, src: npt.ArrayLike, dst: npt.ArrayLike, stage: npt.ArrayLike, stages: int,
                dep_before: npt.ArrayLike = (), dep_after: npt.ArrayLike = (), routing: str = "ecmp",
                limit: int | None = None, hint: str | None = None) -> FlowEstimate:
    """Estimate a run and refuse it (SpecError) when it would not fit in memory; the estimate otherwise."""
    est = estimate_flow_run(topology, src, dst, stage, stages, dep_before, dep_after, routing)
    check_memory(est, limit, hint)
    return est


@contextmanager
def flow_progress(hook: ProgressHook | None) -> Iterator[None]:
    """Report routing and simulation progress of the flow runs inside the block to `hook`."""
    token = _PROGRESS.set(hook)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def report(what: str, done: int, total: int) -> None:
    """Tell the active progress hook (if any) how far a run is."""
    hook = _PROGRESS.get()
    if hook is not None:
        hook(what, done, total)
