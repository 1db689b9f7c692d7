"""`fabricsim validate`: every validation case, measured vs predicted, grouped, with per-group error statistics
and the cases fabricsim cannot express yet (and why)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import typer

import fabricsim.cli.output as ui
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.validation import GroupSummary

# fabricsim.validation.GROUPS, spelled out so that `--help` does not import the validation package.
GROUPS = ("collective bandwidth", "collective latency", "training", "moe", "blackwell", "fsdp", "long context",
          "inference", "serving")


def number(value: float) -> str:
    """Whole numbers with thousands separators from 1000 up, two decimals below (never truncated)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.2f}"


def percent(value: float | None) -> str:
    """A fraction as a percentage with one decimal, '-' when there is none."""
    return "-" if value is None else f"{value * 100:.1f}%"


def group_json(g: GroupSummary) -> dict[str, Any]:
    """One group's cases and error statistics as JSON (inference: also by serving engine)."""
    from fabricsim.validation import engine_breakdown

    out: dict[str, Any] = {
        "cases": [r.model_dump() for r in g.cases], "median_abs_error": g.median_abs_error,
        "worst_abs_error": g.worst_abs_error, "worst_case": g.worst_case, "passed": g.passed, "count": g.count,
        "not_expressible": [{"id": n.id, "reason": n.reason} for n in g.not_expressible]}
    engines = engine_breakdown(g)
    if engines:
        out["by_engine"] = engines
    return out


def engine_line(group: dict[str, Any]) -> str | None:
    """'  by engine: sglang 7/9 within tolerance, median 8.1%; trtllm ...' from a group's JSON (inference groups)."""
    engines: dict[str, dict[str, float]] | None = group.get("by_engine")
    if not engines:
        return None
    return "  by engine: " + "; ".join(f"{name} {e['passed']}/{e['count']} within tolerance, median "
                                       f"{100 * float(e['median_abs_error']):.1f}%" for name, e in engines.items())


SHORT_UNITS = {"busbw GB/s": "GB/s", "avg busbw GB/s": "GB/s avg", "peak busbw GB/s": "GB/s peak"}
WIDE = 120  # narrower consoles get the detail under the case id instead of in its own column


def case_table(g: GroupSummary, width: int) -> Table:
    """The counted cases of one group (busbw units shortened; the unit column says which average). Under 120
    columns the case id keeps a line of its own and the figures and detail go under it, so nothing folds mid-id."""
    if width < WIDE:
        return _narrow_case_table(g)
    table = ui.new_table(title=f"{g.name}: measured vs predicted", header_style="bold")
    table.add_column("case", overflow="fold", ratio=1)
    for header in ("measured", "predicted", "unit", "error", "tol", "ok"):
        table.add_column(header, no_wrap=True,
                         justify="right" if header in ("measured", "predicted", "error", "tol") else "left")
    table.add_column("detail", overflow="fold", ratio=2)
    for r in g.cases:
        table.add_row(r.id, number(r.measured), number(r.predicted), SHORT_UNITS.get(r.unit, r.unit),
                      f"{r.error * 100:+.1f}%", f"±{r.tolerance * 100:.0f}%", "yes" if r.passed else "[red]NO[/]",
                      r.detail)
    return table


def _narrow_case_table(g: GroupSummary) -> Table:
    """Case id, error, tolerance and verdict as columns; measured -> predicted and the detail under the id."""
    table = ui.new_table(title=f"{g.name}: measured vs predicted", header_style="bold")
    table.add_column("case (measured -> predicted, detail)", overflow="fold", ratio=1)
    for header in ("error", "tol", "ok"):
        table.add_column(header, no_wrap=True, justify="left" if header == "ok" else "right")
    for r in g.cases:
        figures = f"{number(r.measured)} -> {number(r.predicted)} {SHORT_UNITS.get(r.unit, r.unit)}"
        table.add_row(f"{r.id}\n[dim]{figures}; {r.detail}[/]", f"{r.error * 100:+.1f}%",
                      f"±{r.tolerance * 100:.0f}%", "yes" if r.passed else "[red]NO[/]")
    return table


def summary_line(g: GroupSummary) -> str:
    """One group's pass count, median and worst error, and how many cases it cannot express."""
    worst = f"worst {percent(g.worst_abs_error)} ({g.worst_case})" if g.count else "worst -"
    return (f"{g.name}: {g.passed}/{g.count} within tolerance, median error {percent(g.median_abs_error)}, "
            f"{worst}; {len(g.not_expressible)} not expressible")


def reasons_table(groups: list[GroupSummary]) -> Table:
    """Not-expressible cases by group and reason (ids listed, shortened when many)."""
    table = ui.new_table(title="not expressible yet", header_style="bold")
    table.add_column("group")
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column("reason (cases)", overflow="fold")
    for g in groups:
        for reason, n in g.reasons():
            ids = [x.id for x in g.not_expressible if x.reason == reason]
            shown = ", ".join(ids[:3]) + (f", ... (+{len(ids) - 3})" if len(ids) > 3 else "")
            table.add_row(g.name, str(n), f"{reason} [dim]({shown})[/]")
    return table


@ui.spec_errors
def validate_command(
    fmt: ui.FormatOpt = None,
    as_json: ui.JsonOpt = False,
    calibration: list[str] = typer.Option([], "--calibration", help="calibration overlay YAML"),
    group: str | None = typer.Option(None, "--group", help=f"only this group: {', '.join(GROUPS)}"),
) -> None:
    """Run every validation case (published measurements); exit 1 when a counted case is out of tolerance."""
    from fabricsim.catalog import load_catalog
    from fabricsim.validation import (
        CaseResult,
        NotExpressible,
        all_passed,
        blind_errors,
        group_summaries,
        held_out,
        load_ledger,
        residuals_of,
        run_validation,
        summarise_held_out,
    )

    inputs = ui.command_inputs(locals())
    form = ui.output_format(fmt, as_json)
    if group is not None and group not in GROUPS:
        raise SpecError(f"unknown group {group!r}; allowed: {', '.join(GROUPS)}", field="--group")
    results: list[CaseResult | NotExpressible] = run_validation(load_catalog(*calibration))
    blind = load_ledger()
    residuals = residuals_of(results, blind_errors(blind))  # the bands' residuals: blind where the ledger has one
    found = held_out(residuals)
    kinds = [summarise_held_out(k, [r.id for r in residuals if r.regime.kind == k], found)
             for k in sorted({r.regime.kind for r in residuals})]
    if group is not None:
        results = [r for r in results if r.group == group]
    groups = [g for g in group_summaries(results) if group is None or g.name == group]
    ok = all_passed(results)
    cases = [si_case(r.model_dump()) for r in results if isinstance(r, CaseResult)]
    group_data = {g.name: {**group_json(g), "band": summarise_held_out(g.name, [r.id for r in g.cases], found)
                           .to_json(), "medians": three_medians(g, found, blind)} for g in groups}
    band_coverage = {c.kind: c.to_json() for c in kinds}
    data = {"groups": group_data, "cases": cases,
            "not_expressible": [r.model_dump() for r in results if isinstance(r, NotExpressible)],
            "band_coverage": band_coverage, "all_within_tolerance": ok}
    if not ui.emit(form, data, inputs, cases):
        for g in groups:
            if g.cases:
                ui.console.print(case_table(g, ui.console.width))
        if any(g.not_expressible for g in groups):
            ui.console.print(reasons_table(groups))
        for g in groups:
            ui.console.print(summary_line(g) + band_summary(group_data[g.name]["band"]))
            ui.console.print(medians_line(group_data[g.name]["medians"]))
            by_engine = engine_line(group_data[g.name])
            if by_engine:
                ui.console.print(by_engine)
        ui.console.print(coverage_line(band_coverage))
        ui.console.print(exit_line(groups, ok))
    if not ok:
        raise typer.Exit(code=1)


def three_medians(g: GroupSummary, found: Mapping[str, Any], ledger: Sequence[Mapping[str, Any]]
                  ) -> dict[str, Any]:
    """A group's median |error| three ways: in-sample (the model as it stands, on cases it was tuned with),
    leave-one-document-out (the figure shown, its band's bias fitted without the case's document) and blind (each
    case as first predicted, before any change it motivated: the ledger), each with its case count."""
    from fabricsim.validation import blind_errors, median_abs

    held = [h.centred_error for r in g.cases if (h := found.get(r.id)) is not None]
    blind = list(blind_errors([e for e in ledger if e.get("group") == g.name]).values())
    return {"in_sample": g.median_abs_error, "in_sample_cases": g.count,
            "leave_one_document_out": median_abs(held), "leave_one_document_out_cases": len(held),
            "blind": median_abs(blind), "blind_cases": len(blind)}


def medians_line(m: Mapping[str, Any]) -> str:
    """'  median error: in-sample 5.1% (59 cases), left-out document 6.2% (52), blind 9.3% (39)'."""
    return (f"  median error: in-sample {percent(m['in_sample'])} ({m['in_sample_cases']} cases), left-out document "
            f"{percent(m['leave_one_document_out'])} ({m['leave_one_document_out_cases']}), blind "
            f"{percent(m['blind'])} ({m['blind_cases']})")


def band_summary(band: dict[str, Any]) -> str:
    """'; 80% band median width 24% (held 31/38)' for a group: its cases' bands fitted without their document."""
    if not band.get("banded"):
        return "; no case has a held-out band"
    return (f"; held-out 80% band median width {percent(band['median_width'])}, held {band['covered']}/"
            f"{band['banded']}")


def coverage_line(kinds: dict[str, dict[str, Any]]) -> str:
    """Leave-one-source-out coverage of the 80% bands per kind (nominal 80%)."""
    parts = [f"{kind} {percent(c['coverage'])} of cases ({c['covered']}/{c['banded']}; "
             f"{c['cases'] - c['banded']} without a band), {percent(c['document_coverage'])} of documents "
             f"({c['documents']})" for kind, c in kinds.items()]
    return "80% band coverage, each document left out in turn: " + "; ".join(parts)


def exit_line(groups: list[GroupSummary], ok: bool) -> str:
    """What the exit code will mean, so that exit 1 reads as the model's accuracy and not a broken install."""
    if ok:
        return "exit code 0: every counted case is within its tolerance"
    outside = ", ".join(f"{g.name} {g.count - g.passed}" for g in groups if g.passed < g.count)
    return (f"exit code 1: counted cases outside their tolerance ({outside}); this is the model's accuracy "
            "against published measurements, not an error in the installation")


# Units a published case may be stated in, as (suffix of the unit text, SI replacement, factor to SI).
SI_UNITS = (("GB/s", "bytes/s", 1e9), ("us", "s", 1e-6), ("ms", "s", 1e-3))


def si_case(case: dict[str, Any]) -> dict[str, Any]:
    """A case result with measured and predicted in SI (GB/s -> bytes/s, us and ms -> s) and the unit text to
    match; the table keeps the publication's own unit."""
    unit = str(case.get("unit", ""))
    for suffix, si, factor in SI_UNITS:
        if unit == suffix or unit.endswith(" " + suffix):
            out = {**case, "unit": unit[: len(unit) - len(suffix)] + si}
            for key in ("measured", "predicted"):
                if isinstance(case.get(key), int | float):
                    out[key] = case[key] * factor
            metric = str(case.get("metric", ""))
            out["metric"] = metric.replace("_GBps", "_bytes_per_s").replace("_us", "_s").replace("_ms", "_s")
            return out
    return case
