"""Build a `Topology` from a `ClusterSpec`: resolve catalog names, repeat the node, add the fabric."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fabricsim.caching import BoundedMemo, ByIdentity
from fabricsim.catalog import Catalog, default_catalog
from fabricsim.errors import SpecError
from fabricsim.topology.dragonfly import build_dragonfly
from fabricsim.topology.fabric import Fabric, FabricContext
from fabricsim.topology.fattree import build_fat_tree, plan_fat_tree
from fabricsim.topology.kinds import SWITCH
from fabricsim.topology.mesh import build_mesh
from fabricsim.topology.multiplane import build_multi_plane
from fabricsim.topology.nodes import NodeTemplate, build_node
from fabricsim.topology.railonly import build_rail_only
from fabricsim.topology.resolve import resolve
from fabricsim.topology.slimfly import build_slim_fly
from fabricsim.topology.spec import ClusterSpec
from fabricsim.topology.topology import Topology
from fabricsim.topology.torus import build_torus

FABRIC_BUILDERS: dict[str, Callable[[FabricContext], Fabric]] = {
    "fat-tree": build_fat_tree,
    "rail-only": build_rail_only,
    "dragonfly": build_dragonfly,
    "slim-fly": build_slim_fly,
    "torus": build_torus,
    "mesh": build_mesh,
}


def _repeat(values: np.ndarray, times: int) -> np.ndarray:
    return np.tile(values, times)


def build_topology(spec: ClusterSpec, catalog: Catalog | None = None) -> Topology:
    """Build the cluster a spec describes; SpecErrors name the field and the limit when it cannot be built."""
    catalog = catalog or default_catalog()
    resolved = resolve(spec, catalog)
    node = build_node(resolved.system, catalog)
    ctx = FabricContext(spec=spec, node=node, nodes=spec.nodes, resolved=resolved, catalog=catalog)
    if spec.planes > 1 and spec.fabric != "fat-tree":
        raise SpecError(f"planes apply to fat trees (got fabric {spec.fabric!r})", field="planes")
    fabric = build_multi_plane(ctx) if spec.planes > 1 else FABRIC_BUILDERS[spec.fabric](ctx)
    return _assemble(spec, catalog, node, fabric, ctx)


def _assemble(spec: ClusterSpec, catalog: Catalog, node: NodeTemplate, fabric: Fabric,
              ctx: FabricContext) -> Topology:
    n, e, links = spec.nodes, node.num_endpoints, node.num_links
    ep_base = np.repeat(np.arange(n, dtype=np.int64) * e, links)
    f_src, f_dst, f_cap, f_lat, f_kind = fabric.links.arrays()
    switches = fabric.num_switches
    endpoint_kind = np.concatenate([_repeat(node.endpoint_kind, n), np.full(switches, SWITCH, dtype=np.int8)])
    endpoint_node = np.concatenate([np.repeat(np.arange(n, dtype=np.int64), e), np.full(switches, -1, np.int64)])
    endpoint_tier = np.concatenate([np.full(n * e, -1, dtype=np.int64), fabric.switch_tier])
    endpoint_rail = np.concatenate([np.full(n * e, -1, dtype=np.int64), fabric.switch_rail])
    if fabric.rails:
        nic_local = np.arange(node.nics, dtype=np.int64)
        nic_ep = (np.arange(n, dtype=np.int64)[:, None] * e + node.gpus + nic_local).ravel()
        endpoint_rail[nic_ep] = np.tile(nic_local % fabric.rails, n)
    return Topology(
        spec=spec,
        catalog=catalog,
        node=node,
        fabric=fabric,
        fabric_switch=ctx.resolved.switch,
        nic=ctx.resolved.nic,
        endpoint_kind=endpoint_kind,
        endpoint_node=endpoint_node,
        endpoint_tier=endpoint_tier,
        endpoint_rail=endpoint_rail,
        link_src=np.concatenate([_repeat(node.link_src, n) + ep_base, f_src]),
        link_dst=np.concatenate([_repeat(node.link_dst, n) + ep_base, f_dst]),
        link_capacity=np.concatenate([_repeat(node.link_capacity, n), f_cap]),
        link_latency=np.concatenate([_repeat(node.link_latency, n), f_lat]),
        link_kind=np.concatenate([_repeat(node.link_kind, n), f_kind]),
    )


def build_cluster(
    system: str = "dgx-h100",
    nodes: int = 1,
    fabric: str = "fat-tree",
    link: str | None = None,
    tiers: int | None = None,
    rail_optimized: bool = True,
    oversubscription: float = 1.0,
    *,
    node_cable: str = "optical",
    torus_dims: tuple[int, int, int] | None = None,
    nodes_per_switch: int = 1,
    nic: str | None = None,
    planes: int = 1,
    dragonfly_routing: str = "minimal",
    catalog: Catalog | None = None,
) -> Topology:
    """Build a cluster from keyword arguments (the fields of `ClusterSpec`); see `build_topology`.

    ``link`` is a fabric link technology id (``ib-ndr`` -> QM9700, ``ib-hdr`` -> QM8700, ``ib-xdr`` -> Q3400,
    ``eth-400g`` -> SN5400, ``eth-800g`` -> SN5600) or a switch id; None: the system's own NIC generation.
    """
    spec = ClusterSpec.parse({
        "system": system, "nodes": nodes, "fabric": fabric, "link": link, "tiers": tiers,
        "rail_optimized": rail_optimized, "oversubscription": oversubscription, "node_cable": node_cable,
        "torus_dims": torus_dims, "nodes_per_switch": nodes_per_switch, "nic": nic, "planes": planes,
        "dragonfly_routing": dragonfly_routing,
    })
    return build_topology(spec, catalog)


def check_buildable(system: str, nodes: int, link: str | None, oversubscription: float, catalog: Catalog, *,
                    field: str) -> None:
    """Refuse, as `topo` does, a fat tree of ``nodes`` nodes that no catalog switch can build (planned only, nothing
    is built); the error names ``field``, the option the user gave. The verdict is kept per design and catalog:
    an API sweep asks it of the same cluster for every plan."""
    if nodes <= 1:
        return
    why = _BUILDABLE.get((system, nodes, link, oversubscription, ByIdentity(catalog)),
                         lambda: _why_unbuildable(system, nodes, link, oversubscription, catalog))
    if why is not None:
        raise SpecError(why, field=field)


_BUILDABLE: BoundedMemo[str | None] = BoundedMemo(4096)
"""check_buildable's verdicts: None (it builds) or the reason, by (system, nodes, link, oversubscription, catalog)"""


def _why_unbuildable(system: str, nodes: int, link: str | None, oversubscription: float,
                     catalog: Catalog) -> str | None:
    """Why no catalog switch builds the fat tree (its option's name taken off the message), or None."""
    try:
        spec = ClusterSpec.parse({"system": system, "nodes": nodes, "fabric": "fat-tree", "link": link,
                                  "oversubscription": oversubscription})
        resolved = resolve(spec, catalog)
        node = build_node(resolved.system, catalog)
        plan_fat_tree(FabricContext(spec=spec, node=node, nodes=nodes, resolved=resolved, catalog=catalog))
    except SpecError as exc:
        text = str(exc)
        if exc.field and text.startswith(f"{exc.field}: "):
            text = text.removeprefix(f"{exc.field}: ")
        return text
    return None
