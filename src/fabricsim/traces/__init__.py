"""Profiler traces (PyTorch/Kineto JSON streamed, Nsight Systems SQLite) read into compact arrays and summarised
per device and step: busy time by kernel class, compute and communication and their overlap, collectives in
nccl-tests' size convention, GEMM FLOP rates. Never imports torch."""

from typing import TYPE_CHECKING

from fabricsim.lazy import lazy_exports

if TYPE_CHECKING:
    from fabricsim.traces.classify import patterns
    from fabricsim.traces.events import MAX_EVENTS, TraceEvents
    from fabricsim.traces.merge import merge_traces, trace_files
    from fabricsim.traces.merged import MergedTrace, RankStat, StepSpread, Straggler
    from fabricsim.traces.read import read_trace
    from fabricsim.traces.results import ClassTime, CollectiveStat, DeviceSummary, GemmStat, TraceSummary
    from fabricsim.traces.summary import import_trace, summarise

# numpy and ijson: loaded on first use, not by every importer of the package
__getattr__ = lazy_exports(__name__, {
    "patterns": "fabricsim.traces.classify",
    **dict.fromkeys(("MAX_EVENTS", "TraceEvents"), "fabricsim.traces.events"),
    "read_trace": "fabricsim.traces.read",
    **dict.fromkeys(("merge_traces", "trace_files"), "fabricsim.traces.merge"),
    **dict.fromkeys(("MergedTrace", "RankStat", "StepSpread", "Straggler"), "fabricsim.traces.merged"),
    **dict.fromkeys(("import_trace", "summarise"), "fabricsim.traces.summary"),
    **dict.fromkeys(("ClassTime", "CollectiveStat", "DeviceSummary", "GemmStat", "TraceSummary"),
                    "fabricsim.traces.results"),
})

__all__ = [
    "MAX_EVENTS",
    "ClassTime",
    "CollectiveStat",
    "DeviceSummary",
    "GemmStat",
    "MergedTrace",
    "RankStat",
    "StepSpread",
    "Straggler",
    "TraceEvents",
    "TraceSummary",
    "import_trace",
    "merge_traces",
    "patterns",
    "read_trace",
    "summarise",
    "trace_files",
]
