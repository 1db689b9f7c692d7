"""`fabricsim validate`: every packaged validation case, measured vs predicted, with the error."""

from __future__ import annotations

import statistics
from typing import Any

import typer
from rich.table import Table

from fabricsim.catalog import load_catalog
from fabricsim.cli.output import console, print_json, spec_errors
from fabricsim.validation import CaseResult, load_cases, run_collective_case, run_training_case


def run_all(calibration: list[str]) -> tuple[list[CaseResult], list[str]]:
    catalog = load_catalog(*calibration)
    collective, origin_c = load_cases("nccl_tests.yaml")
    training, origin_t = load_cases("training.yaml")
    results = [run_collective_case(c, catalog) for c in collective]
    results += [run_training_case(c, catalog) for c in training]
    return results, [origin_c, origin_t]


def _error_stats(errors: list[float]) -> dict[str, float]:
    return {"cases": len(errors), "median_abs_error": statistics.median(errors), "worst_abs_error": max(errors)}


@spec_errors
def validate_command(
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    calibration: list[str] = typer.Option([], "--calibration", help="calibration overlay YAML"),
) -> None:
    """Run the validation set (published measurements) and print the error per case."""
    results, origins = run_all(calibration)
    errors = [abs(r.error) for r in results]
    summary: dict[str, Any] = {
        "cases": len(results),
        "passed": sum(r.passed for r in results),
        "median_abs_error": statistics.median(errors) if errors else 0.0,
        "worst_abs_error": max(errors) if errors else 0.0,
        "worst_case": max(results, key=lambda r: abs(r.error)).id if results else None,
        "by_kind": {kind: _error_stats([abs(r.error) for r in results if r.kind == kind])
                    for kind in sorted({r.kind for r in results})},
        "sources": origins,
    }
    if as_json:
        print_json({"results": [r.model_dump() for r in results], "summary": summary})
        return
    table = Table(title="validation against published measurements", header_style="bold")
    for header in ("case", "measured", "predicted", "unit", "error", "tolerance", "ok", "detail"):
        table.add_column(header)
    for r in results:
        table.add_row(r.id, f"{r.measured:.2f}", f"{r.predicted:.2f}", r.unit, f"{r.error * 100:+.1f}%",
                      f"±{r.tolerance * 100:.0f}%", "yes" if r.passed else "[red]NO[/]", r.detail)
    console.print(table)
    for kind, stats in summary["by_kind"].items():
        console.print(f"{kind}: {stats['cases']} cases, median error {stats['median_abs_error'] * 100:.1f}%, "
                      f"worst {stats['worst_abs_error'] * 100:.1f}%")
    console.print(f"{summary['passed']}/{summary['cases']} cases within tolerance; "
                  f"median error {summary['median_abs_error'] * 100:.1f}%, "
                  f"worst {summary['worst_abs_error'] * 100:.1f}% ({summary['worst_case']})")
