"""Cluster topologies: node builders (HGX NVSwitch, NVL72, multi-rack NVLink, PCIe-only), fabrics (rail-optimized
and plain fat trees of 1-3 tiers with leaf oversubscription, multi-plane, rail-only, dragonfly+, Slim Fly, 3D torus,
full mesh), ECMP routing over numpy link arrays, and the bill of materials.

    from fabricsim.topology import build_cluster
    topo = build_cluster("dgx-h100", nodes=128, fabric="fat-tree", link="ib-ndr")
    topo.path(0, 1000)            # link ids of one flow
    topo.route(src, dst, flows)   # many flows at once (CSR)
    topo.bom()                    # switches, cables, cost, power, bisection
"""

from fabricsim.catalog import DEFAULT_STORAGE_TIER
from fabricsim.lazy import callable_package
from fabricsim.topology.bom import BillOfMaterials, bom
from fabricsim.topology.build import build_cluster, build_topology, check_buildable
from fabricsim.topology.degrade import (
    Degradation,
    degraded,
    job_nic_fraction,
    parse_degrade,
    selected_links,
)
from fabricsim.topology.dragonfly import group_nodes as dragonfly_group_nodes
from fabricsim.topology.fabric import CableRun, Fabric
from fabricsim.topology.facility import Facility, facility, hall_for, racks_per_node, why_not_hosted
from fabricsim.topology.fattree import FatTreePlan, plan_fat_tree
from fabricsim.topology.kinds import ENDPOINT_KINDS, LINK_KINDS, endpoint_kind_name, link_kind_code, link_kind_name
from fabricsim.topology.lineitems import LineItem, cable_class
from fabricsim.topology.nodes import NodeTemplate, build_node, hgx_node, nvl72_rack, pcie_node
from fabricsim.topology.resolve import resolve_nic, resolve_switch
from fabricsim.topology.routes import Routes, flow_hash
from fabricsim.topology.sketch import sketch, sketch_figure
from fabricsim.topology.spec import FABRICS, ClusterSpec
from fabricsim.topology.storage import (
    StorageBill,
    check_reachable,
    converges_without_ports,
    no_storage_ports_note,
    storage_bill,
    tier_targets,
)
from fabricsim.topology.storage_spec import (
    DEFAULT_STORAGE_SERVER,
    STORAGE_NETWORKS,
    StorageNetworkSpec,
)
from fabricsim.topology.topology import Topology

__all__ = [
    "DEFAULT_STORAGE_SERVER",
    "DEFAULT_STORAGE_TIER",
    "ENDPOINT_KINDS",
    "FABRICS",
    "LINK_KINDS",
    "STORAGE_NETWORKS",
    "BillOfMaterials",
    "CableRun",
    "ClusterSpec",
    "Degradation",
    "Fabric",
    "Facility",
    "FatTreePlan",
    "LineItem",
    "NodeTemplate",
    "Routes",
    "StorageBill",
    "StorageNetworkSpec",
    "Topology",
    "bom",
    "build_cluster",
    "build_node",
    "build_topology",
    "cable_class",
    "check_buildable",
    "check_reachable",
    "converges_without_ports",
    "degraded",
    "dragonfly_group_nodes",
    "endpoint_kind_name",
    "facility",
    "flow_hash",
    "hall_for",
    "hgx_node",
    "job_nic_fraction",
    "link_kind_code",
    "link_kind_name",
    "no_storage_ports_note",
    "nvl72_rack",
    "parse_degrade",
    "pcie_node",
    "plan_fat_tree",
    "racks_per_node",
    "resolve_nic",
    "resolve_switch",
    "selected_links",
    "sketch",
    "sketch_figure",
    "storage_bill",
    "tier_targets",
    "why_not_hosted",
]

# `fabricsim.topology(...)`: the API function of `fabricsim topo` (fabricsim.api.topology), called through this
# package, which shares its name.
callable_package(__name__, "fabricsim.api", "topology")
