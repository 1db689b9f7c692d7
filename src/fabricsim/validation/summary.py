"""Per-group statistics of a validation run: median and worst error, cases within tolerance, not expressible."""

from __future__ import annotations

import statistics
from collections import Counter

from pydantic import BaseModel

from fabricsim.validation.collective_cases import CaseResult
from fabricsim.validation.runner import GROUPS, NotExpressible


class GroupSummary(BaseModel):
    """One group's counted cases and their error statistics, plus the cases it cannot express yet."""

    name: str
    cases: list[CaseResult]
    count: int
    passed: int
    median_abs_error: float | None
    worst_abs_error: float | None
    worst_case: str | None
    not_expressible: list[NotExpressible]

    def reasons(self) -> list[tuple[str, int]]:
        """Not-expressible reasons with how many cases give each, most common first."""
        return Counter(n.reason for n in self.not_expressible).most_common()


def summarise(name: str, results: list[CaseResult | NotExpressible]) -> GroupSummary:
    """The summary of one group from the results that belong to it."""
    counted = [r for r in results if isinstance(r, CaseResult) and r.group == name]
    missing = [r for r in results if isinstance(r, NotExpressible) and r.group == name]
    errors = [abs(r.error) for r in counted]
    worst = max(counted, key=lambda r: abs(r.error)) if counted else None
    return GroupSummary(
        name=name, cases=counted, count=len(counted), passed=sum(r.passed for r in counted),
        median_abs_error=statistics.median(errors) if errors else None,
        worst_abs_error=abs(worst.error) if worst else None, worst_case=worst.id if worst else None,
        not_expressible=missing,
    )


def group_summaries(results: list[CaseResult | NotExpressible]) -> list[GroupSummary]:
    """A summary per group, in the fixed group order, then any other group names the results carry."""
    names = list(GROUPS) + sorted({r.group for r in results} - set(GROUPS))
    return [summarise(n, results) for n in names]


def all_passed(results: list[CaseResult | NotExpressible]) -> bool:
    """True when every counted case is within its tolerance."""
    return all(r.passed for r in results if isinstance(r, CaseResult))


def engine_breakdown(g: GroupSummary) -> dict[str, dict[str, float | int]]:
    """A group's counted cases by serving engine (inference): count, in tolerance, median |error|; engine names
    without their release (trtllm@0.9 counts as trtllm)."""
    by: dict[str, list[CaseResult]] = {}
    for r in g.cases:
        if r.engine:
            by.setdefault(r.engine.split("@")[0], []).append(r)
    return {name: {"count": len(rs), "passed": sum(r.passed for r in rs),
                   "median_abs_error": statistics.median(abs(r.error) for r in rs)} for name, rs in sorted(by.items())}
