"""Dragonfly+ (Shpiner et al., "Dragonfly+: Low Cost Topology for Scaling Datacenters", HiPINE 2017): groups of a
2-tier leaf-spine joined by global links between their spines.

With switch radix R and h = R // 2: a group has up to h leaves (h ports down to NICs, one cable up to each of its
h spines) and h spines (a port down to each leaf, h global ports), so it holds up to h^2 NICs and has h^2 global
ports. Nodes fill groups in order, a node's NICs on consecutive leaf ports of one group (a node never straddles
groups); groups = ceil(NICs / (NICs a full group holds, whole nodes)). Every pair of groups gets
c = floor(h^2 / (groups - 1)) global cables, link k of the pair on spine ``(q c + k) mod h`` of each group (q: the
peer's index among the group's peers), so a pair's links spread over the spines; unused global ports stay free.

Routing (``ClusterSpec.dragonfly_routing``):
- minimal: within a group leaf -> spine -> leaf (ECMP over the spines); between groups leaf -> spine -> global
  link -> spine -> leaf, ECMP over the pair's c links;
- valiant: between groups through an intermediate group I (Valiant's randomised routing): a global link A -> I, a
  bounce through one of I's leaves when the arriving and leaving spines differ, a global link I -> B; the choices
  enumerate (I, link to I, link from I, bounce leaf);
- ugal: both sets (minimal first; `DragonflyRouter.minimal_counts` says how many are minimal). The flow simulator
  (`fabricsim.network.ugal`) picks per flow, by load, between its minimal and a non-minimal path (UGAL: a flow
  goes non-minimal only where that path is the less loaded), under every routing; ECMP, spray and adaptive then
  spread the flow over the choices of the class it got. Alone (``Topology.route``) the hash spreads over both.
The c global links of a group pair (and the Valiant choices) are interchangeable, so a sprayed or adaptive flow's
sample of them starts at a per-flow offset (``sample_per_flow``): a fixed sample would load the same few links.
Bisection (closed form, one direction): the lesser of the NICs' floor(N/2) x NICs x rate and the global links
between two halves of the groups, floor(G/2) x ceil(G/2) x c x port rate.
"""

from __future__ import annotations

import math

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology.fabric import CableRun, Fabric, FabricContext, LinkBlock
from fabricsim.topology.routes import IntArray

TIER_NAMES = ("leaf", "spine")


def group_nodes(radix: int, nics: int) -> int:
    """Nodes of ``nics`` NICs one dragonfly+ group of radix-``radix`` switches holds (h^2 NICs, whole nodes)."""
    h = radix // 2
    return (h * h) // nics


class DragonflyRouter:
    """Minimal and Valiant routes over a dragonfly+ (see the module docstring); path choices are enumerated."""

    def __init__(self, ctx: FabricContext, h: int, groups: int, links: int, mode: str, nic_leaf: IntArray,
                 nic_up: IntArray, nic_down: IntArray, ls_up: IntArray, ls_down: IntArray, glob: IntArray,
                 glob_spine: IntArray) -> None:
        self.ctx, self.h, self.groups, self.c, self.mode = ctx, h, groups, links, mode
        self.nic_leaf, self.nic_up, self.nic_down = nic_leaf, nic_up, nic_down
        self.ls_up, self.ls_down = ls_up, ls_down  # [leaf, spine in group] link ids
        self.glob = glob  # [group, peer group, k] link id from the first group's spine to the second's
        self.glob_spine = glob_spine  # [group, peer group, k] spine (in group) the link leaves from

    def _ends(self, src_gpu: IntArray, dst_gpu: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        _, ks = self.ctx.own_nic(src_gpu)
        _, kd = self.ctx.own_nic(dst_gpu)
        return ks, kd, self.nic_leaf[ks], self.nic_leaf[kd]

    sample_per_flow = True
    """a spray/adaptive sample of the choices starts at a per-flow offset (see the module docstring)"""

    def minimal_counts(self, src_gpu: IntArray, dst_gpu: IntArray) -> IntArray:
        """Choices of each flow that are minimal paths (the first ones): all of them except under ugal, where a
        flow between groups has c minimal choices before the Valiant ones."""
        counts = self.counts(src_gpu, dst_gpu)
        if self.mode != "ugal":
            return counts
        _, _, ls, ld = self._ends(src_gpu, dst_gpu)
        leaves = self.nic_leaf_groups
        out: IntArray = np.where(ls // leaves != ld // leaves, self.c, counts).astype(np.int64)
        return out

    def _valiant(self) -> int:
        """Valiant choices between two groups: intermediate group x link to it x link from it x bounce leaf."""
        return (self.groups - 2) * self.c * self.c * self.nic_leaf_groups

    def counts(self, src_gpu: IntArray, dst_gpu: IntArray) -> IntArray:
        _, _, ls, ld = self._ends(src_gpu, dst_gpu)
        leaves = self.nic_leaf_groups
        ga, gb = ls // leaves, ld // leaves
        inter = {"minimal": self.c, "valiant": self._valiant(), "ugal": self.c + self._valiant()}[self.mode]
        out = np.where(ls == ld, 1, np.where(ga == gb, self.h, max(inter, 1)))
        return out.astype(np.int64)

    @property
    def nic_leaf_groups(self) -> int:
        """Leaves per group (leaf ids run group-major)."""
        return int(self.ls_up.shape[0]) // self.groups

    def route(self, src_gpu: IntArray, dst_gpu: IntArray, choice: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        src_local, _ = self.ctx.own_nic(src_gpu)
        dst_local, _ = self.ctx.own_nic(dst_gpu)
        ks, kd, ls, ld = self._ends(src_gpu, dst_gpu)
        leaves = self.nic_leaf_groups
        ga, gb = ls // leaves, ld // leaves
        out = np.full((len(ks), 9), -1, dtype=np.int64)
        out[:, 0] = self.nic_up[ks]
        same_leaf = ls == ld
        out[same_leaf, 1] = self.nic_down[kd[same_leaf]]
        local = ~same_leaf & (ga == gb)
        j = choice[local] % self.h
        out[local, 1] = self.ls_up[ls[local], j]
        out[local, 2] = self.ls_down[ld[local], j]
        out[local, 3] = self.nic_down[kd[local]]
        far = np.flatnonzero(ga != gb)
        c = choice[far]
        minimal = np.ones(len(far), dtype=bool) if self.mode == "minimal" else \
            (c < self.c) if self.mode == "ugal" else np.zeros(len(far), dtype=bool)
        if self.mode == "ugal":
            c = np.where(minimal, c, c - self.c)
        m = far[minimal]
        if len(m):
            k = c[minimal] % self.c
            a, b = ga[m], gb[m]
            sa, sb = self.glob_spine[a, b, k], self.glob_spine[b, a, k]
            out[m, 1] = self.ls_up[ls[m], sa]
            out[m, 2] = self.glob[a, b, k]
            out[m, 3] = self.ls_down[ld[m], sb]
            out[m, 4] = self.nic_down[kd[m]]
        v = far[~minimal]
        if len(v):
            cv = c[~minimal] % max(self._valiant(), 1)
            cv, bounce_leaf = divmod(cv, leaves)
            pick, k2 = divmod(cv, self.c)
            pick, k1 = divmod(pick, self.c)
            a, b = ga[v], gb[v]
            # intermediate group: the pick-th group that is neither end
            lo, hi = np.minimum(a, b), np.maximum(a, b)
            mid = pick + (pick >= lo) + (pick + (pick >= lo) >= hi)
            s_out = self.glob_spine[a, mid, k1]
            s_in = self.glob_spine[mid, a, k1]  # spine of the intermediate group the first link arrives at
            s_leave = self.glob_spine[mid, b, k2]
            s_end = self.glob_spine[b, mid, k2]
            bounce = s_in != s_leave
            leaf_mid = mid * leaves + bounce_leaf
            out[v, 1] = self.ls_up[ls[v], s_out]
            out[v, 2] = self.glob[a, mid, k1]
            col = np.full(len(v), 3)
            hop_down = self.ls_down[leaf_mid, s_in]  # spine s_in -> leaf
            hop_up = self.ls_up[leaf_mid, s_leave]  # leaf -> spine s_leave
            out[v[bounce], 3] = hop_down[bounce]
            out[v[bounce], 4] = hop_up[bounce]
            col[bounce] = 5
            out[v, col] = self.glob[mid, b, k2]
            out[v, col + 1] = self.ls_down[ld[v], s_end]
            out[v, col + 2] = self.nic_down[kd[v]]
        width = int(np.max(np.sum(out >= 0, axis=1))) if len(out) else 1
        return src_local, dst_local, out[:, : max(width, 1)]


def build_dragonfly(ctx: FabricContext) -> Fabric:
    """Groups of leaf-spine joined by global links (see the module docstring); SpecErrors name the limits."""
    spec, switch = ctx.spec, ctx.resolved.switch
    if spec.tiers is not None or spec.oversubscription != 1.0:
        raise SpecError("tiers and oversubscription apply to fat trees only", field="fabric")
    h = switch.radix // 2
    nics = ctx.nics
    if nics > h:
        raise SpecError(f"a node's {nics} NICs do not fit on one leaf's {h} down ports", field="link")
    nodes_per_group = group_nodes(switch.radix, nics)
    groups = math.ceil(ctx.nodes / nodes_per_group)
    if groups < 2:
        raise SpecError(f"{ctx.nodes} nodes fit in one dragonfly group ({nodes_per_group} nodes): build a fat tree",
                        field="nodes")
    if groups - 1 > h * h:
        raise SpecError(f"a dragonfly+ of radix-{switch.radix} switches holds at most {h * h + 1} groups "
                        f"({(h * h + 1) * nodes_per_group} nodes); asked for {ctx.nodes}", field="nodes")
    per_group = math.ceil(ctx.nodes / groups)  # nodes spread evenly over the groups
    leaves = math.ceil(per_group * nics / h)
    c = (h * h) // (groups - 1)
    node = np.repeat(np.arange(ctx.nodes, dtype=np.int64), nics)
    group = node // per_group
    slot = (node % per_group) * nics + np.tile(np.arange(nics, dtype=np.int64), ctx.nodes)
    nic_leaf = group * leaves + slot // h

    kind, hop, rate = ctx.resolved.link_kind, switch.latency_s, ctx.port_bytes_per_s
    n_leaves, n_spines = groups * leaves, groups * h
    first = ctx.endpoint_offset
    leaf_ep = first + np.arange(n_leaves, dtype=np.int64)
    spine_ep = first + n_leaves + np.arange(n_spines, dtype=np.int64)
    block = LinkBlock(ctx.link_offset)
    nic_up, nic_down = block.cables(ctx.nic_endpoints(), leaf_ep[nic_leaf], ctx.resolved.nic_link_bytes_per_s,
                                    kind, ctx.resolved.link.latency_s, hop)
    leaf = np.repeat(np.arange(n_leaves, dtype=np.int64), h)
    j = np.tile(np.arange(h, dtype=np.int64), n_leaves)
    up, down = block.cables(leaf_ep[leaf], spine_ep[(leaf // leaves) * h + j], rate, kind, hop, hop)
    ls_up, ls_down = up.reshape(n_leaves, h), down.reshape(n_leaves, h)

    a, b = np.triu_indices(groups, 1)
    a, b = np.repeat(a, c), np.repeat(b, c)
    k = np.tile(np.arange(c, dtype=np.int64), len(a) // c)
    qa, qb = b - 1, a  # peer index of b among a's peers (b > a), and of a among b's
    spine_a, spine_b = (qa * c + k) % h, (qb * c + k) % h
    g_ab, g_ba = block.cables(spine_ep[a * h + spine_a], spine_ep[b * h + spine_b], rate, kind, hop, hop)
    glob = np.full((groups, groups, c), -1, dtype=np.int64)
    glob_spine = np.full((groups, groups, c), -1, dtype=np.int64)
    glob[a, b, k], glob[b, a, k] = g_ab, g_ba
    glob_spine[a, b, k], glob_spine[b, a, k] = spine_a, spine_b

    cables = (CableRun("node-leaf", ctx.nodes * nics, ctx.resolved.nic_link_bytes_per_s, spec.node_cable),
              CableRun("leaf-spine", n_leaves * h, rate, "optical"),
              CableRun("global", len(a), rate, "optical"))
    mode = spec.dragonfly_routing if groups >= 3 else "minimal"  # Valiant needs a third group to go through
    notes = [f"{groups * h * h - groups * (groups - 1) * c} global ports left free"]
    if mode != spec.dragonfly_routing:
        notes.append(f"{spec.dragonfly_routing} routing needs 3 groups or more: minimal routing over {groups}")
    bisection = min((ctx.nodes // 2) * nics * ctx.resolved.nic_link_bytes_per_s,
                    (groups // 2) * (groups - groups // 2) * c * rate)
    return Fabric(
        kind="dragonfly",
        description=f"dragonfly+, {groups} groups of {leaves} leaves + {h} spines, {c} global link"
                    f"{'s' if c > 1 else ''} per group pair, {switch.id}, {mode} routing",
        tiers=2,
        oversubscription=1.0,
        tier_names=TIER_NAMES,
        switch_tier=np.repeat(np.arange(2, dtype=np.int64), [n_leaves, n_spines]),
        switch_rail=np.full(n_leaves + n_spines, -1, dtype=np.int64),
        rails=0,
        links=block,
        cables=cables,
        bisection_bytes_per_s=float(bisection),
        router=DragonflyRouter(ctx, h, groups, c, mode, nic_leaf, nic_up, nic_down, ls_up, ls_down, glob,
                               glob_spine),
        notes=tuple(notes),
    )
