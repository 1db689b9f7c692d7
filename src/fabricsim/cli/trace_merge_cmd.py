"""`fabricsim trace import` given one file per rank (several files, a directory or a glob): the ranks aligned by
step, as tables (stragglers, steps, ranks) or the JSON document of `fabricsim.api.trace_merge`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.cli.calibrate_cmd import stderr_warnings
from fabricsim.errors import SpecError

SHOWN_STEPS = 20
"""steps listed in the table (the slowest spreads first); the JSON has them all"""
SHOWN_RANKS = 20
"""ranks listed in the table (the slowest first); the JSON has them all"""


def _duration(value: float | None) -> str:
    return units.format_duration(value) if value is not None else "-"


def _ranks(missing: tuple[int, ...], limit: int = 8) -> str:
    if not missing:
        return "-"
    shown = ", ".join(map(str, missing[:limit]))
    return shown + (f" (+{len(missing) - limit} more)" if len(missing) > limit else "")


def merge_command(files: list[Path], given: dict[str, Any], form: str, progress: Any, close: Any) -> None:
    """Merge the rank files and print the result (``given``: the command's options, for the JSON inputs)."""
    from fabricsim.api import trace_merge

    for name, why in (("model", "compares one rank's trace with a plan"), ("rank", "picks a device of one trace")):
        if given.get(name) is not None:
            raise SpecError(f"{why}: give one file (several files, a directory or a glob are merged by step)",
                            field=f"--{name}")
    try:
        result = trace_merge(files, straggler_threshold=given["straggler_threshold"], workers=given["workers"],
                             max_events=given["max_events"], progress=progress)
    finally:
        close()
    merged = result.merged
    inputs = {"files": [str(f) for f in files], "straggler_threshold": given["straggler_threshold"],
              "workers": given["workers"], "max_events": given["max_events"]}
    if ui.emit(form, result.data, inputs, result.rows):
        return
    ui.console.print(f"{merged.files} rank file(s), {len(merged.steps)} step(s); median step time over ranks "
                     f"{_duration(merged.median_step_s)}; stragglers: ranks more than "
                     f"{merged.straggler_threshold:.0%} slower than that")
    slow = ui.new_table(title="stragglers (median step time over the ranks' median)")
    ui.num_column(slow, "rank")
    for header in ("median step", "slower by", "extra compute", "extra exposed comm"):
        ui.num_column(slow, header)
    ui.text_column(slow, "phase")
    for s in merged.stragglers:
        slow.add_row(str(s.rank), _duration(s.median_step_s), f"{s.slower_by:+.1%}", _duration(s.extra_compute_s),
                     _duration(s.extra_exposed_comm_s), s.phase)
    if merged.stragglers:
        ui.console.print(slow)
    else:
        ui.console.print("no stragglers")
    steps = ui.new_table(title=f"steps by spread (max / median step time over ranks; "
                               f"{min(SHOWN_STEPS, len(merged.steps))} of {len(merged.steps)})")
    for header in ("step", "ranks", "slowest rank", "max", "median", "spread"):
        ui.num_column(steps, header)
    ui.text_column(steps, "missing ranks")
    order = sorted(merged.steps, key=lambda s: (-round(s.spread or 0.0, 6), s.step))[:SHOWN_STEPS]
    for s in order:
        steps.add_row(str(s.step), str(s.ranks), str(s.slowest_rank), _duration(s.max_s), _duration(s.median_s),
                      f"{s.spread:.3f}" if s.spread is not None else "-", _ranks(s.missing_ranks))
    ui.console.print(steps)
    ranks = ui.new_table(title=f"ranks by median step time ({min(SHOWN_RANKS, len(merged.ranks))} of "
                               f"{len(merged.ranks)})")
    for header in ("rank", "steps", "median step", "compute", "exposed comm"):
        ui.num_column(ranks, header)
    ui.text_column(ranks, "file")
    for r in sorted(merged.ranks, key=lambda r: (-(r.median_step_s or 0.0), r.rank))[:SHOWN_RANKS]:
        ranks.add_row(str(r.rank), str(r.steps), _duration(r.median_step_s), _duration(r.median_compute_s),
                      _duration(r.median_exposed_comm_s), r.source)
    ui.console.print(ranks)
    stderr_warnings(merged.warnings)
