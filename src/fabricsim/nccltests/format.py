"""Write results in nccl-tests' stdout layout, so scripts written for nccl-tests read fabricsim's output too.

The layout is nccl-tests 2.x's: the run header, ``# Using devices`` lines, the three column-header lines, one
line per size with the out-of-place then the in-place column group (``N/A`` in ``#wrong`` when unchecked), then
``# Out of bounds values`` and ``# Avg bus bandwidth``. Numbers are printed with as many decimals as fit the
column, as nccl-tests does, so a round trip through :func:`fabricsim.nccltests.parse.parse_nccl_tests` keeps
every figure to the printed precision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import pairwise

from fabricsim.nccltests.parse import OP_BINARIES
from fabricsim.nccltests.rows import BenchResult, BenchRow, nccl_tests_dtype


def _fit(value: float, width: int) -> str:
    """A number in ``width`` characters with as many decimals as fit (2, 1, 0), as nccl-tests prints."""
    digits = len(str(int(value))) if value >= 1 else 0
    if digits < width - 2:
        return f"{value:{width}.2f}"
    if digits < width - 1:
        return f"{value:{width}.1f}"
    if digits < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}"


def _step_text(sizes: list[int]) -> str:
    if len(sizes) >= 2 and sizes[0] > 0 and all(b % a == 0 for a, b in pairwise(sizes)):
        factors = {b // a for a, b in pairwise(sizes)}
        if len(factors) == 1:
            return f"{factors.pop()}(factor)"
    if len(sizes) >= 2:
        steps = {b - a for a, b in pairwise(sizes)}
        if len(steps) == 1:
            return f"{steps.pop()}(bytes)"
    return "0(bytes)"


def _group_text(row: BenchRow | None) -> str:
    if row is None:
        return " " * 32
    wrong = "   N/A" if row.wrong is None else f"{row.wrong:6d}"
    return f"  {_fit(row.time_s * 1e6, 7)}  {_fit(row.algbw_GBps, 6)}  {_fit(row.busbw_GBps, 6)}  {wrong}"


def _header_lines(result: BenchResult, sizes: list[int], placements: list[bool]) -> list[str]:
    """Everything above the first size line: run header, devices, the three column-header lines."""
    binary = OP_BINARIES[result.op]
    lines: list[str] = []
    if result.tool == "fabricsim":
        hosts = ",".join(result.hosts) or "?"
        lines.append(f"# fabricsim bench collective {result.op}: backend {result.backend}, "
                     f"world size {result.world_size}, hosts {hosts}")
    lines.append(f"# Collective test starting: {binary}")
    check = 1 if result.check else 0
    lines.append(
        f"# nThread 1 nGpus 1 minBytes {min(sizes, default=0)} maxBytes {max(sizes, default=0)} "
        f"step: {_step_text(sizes)} warmup iters: {result.warmup_iters or 0} iters: {result.iters or 0} "
        f"agg iters: 1 validation: {check} graph: 0"
    )
    lines.append("#")
    lines.append("# Using devices")
    for d in result.devices:
        lines.append(f"#  Rank {d.rank:2d} Group {d.group or 0:2d} Pid {d.pid or 0:6d} on {d.host:>10s} "
                     f"device {d.device:2d} [{d.bus_id or '?'}] {d.name}")
    lines.append("#")
    label = {False: "out-of-place", True: "in-place"}
    lines.append(f"# {'':10s}  {'':12s}  {'':8s}  {'':6s}  {'':6s}  " + "".join(
        f"{label[p]:^33s}" for p in placements).rstrip())
    lines.append(f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}" + "".join(
        f"  {'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s}" for _ in placements))
    lines.append(f"# {'(B)':>10s}  {'(elements)':>12s}  {'':8s}  {'':6s}  {'':6s}" + "".join(
        f"  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':6s}" for _ in placements).rstrip())
    return lines


_LineKey = tuple[int, int, str, str | None, int | None]  # rows with the same key share one size line


def _line_key(row: BenchRow) -> _LineKey:
    return row.size_bytes, row.count, row.dtype, row.redop, row.root


def _size_line(key: _LineKey, by_place: dict[bool, BenchRow], placements: list[bool]) -> str:
    size, count, dtype, redop, root = key
    root_text = -1 if root is None else root
    head = f"{size:12d}  {count:12d}  {nccl_tests_dtype(dtype):>8s}  {redop or 'none':>6s}  {root_text:6d}"
    return head + "".join(_group_text(by_place.get(p)) for p in placements)


def _footer_lines(result: BenchResult) -> list[str]:
    binary = OP_BINARIES[result.op]
    oob = sum(1 for row in result.rows if row.wrong)
    avg = result.avg_busbw_GBps
    if avg is None:
        avg = sum(r.busbw_GBps for r in result.rows) / len(result.rows) if result.rows else 0.0
    return [f"# {'Out of bounds values':<20s} : {oob} {'FAILED' if oob else 'OK'}",
            f"# {'Avg bus bandwidth':<20s} : {avg:g} ",
            "#",
            f"# Collective test concluded: {binary}"]


def table_layout(rows: Iterable[BenchRow]) -> tuple[list[int], list[bool]]:
    """The sizes (in order, once each) and the column groups (out-of-place, in-place) a table of ``rows`` has."""
    rows = list(rows)
    sizes = list(dict.fromkeys(row.size_bytes for row in rows))
    placements = [p for p in (False, True) if any(row.in_place is p for row in rows)] or [False, True]
    return sizes, placements


def format_nccl_tests(result: BenchResult) -> str:
    """A table in nccl-tests' stdout layout, so scripts written for nccl-tests read it (and so does
    :func:`parse_nccl_tests`). Rows of one size share a line: out-of-place group first, then in-place."""
    sizes, placements = table_layout(result.rows)
    lines = _header_lines(result, sizes, placements)
    grouped: dict[_LineKey, dict[bool, BenchRow]] = {}
    for row in result.rows:
        grouped.setdefault(_line_key(row), {})[row.in_place] = row
    lines.extend(_size_line(key, by_place, placements) for key, by_place in grouped.items())
    lines.extend(_footer_lines(result))
    return "\n".join(lines) + "\n"


class TableStream:
    """:func:`format_many`'s text written piece by piece while the results are measured, as nccl-tests prints:
    an operation's header when it starts, each size line as soon as all its column groups are in, the footer
    when the operation ends. Given the same results, the text written equals :func:`format_many`'s.

    Implements :class:`fabricsim.nccltests.rows.BenchListener`; ``write`` receives whole lines.
    """

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = write
        self._tables = 0
        self._placements: list[bool] = [False, True]
        self._pending: dict[_LineKey, dict[bool, BenchRow]] = {}
        self.text = ""  # everything written so far

    def _out(self, lines: list[str]) -> None:
        if lines:
            chunk = "\n".join(lines) + "\n"
            self.text += chunk
            self._write(chunk)

    def begin(self, result: BenchResult, sizes: list[int], placements: list[bool]) -> None:
        """An operation starts: ``result`` without rows; the sizes and column groups its rows will have."""
        self._placements = list(placements)
        self._pending = {}
        lines = _header_lines(result, list(sizes), self._placements)
        self._out(["", *lines] if self._tables else lines)  # format_many puts a blank line between tables
        self._tables += 1

    def row(self, row: BenchRow) -> None:
        """One measured row: the size lines now complete (in order) are written."""
        self._pending.setdefault(_line_key(row), {})[row.in_place] = row
        done: list[str] = []
        for key, by_place in list(self._pending.items()):
            if any(p not in by_place for p in self._placements):
                break
            done.append(_size_line(key, by_place, self._placements))
            del self._pending[key]
        self._out(done)

    def remainder(self, full: str) -> str:
        """What is left to write so that the whole output is ``full`` (:func:`format_many` of the final results):
        nothing when every result was streamed. Should the text written so far not begin ``full``, the whole of
        ``full`` follows a note (the final results win)."""
        if full.startswith(self.text):
            return full[len(self.text):]
        return "\n# the streamed table above differs from the final results, which follow\n" + full

    def end(self, result: BenchResult) -> None:
        """The operation's whole result: any incomplete size lines, then the footer."""
        lines = [_size_line(key, by_place, self._placements) for key, by_place in self._pending.items()]
        self._pending = {}
        self._out(lines + _footer_lines(result))


def format_many(results: Iterable[BenchResult]) -> str:
    """Several tables one after another, as a script running several nccl-tests binaries prints them."""
    return "\n".join(format_nccl_tests(r) for r in results)
