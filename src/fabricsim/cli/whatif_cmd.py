"""`fabricsim whatif`: the step time with each layer made faster and on named cluster swaps priced from the bill
of materials, and a one-line verdict of where the next dollar goes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import fabricsim.cli.output as ui
from fabricsim import units
from fabricsim.cli.goodput_options import storage_fallback_notes
from fabricsim.cli.options import WHATIF, declared, run_options
from fabricsim.cli.train_cmd import choice_line, run_title, step_line

if TYPE_CHECKING:
    from rich.table import Table

    from fabricsim.analysis import SwapDelta, WhatIf


def _money(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{'-' if value < 0 else '+'}${abs(value):,.0f}"


def _step_cell(step_time_s: float, band: dict[str, object] | None) -> str:
    """A step time and its 80% band for a table cell, 'step (low-high)': the model's step where the band holds it,
    else the band's centre (`validation.shown_figure`); the step alone without a band."""
    from fabricsim.validation import shown_figure

    shown = units.format_duration(shown_figure(step_time_s, band))
    if not band or band.get("low") is None:
        return shown
    low, high = band["low"], band["high"]
    assert isinstance(low, float) and isinstance(high, float)
    return f"{shown} ({units.format_duration(low)}-{units.format_duration(high)})"


def layer_table(result: WhatIf) -> Table:
    """Step time and speed-up with each layer made faster, a bar per speed-up."""
    table = ui.new_table(title=f"each layer {result.factor:g}x faster (base step "
                        f"{units.format_duration(result.base.step_time_s)})", header_style="bold")
    ui.text_column(table, "layer")
    ui.num_column(table, "step time")
    ui.num_column(table, "speed-up")
    table.add_column("", overflow="crop", no_wrap=True, ratio=1)
    top = max(d.speedup for d in result.layers)
    for d in result.layers:
        bar = "█" * round((d.speedup - 1.0) * 40)
        style = "bold green" if d.layer == result.verdict.layer and top > 1.0 else ""
        table.add_row(d.layer, _step_cell(d.step_time_s, d.band), f"{d.speedup:.3f}x",
                      f"[{style}]{bar}[/]" if style else bar)
    return table


def _trade(s: SwapDelta) -> str:
    """An upgrade as % faster per $1M; a downgrade as dollars saved per 1% slower (either as "no measurable" when
    the change is too small to rate: `analysis.trade_phrase`); otherwise what kind it is."""
    from fabricsim.analysis import trade_phrase

    trade = trade_phrase(s)
    return s.kind if trade is None else f"{s.kind}: {trade}"


def swap_table(result: WhatIf) -> Table:
    """Each swap: step time, goodput, speed-up of the wall-clock step (step / goodput), capital cost difference,
    what it trades (an upgrade's % faster per $1M, a downgrade's savings per 1% slower) and how the work done per
    capital dollar moves."""
    base = "unknown" if result.base_capex_usd is None else f"${result.base_capex_usd:,.0f}"
    table = ui.new_table(title=f"swaps (base capital cost {base}, goodput {result.base_goodput:.1%})",
                      header_style="bold")
    ui.text_column(table, "swap")
    for header in ("step time", "goodput", "speed-up", "cost delta"):
        ui.num_column(table, header)
    ui.text_column(table, "trade")
    ui.num_column(table, "work per $")
    for header in ("MW", "racks"):
        ui.num_column(table, header)
    for s in result.swaps:
        change = s.work_per_usd_change(result.base_capex_usd)
        work = "?" if change is None else (f"[green]{change * 100:+.1f}%[/]" if change > 0 else f"{change * 100:+.1f}%")
        step = _step_cell(s.step_time_s, s.band) + (
            "" if s.fits else " [yellow](does not fit)[/]")
        table.add_row(s.swap, step, f"{s.goodput:.1%}", f"{s.speedup:.3f}x", _money(s.cost_delta_usd), _trade(s),
                      work, *_facility_cells(s.facility))
    refused = [f"{s.swap}: {s.facility['reason']}" for s in result.swaps
               if s.facility is not None and s.facility.get("hostable") is False]
    if refused:
        table.caption = "not hosted: " + "; ".join(refused)
    return table


def _facility_cells(block: dict[str, Any] | None) -> tuple[str, str]:
    """Facility power (MW, IT x PUE) and compute racks of a swap's cluster; 'no' where its hall cannot host it."""
    block = block or {}
    power, racks = block.get("facility_power_w"), block.get("racks")
    return ("-" if power is None else f"{power / 1e6:.2f}",
            ("no" if block.get("hostable") is False else "-") if racks is None else str(racks))


@declared(*WHATIF)
@ui.spec_errors
def whatif_command(**options: Any) -> None:
    """Which layer to make faster, and which cluster swap pays: step time per layer sped up and per swap with its
    cost from the bill of materials (same plan and options as `train`)."""
    inputs, form, _, report = run_options(WHATIF, options)
    from fabricsim.api import whatif

    answer = whatif(**ui.api_arguments(whatif, inputs))
    run, result = answer.run, answer.analysis
    assert run is not None and result is not None
    ui.write_command_report(report, answer, inputs)
    ui.model_import_note(answer)
    storage_fallback_notes(answer.data)
    if ui.emit(form, answer.data, inputs, answer.rows):
        return
    ui.console.print(f"[bold]what if[/]: {run_title(run)}")
    ui.console.print(choice_line(run.choice))
    ui.console.print("base " + step_line(run.prediction, answer.bands))
    ui.console.print(layer_table(result))
    if result.swaps:
        ui.console.print(swap_table(result))
    ui.console.print(f"[bold]verdict:[/] {result.verdict.sentence}")
