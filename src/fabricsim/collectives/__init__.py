"""Collective operations as algorithms with NCCL-style costs; predictions in nccl-tests conventions."""

from typing import TYPE_CHECKING

from fabricsim.collectives.algorithms import ALGORITHMS, Algorithm
from fabricsim.collectives.conventions import (
    OPS,
    busbw_factor,
    check_op,
    dtype_bytes,
    in_network_busbw_factor,
    parse_op,
)
from fabricsim.collectives.cost import Cost
from fabricsim.collectives.group import (
    GroupShape,
    fabric_nic,
    group_shape,
    group_shape_on,
    host_gpus,
    resolve_fabric_link,
    scaled,
)
from fabricsim.collectives.model import Choice, CollectiveModel, choices, size_sweep
from fabricsim.collectives.result import CollectiveRow, Prediction
from fabricsim.collectives.schedule import SWITCH, Phase, bytes_sent_per_rank, schedule, schedule_size
from fabricsim.collectives.sharp import background_share, sharp_refusal
from fabricsim.lazy import lazy_exports

if TYPE_CHECKING:
    from fabricsim.collectives.flow import concurrent_groups_time, predict_on_flow

# the flow simulator (fabricsim.network, and through the topology scipy.sparse) loads on first use: an analytical
# prediction does not need it
__getattr__ = lazy_exports(__name__, dict.fromkeys(("concurrent_groups_time", "predict_on_flow"),
                                                   "fabricsim.collectives.flow"))

__all__ = [
    "ALGORITHMS",
    "OPS",
    "SWITCH",
    "Algorithm",
    "Choice",
    "CollectiveModel",
    "CollectiveRow",
    "Cost",
    "GroupShape",
    "Phase",
    "Prediction",
    "background_share",
    "busbw_factor",
    "bytes_sent_per_rank",
    "check_op",
    "choices",
    "concurrent_groups_time",
    "dtype_bytes",
    "fabric_nic",
    "group_shape",
    "group_shape_on",
    "host_gpus",
    "in_network_busbw_factor",
    "parse_op",
    "predict_on_flow",
    "resolve_fabric_link",
    "scaled",
    "schedule",
    "schedule_size",
    "sharp_refusal",
    "size_sweep",
]
