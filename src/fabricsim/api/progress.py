"""Progress bars on stderr for long runs (flow simulations, serving simulations): shown only on a terminal and
only once a run has taken a couple of seconds, so scripts and notebooks stay quiet."""

from __future__ import annotations

from typing import Any


class LazyFlowBar:
    """A rich progress bar on stderr (transient) that appears only once a run has taken `after` seconds, and only
    when stderr is a terminal: what is done of how much (routing, then flows finished; or requests served), its
    rate and the time left."""

    def __init__(self, after: float = 2.0, unit: str = "flows") -> None:
        import time

        self.clock = time.perf_counter
        self.t0, self.after, self.unit = self.clock(), after, unit
        self.progress: Any = None
        self.task: Any = None

    def __call__(self, what: str, done: int, total: int) -> None:
        if self.progress is None:
            if self.clock() - self.t0 < self.after:
                return
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     TextColumn("{task.completed:,}/{task.total:,} " + self.unit),
                                     TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                                     TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            self.progress.start()
            self.task = self.progress.add_task(what, total=total, rate="")
        elapsed = max(self.clock() - self.t0, 1e-9)
        self.progress.update(self.task, description=what, completed=done, total=total,
                             rate=f"{done / elapsed:,.0f} {self.unit}/s")
        if what == "simulating" and done >= total:
            self.close()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
            self.t0 = self.clock()


def progress_bar(unit: str = "flows") -> LazyFlowBar | None:
    """A progress bar for a long run (a flow simulation of traffic, collective or train --sim flow; a serving
    simulation) when stderr is a terminal, else None."""
    import sys

    return LazyFlowBar(unit=unit) if sys.stderr.isatty() else None
