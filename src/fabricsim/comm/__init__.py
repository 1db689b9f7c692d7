"""Communication of a placed workload: a collective of a given size on a process group of a built cluster, timed
by the collective model (one group alone) or the flow simulator (every group of a kind at once). Training and
inference reach the network only through here.

Public API: ``Cluster``, ``SIMS``, ``group_comm``, ``groups_comm``, ``collective_time``, ``cached_group_shape``,
``GroupShape``.
"""

from fabricsim.collectives import GroupShape
from fabricsim.comm.cluster import DIRECT_FABRICS, SIMS, Cluster
from fabricsim.comm.timing import cached_group_shape, collective_time, direct_taper, group_comm, groups_comm

__all__ = [
    "DIRECT_FABRICS",
    "SIMS",
    "Cluster",
    "GroupShape",
    "cached_group_shape",
    "collective_time",
    "direct_taper",
    "group_comm",
    "groups_comm",
]
