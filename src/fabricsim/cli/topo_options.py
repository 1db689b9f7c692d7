"""The cluster options `topo` and `traffic` share, as the run spec `fabricsim.api.specs.ClusterOptions` declares
them (generated into `cli.spec_options`): single aliases for the commands that take one of them."""

from __future__ import annotations

from fabricsim.cli.spec_options import CLUSTER_OPTIONS

System, Nodes, Fabric, Ib = (CLUSTER_OPTIONS[n][0] for n in ("system", "nodes", "fabric", "ib"))
