"""The Python API: one function per command, each returning a typed result with ``to_dict()`` (the command's
``--json`` document), ``to_frame()`` (pandas) and ``report(path)`` (the HTML design review). The CLI is a thin
layer over these: the same inputs give the same answer.

>>> import fabricsim
>>> r = fabricsim.train(model="llama3-70b", system="dgx-h100", gpus=64, tp=8, pp=2, gbs=64)
>>> r.bottleneck
'compute'
"""

from fabricsim.api.collective import CollectiveResult, collective, regime_line
from fabricsim.api.goodput import GOODPUT_OPTIONS, goodput_json, goodput_spec, run_goodput
from fabricsim.api.infer import InferResult, infer
from fabricsim.api.progress import LazyFlowBar, progress_bar
from fabricsim.api.result import Result, document, flat, plain
from fabricsim.api.serve import DecodePool, ServeRequest, decode_pool, parse_disagg, serve_request
from fabricsim.api.size import SizeResult, size
from fabricsim.api.size_spec import inference_spec, sizing_spec
from fabricsim.api.topology import (
    TopologyResult,
    cluster_spec,
    fabric_link,
    parse_dims,
    storage_network_spec,
    topo_json,
    topology,
    with_nvlink_domain,
)
from fabricsim.api.train import (
    PLAN_OPTIONS,
    Run,
    TrainResult,
    flow_bar,
    plan_json,
    prediction_bands,
    prepare_run,
    train,
    training_bands,
)
from fabricsim.api.whatif import WhatIfResult, whatif

topo = topology  # the command's name: `fabricsim topo`

__all__ = [
    "GOODPUT_OPTIONS",
    "PLAN_OPTIONS",
    "CollectiveResult",
    "DecodePool",
    "InferResult",
    "LazyFlowBar",
    "Result",
    "Run",
    "ServeRequest",
    "SizeResult",
    "TopologyResult",
    "TrainResult",
    "WhatIfResult",
    "cluster_spec",
    "collective",
    "decode_pool",
    "document",
    "fabric_link",
    "flat",
    "flow_bar",
    "goodput_json",
    "goodput_spec",
    "infer",
    "inference_spec",
    "parse_dims",
    "parse_disagg",
    "plain",
    "plan_json",
    "prediction_bands",
    "prepare_run",
    "progress_bar",
    "regime_line",
    "run_goodput",
    "serve_request",
    "size",
    "sizing_spec",
    "storage_network_spec",
    "topo",
    "topo_json",
    "topology",
    "train",
    "training_bands",
    "whatif",
    "with_nvlink_domain",
]
