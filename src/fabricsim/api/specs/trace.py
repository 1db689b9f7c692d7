"""The options of `fabricsim trace import` given one profile per rank (several files, a directory or a glob):
how the files are read and when a rank is a straggler."""

from __future__ import annotations

from fabricsim.api.specs.fields import OptionGroup, opt
from fabricsim.api.specs.shared import WorkersOption

STRAGGLER_THRESHOLD = 0.05
"""A rank whose median step time is more than 5% above the median over ranks is named a straggler. Not fitted
(verified: false): a synchronous job runs at its slowest rank's pace, so 5% of step time lost is the smallest loss
worth chasing, and it sits above the step-to-step jitter of a healthy rank's compute (the median over a rank's steps
discards one-off slow steps). Set per job with --straggler-threshold."""


class TraceMergeOptions(OptionGroup):
    """Traces of one job, one file per rank (`trace import` given several files, a directory or a glob): aligned by
    step (ProfilerStep#N), each rank reduced to its per-step figures before the next is read."""

    straggler_threshold: float = opt(
        STRAGGLER_THRESHOLD, "with one file per rank: a straggler is a rank whose median step time exceeds the "
        "median over ranks by more than this fraction (0.05: 5% slower; not fitted, the smallest loss worth "
        "chasing above a healthy rank's step-to-step jitter)")
    workers: WorkersOption
