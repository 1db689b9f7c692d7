"""Fat trees (folded Clos) of one catalog switch: rail-optimized or plain, 1, 2 or 3 tiers, leaf oversubscription.

Design rules (they reproduce NVIDIA's DGX SuperPOD tables; see tests/test_topology_reference.py):
- A leaf gives half its ports (radix // 2) to nodes and ``round(node ports / oversubscription)`` to uplinks, so
  k:1 keeps the node ports and divides the uplinks by k (the realized ratio is reported). A single-switch fabric
  (1 tier, plain only) uses every port for nodes.
- Rail-optimized: NIC i of a node goes to a leaf of rail ``i % rails``; a rail's NICs fill its leaves in node
  order, so a leaf group (one leaf per rail) is the SuperPOD scalable unit (32 DGX nodes on 64-port leaves).
  Plain: a node's NICs share a leaf (top-of-rack style), nodes fill leaves in order.
- Leaves are provisioned in full: every leaf gets all its uplinks even when only part of its node ports are used,
  as the SuperPOD RA prescribes for partial scalable units ("the fabric should be designed to support the full SU,
  including leaf switches and leaf-spine cables", DGX SuperPOD GB200 RA, Network Fabrics section).
- 2 tiers: each leaf spreads its uplinks evenly over every spine; spines = the smallest divisor of the leaf's
  uplink count that gives enough spine ports (1 SU: 4 spines; 3 SU: 16, as the H100 RA table). Needs leaves <=
  radix.
- 3 tiers: leaves form pods (a rail's leaves, in chunks of at most radix // 2, when rail-optimized; consecutive
  leaves otherwise). A pod's spines (the same evenly-dividing rule, against radix // 2 spine down ports) send as
  many uplinks as they have used down ports, spread evenly over one core plane: spine j of every pod connects to
  the cores of plane j. Needs pods <= radix.
Equal-cost paths: within a 2-tier fabric or a pod, one per spine; between pods, one per (spine index, core of its
plane). All paths use every tier only as needed (a flow between two NICs on one leaf stays on that leaf).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology.fabric import (
    CableRun,
    Fabric,
    FabricContext,
    LinkBlock,
    ceil_div,
    smallest_divisor_at_least,
)
from fabricsim.topology.routes import IntArray

TIER_NAMES = ("leaf", "spine", "core")


@dataclass(frozen=True)
class FatTreePlan:
    """Switch and port counts of a fat tree; computed before any array is built."""

    rail_optimized: bool
    rails: int
    tiers: int
    down: int
    """node-facing ports per leaf"""
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
    pods_per_rail: int

    @property
    def spines(self) -> int:
        return 0 if self.tiers == 1 else self.group_spines * (self.pods if self.tiers == 3 else 1)

    @property
    def cores(self) -> int:
        return self.group_spines * self.cores_per_plane if self.tiers == 3 else 0


class _Layout:
    """Where NICs land on leaves, for a given count of node ports per leaf."""

    def __init__(self, ctx: FabricContext, rail_optimized: bool, rails: int, down: int) -> None:
        self.ctx, self.rail_optimized, self.rails, self.down = ctx, rail_optimized, rails, down
        nics, nodes = ctx.nics, ctx.nodes
        if rail_optimized:
            self.per_rail = nics // rails
            self.groups = ceil_div(nodes * self.per_rail, down)
            self.leaves = self.groups * rails
        elif nics <= down:
            self.nodes_per_leaf = down // nics
            self.leaves = ceil_div(nodes, self.nodes_per_leaf)
        else:
            self.leaves_per_node = ceil_div(nics, down)
            self.leaves = nodes * self.leaves_per_node

    def nic_leaf(self) -> IntArray:
        """Leaf of every NIC (global NIC number node * nics + local)."""
        nics = self.ctx.nics
        k = np.arange(self.ctx.nodes * nics, dtype=np.int64)
        node, local = k // nics, k % nics
        if self.rail_optimized:
            position = node * self.per_rail + local // self.rails
            return (position // self.down) * self.rails + local % self.rails
        if nics <= self.down:
            return node // self.nodes_per_leaf
        return node * self.leaves_per_node + local // self.down

    def max_nodes(self, max_leaves: int) -> int:
        """Most nodes this layout fits into ``max_leaves`` leaves."""
        if self.rail_optimized:
            return (max_leaves // self.rails) * self.down // self.per_rail
        if self.ctx.nics <= self.down:
            return max_leaves * self.nodes_per_leaf
        return max_leaves // self.leaves_per_node


def _limit_error(ctx: FabricContext, tiers: int, max_nodes: int, hint: str) -> SpecError:
    s = ctx.resolved.switch
    gpus = max_nodes * ctx.node.gpus
    return SpecError(
        f"a {tiers}-tier fat tree of {s.id} (radix {s.radix}) holds at most {max_nodes} {ctx.node.system.id} nodes "
        f"({gpus} GPUs); asked for {ctx.nodes}{hint}", field="nodes")


def _pods(layout: _Layout, half: int) -> tuple[int, int, int]:
    """(pods, leaves per pod, pods per rail) of a 3-tier fabric; pods hold at most ``half`` leaves."""
    if layout.rail_optimized:
        per_rail = ceil_div(layout.groups, half)
        pod_leaves = ceil_div(layout.groups, per_rail)
        per_rail = ceil_div(layout.groups, pod_leaves)
        return layout.rails * per_rail, pod_leaves, per_rail
    pods = ceil_div(layout.leaves, half)
    pod_leaves = ceil_div(layout.leaves, pods)
    return ceil_div(layout.leaves, pod_leaves), pod_leaves, 0


def plan_fat_tree(ctx: FabricContext) -> FatTreePlan:
    """Tiers, leaves, spines and cores for the context's cluster, or a SpecError naming the limit that failed."""
    spec, radix, nics = ctx.spec, ctx.radix, ctx.nics
    rail = spec.rail_optimized
    rails = (ctx.node.system.rails or nics) if rail else 1
    switch = ctx.resolved.switch
    half = radix // 2
    if rail and spec.tiers == 1:
        raise SpecError("a rail-optimized fat tree needs at least 2 tiers (traffic between rails crosses a spine);"
                        " use rail_optimized=false for a single switch", field="tiers")
    if rail and rails > radix:
        raise SpecError(f"a rail-optimized fat tree needs one leaf per rail: {ctx.node.system.id} has {rails} rails,"
                        f" more than {switch.id}'s radix {radix}", field="link")
    if half < 1:
        raise SpecError(f"switch {switch.id} has radix {radix}: too small for a fat tree", field="link")
    tiers = spec.tiers
    if tiers is None and not rail and ctx.nodes * nics <= radix:
        tiers = 1
    if tiers == 1:
        if ctx.nodes * nics > radix:
            single = radix // nics
            raise _limit_error(ctx, 1, single, "; use tiers 2 or 3")
        return FatTreePlan(rail, rails, 1, radix, 0, 1, 0, 1, 1, 0, 0, 1.0, 0)
    up = max(1, round(half / spec.oversubscription))
    layout = _Layout(ctx, rail, rails, half)
    max2 = layout.max_nodes(radix)
    if tiers is None:
        tiers = 2 if layout.leaves <= radix else 3
    if tiers == 2:
        if layout.leaves > radix:
            raise _limit_error(ctx, 2, max2, "; use tiers 3")
        spines = smallest_divisor_at_least(up, ceil_div(layout.leaves * up, radix))
        return FatTreePlan(rail, rails, 2, half, up, layout.leaves, spines, 1, layout.leaves, 0, 0, half / up, 0)
    pods, pod_leaves, per_rail = _pods(layout, half)
    if pods > radix:
        max3 = layout.max_nodes(radix * half)
        raise _limit_error(ctx, 3, max3, "")
    pod_spines = smallest_divisor_at_least(up, ceil_div(pod_leaves * up, half))
    spine_up = pod_leaves * up // pod_spines
    cores_per_plane = smallest_divisor_at_least(spine_up, ceil_div(pods * spine_up, radix))
    return FatTreePlan(rail, rails, 3, half, up, layout.leaves, pod_spines, pods, pod_leaves, spine_up,
                       cores_per_plane, half / up, per_rail)


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
        return (leaf % plan.rails) * plan.pods_per_rail + (leaf // plan.rails) // plan.pod_leaves
    return leaf // plan.pod_leaves


def build_fat_tree(ctx: FabricContext) -> Fabric:
    """Build a fat tree's switches, links and router from the context (see the module docstring for the rules)."""
    plan = plan_fat_tree(ctx)
    switch, rate = ctx.resolved.switch, ctx.port_bytes_per_s
    kind, hop = ctx.resolved.link_kind, switch.latency_s
    nic_lat = ctx.resolved.link.latency_s
    layout = _Layout(ctx, plan.rail_optimized, plan.rails, plan.down) if plan.tiers > 1 else None
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
    if plan.rail_optimized:
        rails[: plan.leaves] = np.arange(plan.leaves) % plan.rails
        if plan.tiers == 3:  # a pod holds one rail's leaves, so its spines serve that rail only
            pod = np.arange(plan.spines) // plan.group_spines
            rails[plan.leaves : plan.leaves + plan.spines] = pod // plan.pods_per_rail
    style = "rail-optimized fat tree" if plan.rail_optimized else "fat tree"
    if plan.tiers == 1:
        style = "single switch"
    tiers = np.repeat(np.arange(3, dtype=np.int64), [plan.leaves, plan.spines, plan.cores])
    router = FatTreeRouter(ctx, plan, nic_leaf, leaf_pod, nic_up, nic_down, ls_up, ls_down, sc_up, sc_down)
    return Fabric(
        kind="fat-tree",
        description=f"{style}, {plan.tiers} tier{'s' if plan.tiers > 1 else ''}, {switch.id}"
                    + (f", {plan.oversubscription:g}:1 at the leaf" if plan.oversubscription != 1 else ""),
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
    )
