"""The Python API: one function per command, each returning a typed result with ``to_dict()`` (the command's
``--json`` document), ``to_frame()`` (pandas) and ``report(path)`` (the HTML design review). The CLI is a thin
layer over these: the same inputs give the same answer.

>>> import fabricsim
>>> r = fabricsim.train(model="llama3-70b", system="dgx-h100", gpus=64, tp=8, pp=2, gbs=64)
>>> r.bottleneck
'compute'
"""

from typing import TYPE_CHECKING

from fabricsim.api.calls import collective, infer, size, sweep, topology, train, whatif
from fabricsim.api.collective import CollectiveResult
from fabricsim.api.goodput import run_goodput
from fabricsim.api.infer import InferResult
from fabricsim.api.progress import progress_bar
from fabricsim.api.result import Result, document, flat, plain
from fabricsim.api.serve import ServeRequest
from fabricsim.api.size import SizeResult
from fabricsim.api.sweep import SweepResult
from fabricsim.api.topology import TopologyResult, cluster_spec, resolved_names
from fabricsim.api.trace import TraceMergeResult, trace_merge
from fabricsim.api.train import Run, TrainResult, prediction_bands, prepare_run
from fabricsim.api.whatif import WhatIfResult
from fabricsim.lazy import lazy_exports

if TYPE_CHECKING:
    from fabricsim.api.specs import PlanOptions, TopologyRun, TrainRun, WhatIfRun

topo = topology  # the command's name: `fabricsim topo`
# The run specs, loaded on first use (pydantic stays out of `fabricsim --help`).
__getattr__ = lazy_exports(__name__, dict.fromkeys(("PlanOptions", "TopologyRun", "TrainRun", "WhatIfRun"),
                                                    "fabricsim.api.specs"))

__all__ = [
    "CollectiveResult",
    "InferResult",
    "PlanOptions",
    "Result",
    "Run",
    "ServeRequest",
    "SizeResult",
    "SweepResult",
    "TopologyResult",
    "TopologyRun",
    "TraceMergeResult",
    "TrainResult",
    "TrainRun",
    "WhatIfResult",
    "WhatIfRun",
    "cluster_spec",
    "collective",
    "document",
    "flat",
    "infer",
    "plain",
    "prediction_bands",
    "prepare_run",
    "progress_bar",
    "resolved_names",
    "run_goodput",
    "size",
    "sweep",
    "topo",
    "topology",
    "trace_merge",
    "train",
    "whatif",
]
