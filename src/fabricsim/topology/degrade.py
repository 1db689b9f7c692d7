"""Parts running below their rating (`--degrade`): a straggling GPU, a thermally throttled node, a link trained down
to a lower rate or failed.

    gpu=0.8@3          GPU 3 (of the job, or of the cluster for `traffic`) computes at 0.8 of its clock
    node=0.7@5         every GPU of node 5 at 0.7 (a throttled node)
    link=0.5@node2     node 2's NIC links (both directions) at half rate; link=0.5@node2/nic1 one of its NICs
    link=0@leaf2-spine0  the links between leaf 2 and spine 0 failed: traffic reroutes over the other paths

Switch names are those `traffic` prints for its hottest links (tier name and index within the tier: leaf 2,
spine 0, core 1). A synchronous job runs at the pace of its slowest rank, so the slowest GPU factor paces every
step's compute; a slower link paces the rings and trees that cross it (the flow simulator routes them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology.kinds import ENDPOINT_KINDS
from fabricsim.topology.routes import IntArray
from fabricsim.topology.topology import Topology

KINDS = ("gpu", "node", "link")
_ITEM = re.compile(r"^(?P<kind>[a-z]+)=(?P<factor>[0-9.eE+-]+)@(?P<where>\S+)$")
_SWITCH = re.compile(r"^(?P<tier>[a-z]+)(?P<index>\d+)$")
_NODE = re.compile(r"^node(?P<node>\d+)(?:/nic(?P<nic>\d+))?$")


@dataclass(frozen=True)
class Degradation:
    """What runs below its rating: GPUs and nodes by compute-clock fraction, links by rate fraction (0: failed)."""

    gpus: tuple[tuple[int, float], ...] = ()
    nodes: tuple[tuple[int, float], ...] = ()
    links: tuple[tuple[str, float], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.gpus or self.nodes or self.links)

    @property
    def compute_fraction(self) -> float:
        """The slowest GPU's clock fraction: what paces a synchronous step's compute (1 when none is slow)."""
        return min([f for _, f in self.gpus] + [f for _, f in self.nodes] + [1.0])

    def describe(self) -> list[str]:
        """One phrase per degraded part, as the user wrote it."""
        return ([f"gpu {g} at {f:g}" for g, f in self.gpus] + [f"node {n} at {f:g}" for n, f in self.nodes]
                + [f"link {where} {'failed' if f == 0 else f'at {f:g}'}" for where, f in self.links])

    @property
    def switch_links(self) -> list[str]:
        """The degraded links between switches (only the flow simulator routes around or through them)."""
        return [where for where, _ in self.links if _NODE.match(where) is None]

    def check_use(self, *, flow: bool, compute: bool, field: str = "--degrade") -> None:
        """Refuse what a command cannot apply: a slow GPU or node where nothing computes (`compute` False: a
        collective, traffic), a link between switches where nothing routes (`flow` False: the analytical model)."""
        if not compute and (self.gpus or self.nodes):
            raise SpecError("this command moves bytes only: a slow GPU or node (gpu=, node=) acts on train; degrade "
                            "links here", field=field)
        between = self.switch_links
        if between and not flow:
            raise SpecError(f"link {between[0]} is between switches: only the flow simulator routes over it; add "
                            "--sim flow (or degrade a node's NIC link, link=F@nodeN)", field=field)

    def check_parts(self, gpus: int, nodes: int, field: str = "--degrade") -> None:
        """Refuse a GPU, node or node's link outside the job (or cluster) it applies to."""
        for g, _ in self.gpus:
            if not 0 <= g < gpus:
                raise SpecError(f"gpu {g} is not one of the {gpus} GPUs (0..{gpus - 1})", field=field)
        linked = [int(m["node"]) for m in (_NODE.match(where) for where, _ in self.links) if m is not None]
        for n in [n for n, _ in self.nodes] + linked:
            if not 0 <= n < nodes:
                raise SpecError(f"node {n} is not one of the {nodes} nodes (0..{nodes - 1})", field=field)


def parse_degrade(items: Sequence[str] | None, field: str = "--degrade") -> Degradation:
    """`--degrade` values (repeatable) as a Degradation; a malformed item is a SpecError naming the form."""
    gpus: list[tuple[int, float]] = []
    nodes: list[tuple[int, float]] = []
    links: list[tuple[str, float]] = []
    for raw in items or ():
        text = raw.strip().lower()
        m = _ITEM.match(text)
        if m is None or m["kind"] not in KINDS:
            raise SpecError(f"{raw!r}: write gpu=F@RANK, node=F@NODE, link=F@nodeN[/nicK] or link=F@leafA-spineB "
                            "(F: the fraction of its rating it runs at)", field=field)
        try:
            factor = float(m["factor"])
        except ValueError:
            factor = float("nan")
        floor = 0.0 if m["kind"] == "link" else 1e-3
        if not floor <= factor <= 1.0 or (factor == 0.0 and m["kind"] != "link"):
            what = "0 (failed) to 1" if m["kind"] == "link" else "above 0 and at most 1"
            raise SpecError(f"{raw!r}: the fraction must be {what}", field=field)
        where = m["where"]
        if m["kind"] == "link":
            if _NODE.match(where) is None and not _is_switch_pair(where):
                raise SpecError(f"{raw!r}: a link is nodeN, nodeN/nicK or two switches, e.g. leaf2-spine0",
                                field=field)
            if factor == 0 and _NODE.match(where) is not None:
                raise SpecError(f"{raw!r}: a failed NIC link takes its GPUs off the fabric (each GPU sends through "
                                "its own NIC here); give a slower one (link=0.5@...) or leave the node out",
                                field=field)
            links.append((where, factor))
            continue
        if not where.isdigit():
            raise SpecError(f"{raw!r}: {m['kind']} takes a number after @, e.g. {m['kind']}={factor:g}@3",
                            field=field)
        (gpus if m["kind"] == "gpu" else nodes).append((int(where), factor))
    return Degradation(tuple(gpus), tuple(nodes), tuple(links))


def _is_switch_pair(where: str) -> bool:
    parts = where.split("-")
    return len(parts) == 2 and all(_SWITCH.match(p) is not None for p in parts)


def _switch(topology: Topology, name: str, field: str) -> int:
    """The endpoint of a fabric switch named like leaf2 (tier name, index within the tier)."""
    m = _SWITCH.match(name)
    tiers = topology.fabric.tier_names
    if m is None or m["tier"] not in tiers:
        raise SpecError(f"no switch {name!r}: this fabric's tiers are {', '.join(tiers)}", field=field)
    members = np.flatnonzero(topology.endpoint_tier == tiers.index(m["tier"]))
    index = int(m["index"])
    if index >= len(members):
        raise SpecError(f"no switch {name!r}: the {m['tier']} tier has {len(members)} (0..{len(members) - 1})",
                        field=field)
    return int(members[index])


def selected_links(topology: Topology, where: str, field: str = "--degrade") -> IntArray:
    """Link ids (both directions) a link selector names: a node's NIC links, one NIC's, or a switch pair's."""
    src, dst = topology.link_src, topology.link_dst
    m = _NODE.match(where)
    if m is not None:
        node = int(m["node"])
        if not 0 <= node < topology.num_nodes:
            raise SpecError(f"node {node} is not one of the {topology.num_nodes} nodes", field=field)
        nic = ENDPOINT_KINDS.index("nic")
        nics = np.flatnonzero((topology.endpoint_node == node) & (topology.endpoint_kind == nic))
        if m["nic"] is not None:
            k = int(m["nic"])
            if k >= len(nics):
                raise SpecError(f"node {node} has {len(nics)} NICs (nic0..nic{len(nics) - 1})", field=field)
            nics = nics[k:k + 1]
        fabric_side = topology.endpoint_node < 0
        mine = (np.isin(src, nics) & fabric_side[dst]) | (np.isin(dst, nics) & fabric_side[src])
        out: IntArray = np.flatnonzero(mine)
    else:
        a, b = (_switch(topology, name, field) for name in where.split("-"))
        out = np.flatnonzero(((src == a) & (dst == b)) | ((src == b) & (dst == a)))
    if len(out) == 0:
        raise SpecError(f"no link {where!r} in this fabric", field=field)
    return out


def degraded(topology: Topology, degradation: Degradation, field: str = "--degrade") -> Topology:
    """The topology with its named links at their fractions of their rate (0: failed, which the flow simulator's
    routing avoids); the topology itself when no link is degraded."""
    if not degradation.links:
        return topology
    capacity = topology.link_capacity.copy()
    for where, factor in degradation.links:
        ids = selected_links(topology, where, field)
        capacity[ids] = topology.link_capacity[ids] * factor
    return replace(topology, link_capacity=capacity)


def job_nic_fraction(degradation: Degradation, nodes: int) -> float:
    """The slowest NIC link among a job's first `nodes` nodes as a fraction of its rate (1 when none is slower):
    what paces the analytical model's rings and trees between nodes (NCCL splits a collective evenly over its
    channels, one per NIC, so the slowest channel finishes last)."""
    worst = 1.0
    for where, factor in degradation.links:
        m = _NODE.match(where)
        if m is not None and int(m["node"]) < nodes:
            worst = min(worst, factor)
    return worst
