"""Slim Fly (Besta and Hoefler, "Slim Fly: A Cost Effective Low-Diameter Network Topology", SC14): routers joined
by a McKay-Miller-Siran graph of diameter 2, the fabric DeepSeek's ISCA 2025 cost table compares with fat trees.

For a prime q = 4w + delta (delta = +-1) and a primitive element xi of GF(q), the 2 q^2 routers are (0, x, y) and
(1, m, c). (0, x, y) ~ (0, x, y') when y - y' is in X, (1, m, c) ~ (1, m, c') when c - c' is in X', and
(0, x, y) ~ (1, m, c) when y = m x + c. With delta = 1, X holds the even powers of xi and X' the odd ones; with
delta = -1, X = {1, xi^2, ..., xi^(2w-2), xi^(2w-1), xi^(2w+1), ..., xi^(4w-3)} and
X' = {xi, xi^3, ..., xi^(2w-1), xi^(2w), xi^(2w+2), ..., xi^(4w-2)}.
Every router has k' = (3q - delta) / 2 router ports and, for full global bandwidth, p = ceil(k' / 2) NIC ports
(Besta and Hoefler, sec. 3.1). The builder takes the smallest prime q whose routers hold the cluster's NICs within
the switch radix (k' + p <= radix); NICs fill routers in order, evenly. Prime powers that are not primes (q = 4, 8,
9, 25, 27, ...) would need GF(p^n) arithmetic and are not built.

Routing is minimal over the diameter-2 graph: one router hop when the routers are adjacent, else ECMP over every
common neighbour. The bisection reported is the cut between the halves of x and m (side-0 columns x < q/2 with side-1
columns m < q/2): one balanced cut, an upper bound on the minimum bisection, compared by tests with a max flow.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology.fabric import CableRun, Fabric, FabricContext, LinkBlock
from fabricsim.topology.routes import IntArray

if TYPE_CHECKING:
    import numpy.typing as npt

_CHUNK = 4096  # flows whose common neighbours are found at once (chunk x routers booleans)


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


def _primitive_root(q: int) -> int:
    """The smallest generator of GF(q)*, q prime."""
    factors = {d for d in range(2, q) if (q - 1) % d == 0 and _is_prime(d)}
    return next(g for g in range(2, q) if all(pow(g, (q - 1) // f, q) != 1 for f in factors)) if q > 2 else 1


def generator_sets(q: int) -> tuple[set[int], set[int]]:
    """(X, X') of the MMS construction for an odd prime q (see the module docstring)."""
    xi = _primitive_root(q)
    power = [pow(xi, i, q) for i in range(q - 1)]
    if q % 4 == 1:
        x = {power[i] for i in range(0, q - 1, 2)}
        return x, set(range(1, q)) - x
    w = (q + 1) // 4
    x = {power[i] for i in range(0, 2 * w - 1, 2)} | {power[i] for i in range(2 * w - 1, 4 * w - 2, 2)}
    xp = {power[i] for i in range(1, 2 * w, 2)} | {power[i % (q - 1)] for i in range(2 * w, 4 * w - 1, 2)}
    return x, xp


def router_degree(q: int) -> int:
    """Router-to-router ports k' = (3q - delta) / 2."""
    delta = 1 if q % 4 == 1 else -1
    return (3 * q - delta) // 2


def mms_edges(q: int) -> tuple[IntArray, IntArray]:
    """Undirected router edges (a < b) of the MMS graph; router (s, u, v) has id s q^2 + u q + v."""
    x_set, xp_set = generator_sets(q)
    grid = np.meshgrid(np.arange(q), np.arange(q), np.arange(q), indexing="ij")
    u, v, v2 = (g.ravel() for g in grid)
    diff = (v - v2) % q
    in_x = np.isin(diff, list(x_set)) & (v < v2)
    in_xp = np.isin(diff, list(xp_set)) & (v < v2)
    a0, b0 = u[in_x] * q + v[in_x], u[in_x] * q + v2[in_x]
    a1, b1 = q * q + u[in_xp] * q + v[in_xp], q * q + u[in_xp] * q + v2[in_xp]
    xs, ms, cs = u, v, v2  # (0, x, y) ~ (1, m, c) with y = m x + c
    y = (ms * xs + cs) % q
    a2, b2 = xs * q + y, q * q + ms * q + cs
    return np.concatenate([a0, a1, a2]).astype(np.int64), np.concatenate([b0, b1, b2]).astype(np.int64)


def pick_q(nics: int, radix: int) -> tuple[int, int]:
    """(q, NIC ports per router) of the smallest prime q whose 2 q^2 routers hold ``nics`` NICs within ``radix``."""
    for q in range(3, radix):
        if not _is_prime(q):
            continue
        k = router_degree(q)
        p = min(math.ceil(k / 2), radix - k)
        if p < 1:
            break
        if 2 * q * q * p >= nics:
            return q, p
    raise SpecError(f"no Slim Fly of radix-{radix} switches holds {nics} NICs (router ports k' and NIC ports "
                    f"ceil(k'/2) must fit the radix); use a larger switch or a fat tree", field="nodes")


class SlimFlyRouter:
    """Minimal routes over the diameter-2 router graph: direct when adjacent, ECMP over common neighbours."""

    def __init__(self, ctx: FabricContext, adjacency: npt.NDArray[np.bool_], keys: IntArray, ids: IntArray,
                 nic_router: IntArray, nic_up: IntArray, nic_down: IntArray) -> None:
        self.ctx, self.adj = ctx, adjacency
        self.keys, self.ids = keys, ids  # sorted a * R + b -> directed link id a -> b
        self.routers = adjacency.shape[0]
        self.nic_router, self.nic_up, self.nic_down = nic_router, nic_up, nic_down

    def _ends(self, src_gpu: IntArray, dst_gpu: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        _, ks = self.ctx.own_nic(src_gpu)
        _, kd = self.ctx.own_nic(dst_gpu)
        return ks, kd, self.nic_router[ks], self.nic_router[kd]

    def _link(self, a: IntArray, b: IntArray) -> IntArray:
        found: IntArray = self.ids[np.searchsorted(self.keys, a * self.routers + b)]
        return found

    def _common(self, ra: IntArray, rb: IntArray) -> npt.NDArray[np.bool_]:
        return self.adj[ra] & self.adj[rb]

    def counts(self, src_gpu: IntArray, dst_gpu: IntArray) -> IntArray:
        _, _, ra, rb = self._ends(src_gpu, dst_gpu)
        out = np.ones(len(ra), dtype=np.int64)
        two = np.flatnonzero((ra != rb) & ~self.adj[ra, rb])
        for start in range(0, len(two), _CHUNK):
            part = two[start : start + _CHUNK]
            out[part] = np.maximum(self._common(ra[part], rb[part]).sum(axis=1), 1)
        return out

    def route(self, src_gpu: IntArray, dst_gpu: IntArray, choice: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        src_local, _ = self.ctx.own_nic(src_gpu)
        dst_local, _ = self.ctx.own_nic(dst_gpu)
        ks, kd, ra, rb = self._ends(src_gpu, dst_gpu)
        out = np.full((len(ks), 4), -1, dtype=np.int64)
        out[:, 0] = self.nic_up[ks]
        same = ra == rb
        out[same, 1] = self.nic_down[kd[same]]
        direct = ~same & self.adj[ra, rb]
        d = np.flatnonzero(direct)
        out[d, 1] = self._link(ra[d], rb[d])
        out[d, 2] = self.nic_down[kd[d]]
        two = np.flatnonzero(~same & ~direct)
        for start in range(0, len(two), _CHUNK):
            part = two[start : start + _CHUNK]
            common = self._common(ra[part], rb[part])
            count = common.sum(axis=1)
            if (count == 0).any():
                raise AssertionError("Slim Fly routers more than two hops apart")  # a construction bug
            nth = choice[part] % count
            mid = np.argmax(np.cumsum(common, axis=1) > nth[:, None], axis=1)
            out[part, 1] = self._link(ra[part], mid)
            out[part, 2] = self._link(mid, rb[part])
            out[part, 3] = self.nic_down[kd[part]]
        width = int(np.max(np.sum(out >= 0, axis=1))) if len(out) else 1
        return src_local, dst_local, out[:, : max(width, 1)]


def build_slim_fly(ctx: FabricContext) -> Fabric:
    """Routers of an MMS graph with the cluster's NICs spread over them (see the module docstring)."""
    spec, switch = ctx.spec, ctx.resolved.switch
    if spec.tiers is not None or spec.oversubscription != 1.0:
        raise SpecError("tiers and oversubscription apply to fat trees only", field="fabric")
    total = ctx.nodes * ctx.nics
    q, p = pick_q(total, switch.radix)
    routers = 2 * q * q
    per_router = math.ceil(total / routers)
    half = q // 2
    column = (np.arange(routers) // q) % q  # x of (0, x, y), m of (1, m, c)
    fill = np.argsort(column >= half, kind="stable")  # lower columns first: they and the rest split in two
    nic_router = fill[np.arange(total, dtype=np.int64) // per_router]
    a, b = mms_edges(q)

    kind, hop, rate = ctx.resolved.link_kind, switch.latency_s, ctx.port_bytes_per_s
    router_ep = ctx.endpoint_offset + np.arange(routers, dtype=np.int64)
    block = LinkBlock(ctx.link_offset)
    nic_rate = ctx.resolved.nic_link_bytes_per_s
    nic_up, nic_down = block.cables(ctx.nic_endpoints(), router_ep[nic_router], nic_rate, kind,
                                    ctx.resolved.link.latency_s, hop)
    ab, ba = block.cables(router_ep[a], router_ep[b], rate, kind, hop, hop)
    keys = np.concatenate([a * routers + b, b * routers + a])
    ids = np.concatenate([ab, ba])
    by_key = np.argsort(keys)
    adjacency = np.zeros((routers, routers), dtype=bool)
    adjacency[a, b] = adjacency[b, a] = True

    left = np.zeros(routers, dtype=bool)
    left[fill[: routers // 2]] = True  # the first half of the routers NICs fill
    cut = int(np.count_nonzero(left[a] != left[b]))
    node_of_nic = np.arange(total) // ctx.nics
    left_nic = left[nic_router]
    bisection = min(cut * rate, nic_rate * min(int(left_nic.sum()), int((~left_nic).sum())))
    used = int(np.count_nonzero(np.bincount(nic_router, minlength=routers)))
    empty = f"; {routers - used} routers hold no NIC" if used < routers else ""
    notes = [f"q = {q}: {routers} routers of {router_degree(q)} router ports and up to {p} NIC ports "
             f"({per_router} used){empty}"]
    if len(np.unique(node_of_nic[left_nic])) + len(np.unique(node_of_nic[~left_nic])) > ctx.nodes:
        notes.append("some nodes' NICs straddle the bisection's halves")
    return Fabric(
        kind="slim-fly",
        description=f"Slim Fly (MMS graph, q = {q}), {routers} routers, {switch.id}, minimal routing",
        tiers=1,
        oversubscription=1.0,
        tier_names=("router",),
        switch_tier=np.zeros(routers, dtype=np.int64),
        switch_rail=np.full(routers, -1, dtype=np.int64),
        rails=0,
        links=block,
        cables=(CableRun("node-router", total, nic_rate, spec.node_cable),
                CableRun("router-router", len(a), rate, "optical")),
        bisection_bytes_per_s=float(bisection),
        router=SlimFlyRouter(ctx, adjacency, keys[by_key], ids[by_key], nic_router, nic_up, nic_down),
        notes=tuple(notes),
    )
