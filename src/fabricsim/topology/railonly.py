"""Rail-only networks (Wang et al., "How to Build Low-cost Networks for Large Language Models (without Sacrificing
Performance)", arXiv:2307.12169, 2023): one network per rail and nothing between rails. NIC i of every node is on
rail ``i % rails``; a rail whose NICs fit on one switch is that switch, a larger one is a non-blocking 2-tier Clos
of its own (leaves with half their ports down, each leaf sending ``b`` cables to every spine of its rail); whole
rails that fit on one switch together share it (``shared`` rails a switch, as the fat tree's leaves do), and
spines that use part of a switch share it with other rails' spines (``per_switch``; routes stay on the rail). There is
no spine or core joining rails: a flow between GPUs on different rails leaves its node by the NIC on the
destination's rail, reached over NVLink to the GPU beside it (PXN; the node's GPU-to-NIC routes), so cross-rail
traffic costs NVLink bandwidth and an extra hop inside the source node, not fabric.

Bisection (one direction): floor(N/2) x NICs per node x NIC link rate / oversubscription, the same cut as the
rail-optimized fat tree, reached by rail-aligned traffic; traffic between rails also crosses NVLink.
"""

from __future__ import annotations

import math

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology.fabric import CableRun, Fabric, FabricContext, LinkBlock
from fabricsim.topology.routes import IntArray

TIER_NAMES = ("leaf", "spine")


def _spines(up: int, leaves: int, radix: int, rails: int) -> tuple[int, int, int]:
    """(spines per rail, cables from each leaf to each spine, spines per switch): bundles of equal size (ECMP
    spreads flows evenly over a rail's spines), and the fewest spine switches for all ``rails`` (then the fewest
    cables). A rail's spine that uses a part of a switch's ports shares the switch with spines of other rails, as
    whole rails share a leaf that holds them: 72 DGX H100 nodes on radix-64 switches make rails of 3 leaves of 24
    NICs, which need 2 spines of 36 ports each (16 switches for 8 rails) or 6 of 12 ports, 5 to a switch (10);
    routes stay on their rail's links, so nothing joins rails."""
    best: tuple[tuple[int, int, int], int, int, int] | None = None
    for spines in range(max(1, math.ceil(up * leaves / radix)), up + 1):
        bundle = math.ceil(up / spines)
        per_switch = radix // (leaves * bundle)
        if per_switch < 1:
            continue
        per_switch = min(per_switch, rails * spines)
        key = (math.ceil(rails * spines / per_switch), spines * bundle, spines)  # switches, then cables
        if best is None or key < best[0]:
            best = (key, spines, bundle, per_switch)
    if best is None:
        raise SpecError(f"a rail of {leaves} leaves needs more than 2 tiers of radix-{radix} switches",
                        field="nodes")
    return best[1], best[2], best[3]


class RailOnlyRouter:
    """Routes inter-node flows on the destination GPU's rail: out of the source node by its NIC on that rail
    (PXN when it is not the source GPU's own), up to a spine of the rail when the two NICs sit on different
    leaves (ECMP over the rail's spines), down to the destination GPU's own NIC."""

    def __init__(self, ctx: FabricContext, rails: int, spines: int, nic_leaf: IntArray, nic_up: IntArray,
                 nic_down: IntArray, leaf_spine_up: IntArray, leaf_spine_down: IntArray) -> None:
        self.ctx, self.rails, self.spines = ctx, rails, spines
        self.nic_leaf, self.nic_up, self.nic_down = nic_leaf, nic_up, nic_down
        self.leaf_spine_up, self.leaf_spine_down = leaf_spine_up, leaf_spine_down

    def _nics(self, src_gpu: IntArray, dst_gpu: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """(source local NIC, its global number, destination local NIC, its global number)."""
        nics = self.ctx.nics
        own_src, _ = self.ctx.own_nic(src_gpu)
        dst_local, kd = self.ctx.own_nic(dst_gpu)
        src_local = own_src - own_src % self.rails + dst_local % self.rails  # same tray, destination rail
        return src_local, (src_gpu // self.ctx.node.gpus) * nics + src_local, dst_local, kd

    def counts(self, src_gpu: IntArray, dst_gpu: IntArray) -> IntArray:
        _, ks, _, kd = self._nics(src_gpu, dst_gpu)
        return np.where(self.nic_leaf[ks] == self.nic_leaf[kd], 1, self.spines).astype(np.int64)

    def route(self, src_gpu: IntArray, dst_gpu: IntArray, choice: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        src_local, ks, dst_local, kd = self._nics(src_gpu, dst_gpu)
        ls, ld = self.nic_leaf[ks], self.nic_leaf[kd]
        out = np.full((len(ks), 4), -1, dtype=np.int64)
        out[:, 0] = self.nic_up[ks]
        same = ls == ld
        out[same, 1] = self.nic_down[kd[same]]
        far = ~same
        if far.any():
            j = choice[far] % self.spines
            out[far, 1] = self.leaf_spine_up[ls[far], j]
            out[far, 2] = self.leaf_spine_down[ld[far], j]
            out[far, 3] = self.nic_down[kd[far]]
        return src_local, dst_local, out[:, : 4 if far.any() else 2]


def build_rail_only(ctx: FabricContext) -> Fabric:
    """One network per rail (see the module docstring); a SpecError names the limit when a rail needs 3 tiers."""
    spec, switch = ctx.spec, ctx.resolved.switch
    if not spec.rail_optimized:
        raise SpecError("a rail-only network is rail-optimized by definition (leave out --no-rail-optimized)",
                        field="rail_optimized")
    system = ctx.node.system
    rails = system.rails or ctx.nics
    per_node = ctx.nics // rails  # NICs of one rail in a node
    ends = ctx.nodes * per_node  # NICs on one rail
    radix, half = switch.radix, switch.radix // 2
    if spec.tiers is not None and spec.tiers not in (1, 2):
        raise SpecError(f"a rail-only network has 1 or 2 tiers per rail (got {spec.tiers})", field="tiers")
    one = ends <= radix and spec.tiers != 2
    if spec.tiers == 1 and not one:
        raise SpecError(f"one switch per rail holds {radix} NICs; a rail here has {ends}", field="tiers")
    if not one and ends > radix * half:
        raise SpecError(f"a rail-only network of radix-{radix} switches holds at most {radix * half // per_node} "
                        f"nodes of {system.id} (2 tiers per rail); asked for {ctx.nodes}", field="nodes")
    shared = max(d for d in range(1, rails + 1) if rails % d == 0 and d * ends <= radix) if one else 1
    leaves = 1 if one else math.ceil(ends / half)
    down_used = math.ceil(ends / leaves)
    up = 0 if one else math.ceil(down_used / spec.oversubscription)
    spines, bundle, per_switch = (0, 0, 1) if one else _spines(up, leaves, radix, rails)
    ratio = 1.0 if one else max(1.0, down_used / (spines * bundle))

    k = np.arange(ctx.nodes * ctx.nics, dtype=np.int64)  # global NIC number: node * nics + local
    local = k % ctx.nics
    rail = local % rails
    index = (k // ctx.nics) * per_node + local // rails  # position of the NIC on its rail
    base, extra = divmod(ends, leaves)
    cut = extra * (base + 1)
    group = np.where(index < cut, index // (base + 1), extra + (index - cut) // max(base, 1))
    nic_leaf = (rail // shared) * leaves + group

    kind, hop, rate = ctx.resolved.link_kind, switch.latency_s, ctx.port_bytes_per_s
    first = ctx.endpoint_offset
    n_leaves, n_spines = rails // shared * leaves, math.ceil(rails * spines / per_switch)
    leaf_ep = first + np.arange(n_leaves, dtype=np.int64)
    spine_ep = first + n_leaves + np.arange(n_spines, dtype=np.int64)
    block = LinkBlock(ctx.link_offset)
    nic_up, nic_down = block.cables(ctx.nic_endpoints(), leaf_ep[nic_leaf], ctx.resolved.nic_link_bytes_per_s,
                                    kind, ctx.resolved.link.latency_s, hop)
    ls_up = ls_down = np.zeros((n_leaves, 0), dtype=np.int64)
    cables = [CableRun("node-leaf", ctx.nodes * ctx.nics, ctx.resolved.nic_link_bytes_per_s, spec.node_cable)]
    if spines:
        leaf = np.repeat(np.arange(n_leaves, dtype=np.int64), spines)
        j = np.tile(np.arange(spines, dtype=np.int64), n_leaves)
        spine = ((leaf // leaves) * spines + j) // per_switch  # the switch of a spine of the leaf's own rail
        a, b = block.cables(leaf_ep[leaf], spine_ep[spine], bundle * rate, kind, hop, hop)
        ls_up, ls_down = a.reshape(n_leaves, spines), b.reshape(n_leaves, spines)
        cables.append(CableRun("leaf-spine", n_leaves * spines * bundle, rate, "optical"))
    tiers = 1 if one else 2
    switch_rail = np.concatenate([np.repeat(np.arange(rails, dtype=np.int64), leaves) if shared == 1 else
                                  np.full(n_leaves, -1, dtype=np.int64),
                                  np.repeat(np.arange(rails, dtype=np.int64), spines) if per_switch == 1 else
                                  np.full(n_spines, -1, dtype=np.int64)])
    notes: tuple[str, ...] = ("rail-only: no switch joins rails; traffic between rails crosses NVLink to the GPU "
                              "beside the destination rail's NIC (PXN)",)
    if spec.oversubscription != 1.0 and one:
        notes += ("oversubscription ignored: each rail is one switch",)
    return Fabric(
        kind="rail-only",
        description=(f"rail-only, {rails} rails on {n_leaves} switch{'es' if n_leaves > 1 else ''} "
                     f"({shared} rails each)" if shared > 1 else
                     f"rail-only, {rails} rails of {'one switch' if one else f'{leaves} leaves + {spines} spines'}"
                     " each" + (f" ({per_switch} spines of rails to a switch, {n_spines} in all)" if per_switch > 1
                                else "")) + f", {switch.id}" + (f", {ratio:.3g}:1 at the leaf" if ratio != 1 else ""),
        tiers=tiers,
        oversubscription=ratio,
        tier_names=TIER_NAMES,
        switch_tier=np.repeat(np.arange(2, dtype=np.int64), [n_leaves, n_spines]),
        switch_rail=switch_rail,
        rails=rails,
        links=block,
        cables=tuple(cables),
        bisection_bytes_per_s=float((ctx.nodes // 2) * ctx.nics * ctx.resolved.nic_link_bytes_per_s / ratio),
        router=RailOnlyRouter(ctx, rails, max(spines, 1), nic_leaf, nic_up, nic_down, ls_up, ls_down),
        notes=notes,
    )
