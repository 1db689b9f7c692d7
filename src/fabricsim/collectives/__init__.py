"""Collective operations as algorithms with NCCL-style costs; predictions in nccl-tests conventions."""

from fabricsim.collectives.algorithms import ALGORITHMS, Algorithm
from fabricsim.collectives.conventions import OPS, busbw_factor, check_op, dtype_bytes, in_network_busbw_factor
from fabricsim.collectives.cost import Cost
from fabricsim.collectives.flow import predict_on_flow
from fabricsim.collectives.group import GroupShape, group_shape, group_shape_on, scaled
from fabricsim.collectives.model import Choice, CollectiveModel, choices, size_sweep
from fabricsim.collectives.result import CollectiveRow, Prediction
from fabricsim.collectives.schedule import SWITCH, Phase, bytes_sent_per_rank, schedule

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
    "busbw_factor",
    "bytes_sent_per_rank",
    "check_op",
    "choices",
    "dtype_bytes",
    "group_shape",
    "group_shape_on",
    "in_network_busbw_factor",
    "predict_on_flow",
    "scaled",
    "schedule",
    "size_sweep",
]
