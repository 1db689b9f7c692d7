"""Fat trees (folded Clos) of one catalog switch: rail-optimized or plain, 1, 2 or 3 tiers, leaf oversubscription.

Sizing follows the NICs actually attached and the oversubscription asked for (hand counts in
tests/test_topology_sizing.py; NVIDIA's DGX SuperPOD tables still hold, tests/test_topology_reference.py):
- One switch: when every NIC fits on one switch (nodes x NICs <= radix) and no tier count is forced, the fabric is
  that switch, rails sharing it: same-rail and cross-rail traffic cross one switch and nothing else is needed. This
  is the DGX BasePOD scale (NVIDIA's BasePOD RA, RA-11127-001, puts 2-8 DGX nodes on QM9700 compute switches);
  fabricsim takes the one switch the ports need. Oversubscription has nothing to cut there and is noted.
- Leaves give at most half their ports (radix // 2) to NICs. Rail-optimized: NIC i of a node goes to rail
  ``i % rails``; when a whole rail's NICs fit in half a leaf, rails share leaves (the most rails per leaf that
  divides the rail count and fits: 16 DGX nodes on 4 leaves of 2 rails), else each rail gets one leaf per group of
  at most radix // 2 nodes, nodes spread evenly over the groups (33 DGX nodes: 17 + 16, not 32 + 1). Plain: a node's
  NICs share a leaf (top of rack), nodes spread evenly over the leaves.
- Uplinks: a leaf needs ``ceil(NICs on its fullest leaf / oversubscription)`` uplinks and sends the same number of
  cables to every spine (ECMP spreads flows evenly over the spines, so unequal bundles would strand capacity); a
  spine takes at most radix bundles' worth of cables. Each way to do that (spines x bundle >= need, within the
  leaf's free ports and the spine's ports) is a candidate; so is every leaf-group count from the fewest to `WIDEN`
  more (emptier leaves can need fewer spines). The cheapest candidate wins: catalog prices of the switch and the
  inter-switch optical cable, ties to fewer switches, cables, leaves. Cheapest over candidate sets that only grow
  as nodes or the needed uplinks shrink makes capex monotone in both (switch and cable totals may trade against
  each other). 31 DGX nodes need 31 uplinks a leaf and get 4 spines x 8 = 32: the RA's 256 leaf-spine cables.
  The realized ratio (NICs on the fullest leaf / uplinks, at least 1) is reported.
- 3 tiers: leaves form pods (a rail's leaves, in chunks of at most radix // 2, when rail-optimized; consecutive
  leaves otherwise); a pod's spines give half their ports to leaves by the same rule, and send as many uplinks as
  they have used down ports, spread evenly over one core plane (spine j of every pod to the cores of plane j), the
  cheapest spread again. Needs pods <= radix.
- A tier that no traffic crosses (spines over one leaf, cores over one pod: only when a tier count is forced) is
  built as asked with a warning in the notes, never silently; no automatic design has a switch with one cable.
Equal-cost paths: within a 2-tier fabric or a pod, one per spine; between pods, one per (spine index, core of its
plane). All paths use every tier only as needed (a flow between two NICs on one leaf stays on that leaf).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology.fabric import (
    CableRun,
    Fabric,
    FabricContext,
    LinkBlock,
    ceil_div,
)
from fabricsim.topology.routes import IntArray

TIER_NAMES = ("leaf", "spine", "core")
WIDEN = 8
"""leaf groups tried beyond the fewest that hold the NICs: more, emptier leaves can need fewer spines"""


@dataclass(frozen=True)
class FatTreePlan:
    """Switch and port counts of a fat tree; computed before any array is built."""

    rail_optimized: bool
    rails: int
    tiers: int
    down: int
    """node-facing port budget per leaf"""
    up: int
    """uplinks per leaf (0 for a single switch)"""
    leaves: int
    group_spines: int
    """2 tiers: all spines; 3 tiers: spines per pod"""
    pods: int
    pod_leaves: int
    spine_up: int
    """3 tiers: uplinks per spine"""
    cores_per_plane: int
    oversubscription: float
    """realized: NICs on the fullest leaf / its uplinks, at least 1"""
    pods_per_rail: int
    """3 tiers: pods per leaf set (per rail when rails do not share leaves)"""
    rails_per_leaf: int = 1
    groups: int = 1
    """leaf groups (rail-optimized) or leaves (plain, a node per leaf or fewer)"""
    leaf_sets: int = 1
    """leaves per leaf group: rails // rails_per_leaf when rail-optimized, else 1"""
    down_used: int = 0
    """NICs on the fullest leaf"""
    notes: tuple[str, ...] = ()

    @property
    def spines(self) -> int:
        return 0 if self.tiers == 1 else self.group_spines * (self.pods if self.tiers == 3 else 1)

    @property
    def cores(self) -> int:
        return self.group_spines * self.cores_per_plane if self.tiers == 3 else 0


def _divisors(n: int) -> list[int]:
    """Divisors of n, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


def _balanced_group(node: IntArray, nodes: int, groups: int) -> IntArray:
    """Group of each node when ``nodes`` are spread over ``groups`` contiguous groups differing by at most one."""
    base, extra = divmod(nodes, groups)
    big = base + 1
    cut = extra * big
    return np.where(node < cut, node // big, extra + (node - cut) // max(base, 1))


@dataclass(frozen=True)
class _Layout:
    """Where NICs land on leaves: rail-optimized (``sets`` leaves per group, ``rails_per_leaf`` rails on each) or
    plain (nodes spread over ``groups`` leaves, or each node over ``ceil(nics / down)`` leaves)."""

    rail_optimized: bool
    rails: int
    nics: int
    nodes: int
    rails_per_leaf: int
    groups: int
    down_used: int
    """NICs on the fullest leaf"""

    @property
    def sets(self) -> int:
        return self.rails // self.rails_per_leaf if self.rail_optimized else 1

    @property
    def leaves_per_node(self) -> int:
        return 1 if self.rail_optimized or self.down_used >= self.nics else ceil_div(self.nics, self.down_used)

    @property
    def leaves(self) -> int:
        if not self.rail_optimized and self.leaves_per_node > 1:
            return self.nodes * self.leaves_per_node
        return self.groups * self.sets

    def nic_leaf(self) -> IntArray:
        """Leaf of every NIC (global NIC number node * nics + local)."""
        nics, nodes = self.nics, self.nodes
        k = np.arange(nodes * nics, dtype=np.int64)
        node, local = k // nics, k % nics
        if self.rail_optimized:
            group = _balanced_group(node, nodes, self.groups)
            return group * self.sets + (local % self.rails) // self.rails_per_leaf
        if self.leaves_per_node == 1:
            return _balanced_group(node, nodes, self.groups)
        return node * self.leaves_per_node + local // self.down_used


def _layouts(ctx: FabricContext, rail: bool, rails: int, down: int, widen: int) -> list[_Layout]:
    """Candidate layouts: every way to share leaves between rails, from the fewest leaf groups to ``widen`` more."""
    nics, nodes = ctx.nics, ctx.nodes
    if not rail:
        if nics > down:
            return [_Layout(False, 1, nics, nodes, 1, nodes, down)]
        least = ceil_div(nodes, down // nics)
        return [_Layout(False, 1, nics, nodes, 1, g, ceil_div(nodes, g) * nics)
                for g in range(least, min(nodes, least + widen) + 1)]
    per_rail = nics // rails
    out = []
    for rpl in _divisors(rails):
        per_leaf = per_rail * rpl
        if per_leaf > down:
            continue
        least = ceil_div(nodes, down // per_leaf)
        if rpl > 1 and least > 1:  # rails share a leaf only when each rail's NICs all fit on it
            continue
        out += [_Layout(True, rails, nics, nodes, rpl, g, ceil_div(nodes, g) * per_leaf)
                for g in range(least, min(nodes, least + (widen if rpl == 1 else 0)) + 1)]
    return out


def _max_nodes(ctx: FabricContext, rail: bool, rails: int, down: int, max_leaves: int) -> int:
    """Most nodes that fit into ``max_leaves`` leaves (one rail per leaf at that scale)."""
    if rail:
        return (max_leaves // rails) * (down // (ctx.nics // rails))
    if ctx.nics <= down:
        return max_leaves * (down // ctx.nics)
    return max_leaves // ceil_div(ctx.nics, down)


def spreads(need: int, below: int, down_budget: int, port_budget: int) -> list[tuple[int, int]]:
    """Every way to spread ``need`` uplinks (at least) of each of ``below`` switches evenly over switches above, as
    (switches above, cables from each switch below to each above), one per bundle size: each upper switch gives
    ``down_budget`` ports to the switches below; each lower switch has ``port_budget`` ports for uplinks."""
    need, out = max(need, 1), list[tuple[int, int]]()
    for bundle in range(1, need + 1):
        above = ceil_div(need, bundle)
        if below * bundle <= down_budget and above * bundle <= port_budget and (not out or out[-1][0] != above):
            out.append((above, bundle))
    return out


def _limit_error(ctx: FabricContext, tiers: int, max_nodes: int, hint: str) -> SpecError:
    s = ctx.resolved.switch
    gpus = max_nodes * ctx.node.gpus
    return SpecError(
        f"a {tiers}-tier fat tree of {s.id} (radix {s.radix}) holds at most {max_nodes} {ctx.node.system.id} nodes "
        f"({gpus} GPUs); asked for {ctx.nodes}{hint}", field="nodes")


def _pods(layout: _Layout, half: int) -> tuple[int, int, int]:
    """(pods, leaves per pod, pods per leaf set) of a 3-tier fabric; pods hold at most ``half`` leaves."""
    if layout.rail_optimized:
        per_set = ceil_div(layout.groups, half)
        pod_leaves = ceil_div(layout.groups, per_set)
        per_set = ceil_div(layout.groups, pod_leaves)
        return layout.sets * per_set, pod_leaves, per_set
    pods = ceil_div(layout.leaves, half)
    pod_leaves = ceil_div(layout.leaves, pods)
    return ceil_div(layout.leaves, pod_leaves), pod_leaves, 0


def _ratio(down_used: int, up: int) -> float:
    """Realized leaf oversubscription: NICs on the fullest leaf per uplink, at least 1."""
    return max(1.0, down_used / up) if up else 1.0


def _single_switch(ctx: FabricContext, rail: bool, rails: int) -> FatTreePlan:
    """Every NIC on one switch (rails share it); a SpecError when they do not fit."""
    if ctx.nodes * ctx.nics > ctx.radix:
        raise _limit_error(ctx, 1, ctx.radix // ctx.nics, "; use tiers 2 or 3")
    notes = []
    if ctx.spec.oversubscription != 1:
        notes.append(f"oversubscription {ctx.spec.oversubscription:g}:1 does not apply: every NIC is on one switch")
    return FatTreePlan(rail, rails, 1, ctx.radix, 0, 1, 0, 1, 1, 0, 0, 1.0, 0, rails if rail else 1, 1, 1,
                       ctx.nodes * ctx.nics, tuple(notes))


def _idle_tier_notes(tiers: int, leaves: int, pods: int) -> tuple[str, ...]:
    """Notes for tiers that no traffic crosses (only built when a tier count is forced)."""
    notes = []
    if tiers >= 2 and leaves == 1:
        notes.append("warning: every NIC is on one leaf: the spine tier (forced by tiers) carries no traffic")
    if tiers == 3 and pods == 1:
        notes.append("warning: one pod: the core tier (forced by tiers=3) carries no traffic")
    return tuple(notes)


def _designs(ctx: FabricContext, layout: _Layout, tiers: int) -> list[FatTreePlan]:
    """The 2- or 3-tier plans of one layout (see the module docstring), one per leaf-spine spread; [] if none fit."""
    radix, half, d = ctx.radix, ctx.radix // 2, layout.down_used
    need = max(1, math.ceil(d / ctx.spec.oversubscription - 1e-9))
    base = FatTreePlan(layout.rail_optimized, layout.rails, tiers, half, 0, layout.leaves, 0, 1, layout.leaves, 0,
                       0, 1.0, 0, layout.rails_per_leaf, layout.groups, layout.sets, d)
    if tiers == 2:
        if layout.leaves > radix:
            return []
        return [replace(base, up=spines * bundle, group_spines=spines, oversubscription=_ratio(d, spines * bundle),
                        notes=_idle_tier_notes(2, layout.leaves, 1))
                for spines, bundle in spreads(need, layout.leaves, radix, radix - d)]
    pods, pod_leaves, per_set = _pods(layout, half)
    if pods > radix:
        return []
    out = []
    for spines, bundle in spreads(need, pod_leaves, half, radix - d):
        spine_down = pod_leaves * bundle
        core_fits = spreads(spine_down, pods, radix, radix - spine_down)
        if not core_fits:
            continue
        cores, core_bundle = min(core_fits, key=lambda f: _tier_cost(ctx, spines * f[0], pods * spines * f[0] * f[1]))
        out.append(replace(base, up=spines * bundle, group_spines=spines, pods=pods, pod_leaves=pod_leaves,
                           spine_up=cores * core_bundle, cores_per_plane=cores,
                           oversubscription=_ratio(d, spines * bundle), pods_per_rail=per_set,
                           notes=_idle_tier_notes(3, layout.leaves, pods)))
    return out


def _tier_cost(ctx: FabricContext, switches: int, cables: int) -> float:
    """Price of some switches and inter-switch cables (see `_unit_prices`)."""
    switch_usd, cable_usd = _unit_prices(ctx)
    return switches * switch_usd + cables * cable_usd


def _cost(ctx: FabricContext, plan: FatTreePlan) -> tuple[float, int, int, int]:
    """(price of switches and inter-switch cables, switches, cables, leaves): the plan with the least wins."""
    switches = plan.leaves + plan.spines + plan.cores
    cables = plan.leaves * plan.up + plan.spines * plan.spine_up
    return _tier_cost(ctx, switches, cables), switches, cables, plan.leaves


def _unit_prices(ctx: FabricContext) -> tuple[float, float]:
    """Catalog prices of the fabric switch and of an inter-switch cable; without them a switch weighs as much as
    ``radix`` cables (one per port), so the cheapest design is still the one with the fewest ports in use."""
    from fabricsim.topology.lineitems import cable_class

    switch_usd = ctx.resolved.switch.price_usd
    cable_usd: float | None = None
    if ctx.catalog is not None:
        try:
            cable_usd = cable_class(ctx.catalog, "optical", ctx.port_bytes_per_s).price_usd
        except SpecError:
            cable_usd = None
    if switch_usd is None or cable_usd is None:
        return float(ctx.radix), 1.0
    return float(switch_usd), float(cable_usd)


def plan_fat_tree(ctx: FabricContext) -> FatTreePlan:
    """Tiers, leaves, spines and cores for the context's cluster, or a SpecError naming the limit that failed."""
    spec, radix, nics = ctx.spec, ctx.radix, ctx.nics
    rail = spec.rail_optimized
    rails = (ctx.node.system.rails or nics) if rail else 1
    switch = ctx.resolved.switch
    half = radix // 2
    if half < 1:
        raise SpecError(f"switch {switch.id} has radix {radix}: too small for a fat tree", field="link")
    tiers = spec.tiers
    if tiers == 1 or (tiers is None and ctx.nodes * nics <= radix):
        return _single_switch(ctx, rail, rails)
    if rail and rails > radix:
        raise SpecError(f"a rail-optimized fat tree needs one leaf per rail: {ctx.node.system.id} has {rails} rails,"
                        f" more than {switch.id}'s radix {radix}", field="link")
    layouts = _layouts(ctx, rail, rails, half, WIDEN)
    if not layouts:  # a node's NICs of one rail need more than a leaf's down ports
        raise SpecError(f"a {ctx.node.system.id} node has {nics // rails} NICs on each of its {rails} rails, more "
                        f"than a {switch.id} leaf's {half} node ports", field="link")
    if tiers is None:
        tiers = 2 if min(layout.leaves for layout in layouts) <= radix else 3
    plans = [p for layout in layouts for p in _designs(ctx, layout, tiers)]
    if not plans:
        if tiers == 2:
            raise _limit_error(ctx, 2, _max_nodes(ctx, rail, rails, half, radix), "; use tiers 3")
        raise _limit_error(ctx, 3, _max_nodes(ctx, rail, rails, half, radix * half), "")
    return min(plans, key=lambda p: _cost(ctx, p))


class FatTreeRouter:
    """Vectorized up-down routing over a fat tree; ECMP choices enumerate spines (and cores between pods)."""

    def __init__(self, ctx: FabricContext, plan: FatTreePlan, nic_leaf: IntArray, leaf_pod: IntArray,
                 nic_up: IntArray, nic_down: IntArray, leaf_spine_up: IntArray, leaf_spine_down: IntArray,
                 spine_core_up: IntArray, spine_core_down: IntArray) -> None:
        self.ctx, self.plan = ctx, plan
        self.nic_leaf, self.leaf_pod = nic_leaf, leaf_pod
        self.nic_up, self.nic_down = nic_up, nic_down
        self.leaf_spine_up, self.leaf_spine_down = leaf_spine_up, leaf_spine_down
        self.spine_core_up, self.spine_core_down = spine_core_up, spine_core_down

    def counts(self, src_gpu: IntArray, dst_gpu: IntArray) -> IntArray:
        _, ks = self.ctx.own_nic(src_gpu)
        _, kd = self.ctx.own_nic(dst_gpu)
        ls, ld = self.nic_leaf[ks], self.nic_leaf[kd]
        plan = self.plan
        out = np.ones(len(ks), dtype=np.int64)
        if plan.tiers == 2:
            out[ls != ld] = plan.group_spines
        elif plan.tiers == 3:
            same_pod = self.leaf_pod[ls] == self.leaf_pod[ld]
            out[(ls != ld) & same_pod] = plan.group_spines
            out[~same_pod] = plan.group_spines * plan.cores_per_plane
        return out

    def route(self, src_gpu: IntArray, dst_gpu: IntArray, choice: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        src_local, ks = self.ctx.own_nic(src_gpu)
        dst_local, kd = self.ctx.own_nic(dst_gpu)
        ls, ld = self.nic_leaf[ks], self.nic_leaf[kd]
        out = np.full((len(ks), 6), -1, dtype=np.int64)
        out[:, 0] = self.nic_up[ks]
        same = ls == ld
        out[same, 1] = self.nic_down[kd[same]]
        if self.plan.tiers == 1:
            return src_local, dst_local, out[:, :2]
        if self.plan.tiers == 2:
            near = ~same
            far = np.zeros_like(same)
        else:
            same_pod = self.leaf_pod[ls] == self.leaf_pod[ld]
            near, far = ~same & same_pod, ~same_pod
        j = choice[near]
        out[near, 1] = self.leaf_spine_up[ls[near], j]
        out[near, 2] = self.leaf_spine_down[ld[near], j]
        out[near, 3] = self.nic_down[kd[near]]
        if far.any():
            cp, ps = self.plan.cores_per_plane, self.plan.group_spines
            j, c = choice[far] // cp, choice[far] % cp
            ps_src, ps_dst = self.leaf_pod[ls[far]] * ps + j, self.leaf_pod[ld[far]] * ps + j
            out[far, 1] = self.leaf_spine_up[ls[far], j]
            out[far, 2] = self.spine_core_up[ps_src, c]
            out[far, 3] = self.spine_core_down[ps_dst, c]
            out[far, 4] = self.leaf_spine_down[ld[far], j]
            out[far, 5] = self.nic_down[kd[far]]
        width = 6 if far.any() else 4
        return src_local, dst_local, out[:, :width]


def _leaf_pods(plan: FatTreePlan) -> IntArray:
    """Pod of every leaf (all 0 below 3 tiers)."""
    leaf = np.arange(plan.leaves, dtype=np.int64)
    if plan.tiers < 3:
        return np.zeros(plan.leaves, dtype=np.int64)
    if plan.rail_optimized:
        return (leaf % plan.leaf_sets) * plan.pods_per_rail + (leaf // plan.leaf_sets) // plan.pod_leaves
    return leaf // plan.pod_leaves


def build_fat_tree(ctx: FabricContext) -> Fabric:
    """Build a fat tree's switches, links and router from the context (see the module docstring for the rules)."""
    plan = plan_fat_tree(ctx)
    switch, rate = ctx.resolved.switch, ctx.port_bytes_per_s
    kind, hop = ctx.resolved.link_kind, switch.latency_s
    nic_lat = ctx.resolved.link.latency_s
    layout = _Layout(plan.rail_optimized, plan.rails, ctx.nics, ctx.nodes, plan.rails_per_leaf, plan.groups,
                     plan.down_used) if plan.tiers > 1 else None
    nic_leaf = layout.nic_leaf() if layout else np.zeros(ctx.nodes * ctx.nics, dtype=np.int64)
    leaf_pod = _leaf_pods(plan)
    base = ctx.endpoint_offset
    leaf_ep = base + np.arange(plan.leaves, dtype=np.int64)
    spine_ep = base + plan.leaves + np.arange(plan.spines, dtype=np.int64)
    core_ep = base + plan.leaves + plan.spines + np.arange(plan.cores, dtype=np.int64)

    block = LinkBlock(ctx.link_offset)
    nic_up, nic_down = block.cables(ctx.nic_endpoints(), leaf_ep[nic_leaf], ctx.resolved.nic_link_bytes_per_s,
                                    kind, nic_lat, hop)
    empty = np.zeros((0, 0), dtype=np.int64)
    ls_up = ls_down = sc_up = sc_down = empty
    if plan.tiers >= 2:
        group = plan.group_spines
        leaf = np.repeat(np.arange(plan.leaves, dtype=np.int64), group)
        j = np.tile(np.arange(group, dtype=np.int64), plan.leaves)
        spine = leaf_pod[leaf] * group + j if plan.tiers == 3 else j
        up, down = block.cables(leaf_ep[leaf], spine_ep[spine], (plan.up // group) * rate, kind, hop, hop)
        ls_up, ls_down = up.reshape(plan.leaves, group), down.reshape(plan.leaves, group)
    if plan.tiers == 3:
        cp = plan.cores_per_plane
        spine = np.repeat(np.arange(plan.spines, dtype=np.int64), cp)
        c = np.tile(np.arange(cp, dtype=np.int64), plan.spines)
        core = (spine % plan.group_spines) * cp + c
        up, down = block.cables(spine_ep[spine], core_ep[core], (plan.spine_up // cp) * rate, kind, hop, hop)
        sc_up, sc_down = up.reshape(plan.spines, cp), down.reshape(plan.spines, cp)

    nodes, nics = ctx.nodes, ctx.nics
    cables = [CableRun("node-leaf", nodes * nics, ctx.resolved.nic_link_bytes_per_s, ctx.spec.node_cable)]
    if plan.tiers >= 2:
        cables.append(CableRun("leaf-spine", plan.leaves * plan.up, rate, "optical"))
    if plan.tiers == 3:
        cables.append(CableRun("spine-core", plan.spines * plan.spine_up, rate, "optical"))
    bisection = (nodes // 2) * nics * ctx.resolved.nic_link_bytes_per_s / plan.oversubscription
    rails = np.full(plan.leaves + plan.spines + plan.cores, -1, dtype=np.int64)
    if plan.rail_optimized and plan.rails_per_leaf == 1:  # leaves shared by rails (or one switch) serve no one rail
        rails[: plan.leaves] = np.arange(plan.leaves) % plan.rails
        if plan.tiers == 3:  # a pod holds one rail's leaves, so its spines serve that rail only
            pod = np.arange(plan.spines) // plan.group_spines
            rails[plan.leaves : plan.leaves + plan.spines] = pod // plan.pods_per_rail
    style = "rail-optimized fat tree" if plan.rail_optimized else "fat tree"
    if plan.tiers == 1:
        style = "single switch" + (" (all rails)" if plan.rail_optimized else "")
    tiers = np.repeat(np.arange(3, dtype=np.int64), [plan.leaves, plan.spines, plan.cores])
    router = FatTreeRouter(ctx, plan, nic_leaf, leaf_pod, nic_up, nic_down, ls_up, ls_down, sc_up, sc_down)
    return Fabric(
        kind="fat-tree",
        description=f"{style}, {plan.tiers} tier{'s' if plan.tiers > 1 else ''}, {switch.id}"
                    + (f", {plan.rails_per_leaf} rails per leaf" if plan.tiers > 1 and plan.rails_per_leaf > 1 else "")
                    + (f", {plan.oversubscription:.3g}:1 at the leaf" if plan.oversubscription != 1 else ""),
        tiers=plan.tiers,
        oversubscription=plan.oversubscription,
        tier_names=TIER_NAMES,
        switch_tier=tiers,
        switch_rail=rails,
        rails=plan.rails if plan.rail_optimized else 0,
        links=block,
        cables=tuple(cables),
        bisection_bytes_per_s=float(bisection),
        router=router,
        notes=plan.notes,
    )
