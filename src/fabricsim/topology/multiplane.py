"""Multi-plane fat trees (DeepSeek-V3's multi-plane network, arXiv:2505.09343 sec. 5; ConnectX-8 dual-plane): each
NIC's bandwidth is split over ``planes`` ports, port p of every NIC on plane p, and every plane is a fat tree of its
own built by the fat-tree rules (`topology.fattree`) at 1/planes of the NIC rate. A plane's switches run their ports
split to that rate (an 800G port as 2 x 400G: twice the radix), which is what lets a plane stay at 2 tiers where one
fabric of full-rate ports needs 3. A path stays in one plane (nothing joins the planes): `Topology.route` hashes a
flow onto one plane and one of its paths (ECMP over planes x paths), and the flow simulator stripes every flow
between nodes over all the planes, its hashed path in each (`fabricsim.network.flowroute`), as NCCL spreads a
NIC's channels over its ports: a flow can reach the NIC's full rate, the sum of its plane ports.

Bisection: the planes' sum. A plane failure takes 1/planes of every NIC's bandwidth and of the bisection.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology.fabric import CableRun, Fabric, FabricContext, FabricRouter, LinkBlock
from fabricsim.topology.fattree import build_fat_tree
from fabricsim.topology.routes import IntArray

SPLITS = (1, 2, 4, 8)
"""ways a switch port can be split (its lanes: an 800G port of 4 x 200G lanes as 2 x 400G or 4 x 200G)"""


@dataclass(frozen=True)
class _PlaneContext(FabricContext):
    """One plane's build context: its switches and links numbered after the planes before it."""

    switch_base: int = 0
    link_base: int = 0

    @property
    def endpoint_offset(self) -> int:
        return self.switch_base

    @property
    def link_offset(self) -> int:
        return self.link_base


class MultiPlaneRouter:
    """ECMP over planes x each plane's paths: choice c takes plane c % planes and that plane's path c // planes."""

    def __init__(self, routers: list[FabricRouter]) -> None:
        self.routers = routers

    def counts(self, src_gpu: IntArray, dst_gpu: IntArray) -> IntArray:
        counts: IntArray = len(self.routers) * self.routers[0].counts(src_gpu, dst_gpu)
        return counts

    def route(self, src_gpu: IntArray, dst_gpu: IntArray, choice: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        planes = len(self.routers)
        plane, sub = choice % planes, choice // planes
        src_nic = np.zeros(len(src_gpu), dtype=np.int64)
        dst_nic = np.zeros(len(src_gpu), dtype=np.int64)
        parts: list[tuple[IntArray, IntArray]] = []
        for p, router in enumerate(self.routers):
            mine = np.flatnonzero(plane == p)
            if len(mine):
                s, d, links = router.route(src_gpu[mine], dst_gpu[mine], sub[mine])
                src_nic[mine], dst_nic[mine] = s, d
                parts.append((mine, links))
        width = max((links.shape[1] for _, links in parts), default=1)
        out = np.full((len(src_gpu), width), -1, dtype=np.int64)
        for mine, links in parts:
            out[mine, : links.shape[1]] = links
        return src_nic, dst_nic, out


def build_multi_plane(ctx: FabricContext) -> Fabric:
    """``ctx.spec.planes`` fat trees at 1/planes of the NIC rate each (see the module docstring)."""
    planes, res = ctx.spec.planes, ctx.resolved
    rate = res.nic_link_bytes_per_s / planes
    split = res.switch.port_bytes_per_s / rate
    if abs(split - round(split)) > 1e-9 or round(split) not in SPLITS:
        raise SpecError(f"{res.switch.id}'s {res.switch.port_bytes_per_s * 8 / 1e9:g} Gb/s ports do not split "
                        f"into {planes} planes of {rate * 8 / 1e9:g} Gb/s (a port splits its lanes "
                        f"{', '.join(map(str, SPLITS[1:]))} ways)", field="planes")
    k = round(split)
    plane_switch = res.switch.model_copy(update={"radix": res.switch.radix * k, "port_bytes_per_s": rate})
    plane_res = dataclasses.replace(res, switch=plane_switch, nic_link_bytes_per_s=rate)
    block = LinkBlock(ctx.link_offset)
    built: list[Fabric] = []
    switch_base = ctx.endpoint_offset
    for _ in range(planes):
        pctx = _PlaneContext(spec=ctx.spec, node=ctx.node, nodes=ctx.nodes, resolved=plane_res, catalog=ctx.catalog,
                             switch_base=switch_base, link_base=ctx.link_offset + block.count)
        plane = build_fat_tree(pctx)
        block.extend(plane.links)
        switch_base += plane.num_switches
        built.append(plane)
    one = built[0]
    cables = tuple(CableRun(c.segment, c.count * planes, c.bytes_per_s, c.medium) for c in one.cables)
    notes = (f"{planes} planes, each a fat tree at {rate * 8 / 1e9:g} Gb/s per NIC port ({res.switch.id} ports "
             f"split {k} ways: radix {plane_switch.radix}); a plane failure leaves {planes - 1}/{planes} of every "
             "NIC's bandwidth and of the bisection", *one.notes)
    return Fabric(
        kind="fat-tree",
        description=f"{planes} planes x {one.description.replace(res.switch.id, f'{res.switch.id} (split {k}x)')}",
        tiers=one.tiers,
        oversubscription=one.oversubscription,
        tier_names=one.tier_names,
        switch_tier=np.concatenate([f.switch_tier for f in built]),
        switch_rail=np.concatenate([f.switch_rail for f in built]),
        rails=one.rails,
        links=block,
        cables=cables,
        bisection_bytes_per_s=float(sum(f.bisection_bytes_per_s for f in built)),
        router=MultiPlaneRouter([f.router for f in built]),
        notes=notes,
    )
