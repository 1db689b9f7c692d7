"""3D torus of fabric switches (SDSC Gordon-style): each switch hosts ``nodes_per_switch`` nodes' NICs and spends
its remaining ports on its torus neighbours, evenly over the directions.

- A dimension of size >= 3 has a + and a - neighbour; size 2 has one neighbour (one direction, whose links serve
  both ways round); size 1 has none. Links per direction: (radix - node ports) // directions.
- Routing is minimal: per dimension the shorter way round (both ways when the distance is exactly half the ring);
  equal-cost paths come from the 6 dimension orders times the tie directions. The hash picks one of 48 codes
  (order x tie bits), so paths with fewer distinct variants repeat; `Topology.paths` removes duplicates.
- Bisection: the cheapest plane cut, across the largest dimension: 2 (1 for a dimension of 2) x (links per
  direction) x (switches in the cross-section) x port rate, capped by what half the NICs can inject. Exact for
  even sizes; for an odd largest dimension a balanced cut is not a plane and the figure is the plane cut's.
"""

from __future__ import annotations

import itertools

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology.fabric import CableRun, Fabric, FabricContext, LinkBlock, ceil_div
from fabricsim.topology.routes import IntArray

PERMUTATIONS = np.array(list(itertools.permutations(range(3))), dtype=np.int64)
CHOICES = len(PERMUTATIONS) * 8


def near_cube(n: int) -> tuple[int, int, int]:
    """The factorization n = a*b*c (a >= b >= c) with the smallest largest factor: the most cube-like torus."""
    best: tuple[int, int, int] = (n, 1, 1)
    for c in range(1, round(n ** (1 / 3)) + 2):
        if n % c:
            continue
        rest = n // c
        for b in range(c, int(rest**0.5) + 1):
            if rest % b == 0:
                a = rest // b
                cand = (a, b, c)
                if max(cand) < max(best):
                    best = cand
    return best


class TorusRouter:
    """Vectorized minimal routing on the switch torus; the GPU leaves and arrives by its own NIC."""

    def __init__(self, ctx: FabricContext, dims: tuple[int, int, int], node_switch: IntArray, nic_up: IntArray,
                 nic_down: IntArray, neighbour: IntArray) -> None:
        self.ctx, self.dims = ctx, np.array(dims, dtype=np.int64)
        self.node_switch, self.nic_up, self.nic_down = node_switch, nic_up, nic_down
        self.neighbour = neighbour  # [switch, dim, 0 (+) / 1 (-)] -> link id, -1 where none
        self.strides = np.array([1, dims[0], dims[0] * dims[1]], dtype=np.int64)

    def _switches(self, gpu: IntArray) -> IntArray:
        return self.node_switch[gpu // self.ctx.node.gpus]

    def counts(self, src_gpu: IntArray, dst_gpu: IntArray) -> IntArray:
        same = self._switches(src_gpu) == self._switches(dst_gpu)
        return np.where(same, 1, CHOICES).astype(np.int64)

    def route(self, src_gpu: IntArray, dst_gpu: IntArray, choice: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        src_local, ks = self.ctx.own_nic(src_gpu)
        dst_local, kd = self.ctx.own_nic(dst_gpu)
        s, d = self._switches(src_gpu), self._switches(dst_gpu)
        dims = self.dims
        cs = (s[:, None] // self.strides) % dims
        cd = (d[:, None] // self.strides) % dims
        fwd = (cd - cs) % dims
        bwd = (dims - fwd) % dims
        tie_bits = (choice[:, None] // len(PERMUTATIONS) >> np.arange(3)) & 1
        backward = (bwd < fwd) | ((bwd == fwd) & (tie_bits == 1))
        steps = np.where(backward, bwd, fwd)
        order = PERMUTATIONS[choice % len(PERMUTATIONS)]
        hops = int(steps.sum(axis=1).max(initial=0))
        out = np.full((len(s), hops + 2), -1, dtype=np.int64)
        out[:, 0] = self.nic_up[ks]
        rows = np.arange(len(s))
        col = np.ones(len(s), dtype=np.int64)
        cur = cs.copy()
        for pos in range(3):
            dim = order[:, pos]
            n_steps = steps[rows, dim]
            direction = backward[rows, dim].astype(np.int64)
            delta = 1 - 2 * direction
            for k in range(int(n_steps.max(initial=0))):
                act = rows[n_steps > k]
                here = (cur[act] * self.strides).sum(axis=1)
                out[act, col[act]] = self.neighbour[here, dim[act], direction[act]]
                cur[act, dim[act]] = (cur[act, dim[act]] + delta[act]) % dims[dim[act]]
                col[act] += 1
        out[rows, col] = self.nic_down[kd]
        return src_local, dst_local, out


def build_torus(ctx: FabricContext) -> Fabric:
    """A 3D torus of the context's switch; the spec sets dimensions (or near-cube) and nodes per switch."""
    spec, switch, radix = ctx.spec, ctx.resolved.switch, ctx.radix
    if spec.tiers is not None or spec.oversubscription != 1.0:
        raise SpecError("tiers and oversubscription apply to fat trees only", field="fabric")
    nps = spec.nodes_per_switch
    count = ceil_div(ctx.nodes, nps)
    if ctx.nodes % nps:
        raise SpecError(f"{ctx.nodes} nodes do not fill torus switches of {nps} nodes each", field="nodes_per_switch")
    dims = spec.torus_dims or near_cube(count)
    if dims[0] * dims[1] * dims[2] != count:
        raise SpecError(f"{dims[0]}x{dims[1]}x{dims[2]} holds {dims[0] * dims[1] * dims[2]} switches; "
                        f"{ctx.nodes} nodes at {nps} per switch need {count}", field="torus_dims")
    down = nps * ctx.nics
    directions = sum(2 if n >= 3 else 1 if n == 2 else 0 for n in dims)
    if down > radix:
        raise SpecError(f"{switch.id} (radix {radix}) cannot host {nps} node(s) of {ctx.nics} NICs "
                        f"(at most {radix // ctx.nics} per switch)", field="nodes_per_switch")
    width = (radix - down) // directions if directions else 0
    if directions and width < 1:
        raise SpecError(f"{switch.id} (radix {radix}) has {radix - down} ports left after {down} node ports, fewer"
                        f" than the {directions} torus directions; lower nodes_per_switch", field="nodes_per_switch")
    rate, kind, hop = ctx.port_bytes_per_s, ctx.resolved.link_kind, switch.latency_s
    switch_ep = ctx.endpoint_offset + np.arange(count, dtype=np.int64)
    node_switch = np.arange(ctx.nodes, dtype=np.int64) // nps
    block = LinkBlock(ctx.link_offset)
    nic_switch = np.repeat(node_switch, ctx.nics)
    nic_up, nic_down = block.cables(ctx.nic_endpoints(), switch_ep[nic_switch], ctx.resolved.nic_link_bytes_per_s,
                                    kind, ctx.resolved.link.latency_s, hop)
    neighbour = np.full((count, 3, 2), -1, dtype=np.int64)
    strides = np.array([1, dims[0], dims[0] * dims[1]], dtype=np.int64)
    t = np.arange(count, dtype=np.int64)
    coords = (t[:, None] // strides) % np.array(dims)
    cables = [CableRun("node-switch", ctx.nodes * ctx.nics, ctx.resolved.nic_link_bytes_per_s, spec.node_cable)]
    torus_cables = 0
    for dim, size in enumerate(dims):
        if size < 2:
            continue
        nxt = t + ((coords[:, dim] + 1) % size - coords[:, dim]) * strides[dim]
        if size == 2:
            low = coords[:, dim] == 0
            ab, ba = block.cables(switch_ep[t[low]], switch_ep[nxt[low]], width * rate, kind, hop, hop)
            neighbour[t[low], dim, :] = ab[:, None]
            neighbour[nxt[low], dim, :] = ba[:, None]
            torus_cables += count // 2 * width
        else:
            ab, ba = block.cables(switch_ep[t], switch_ep[nxt], width * rate, kind, hop, hop)
            neighbour[t, dim, 0] = ab
            neighbour[nxt, dim, 1] = ba
            torus_cables += count * width
    if torus_cables:
        cables.append(CableRun("torus", torus_cables, rate, "optical"))
    nic_half = (ctx.nodes // 2) * ctx.nics * ctx.resolved.nic_link_bytes_per_s
    largest = max(dims)
    cut_links = 2 if largest >= 3 else 1  # a ring is cut twice; a pair of switches once
    plane = cut_links * width * rate * (count // largest) if largest >= 2 else float("inf")
    bisection = min(nic_half, plane) if ctx.nodes >= 2 else 0.0
    return Fabric(
        kind="torus",
        description=f"3D torus {dims[0]}x{dims[1]}x{dims[2]} of {switch.id}, {nps} node(s) per switch,"
                    f" {width} link(s) per direction",
        tiers=1,
        oversubscription=1.0,
        tier_names=("torus",),
        switch_tier=np.zeros(count, dtype=np.int64),
        switch_rail=np.full(count, -1, dtype=np.int64),
        rails=0,
        links=block,
        cables=tuple(cables),
        bisection_bytes_per_s=float(bisection),
        router=TorusRouter(ctx, dims, node_switch, nic_up, nic_down, neighbour),
    )
