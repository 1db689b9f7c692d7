"""Issue 43 (whatif verdicts, size presentation, rail-only cost, calibrate/compare): a change too small to measure
is not priced as a rate, rail-only never needs more switches than the rail-optimized fat tree, `calibrate` says
when it writes no overlay, `size` shows its pick in its table, durations in minutes read as minutes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fabricsim import units
from fabricsim.analysis import SwapDelta, trade_phrase, verdict
from fabricsim.analysis.deltas import MEASURABLE_PERCENT, LayerDelta
from fabricsim.cli import app
from fabricsim.topology import build_cluster
from topology_checks import assert_valid_routes

DATA = Path(__file__).resolve().parent / "data"
ILLUSTRATIVE = DATA / "calibration" / "h100-1node-all_reduce-illustrative.log"
TWO_NODE = DATA / "nccl-tests" / "h100-2node-16gpu-all_reduce.log"


def _swap(speedup: float, cost_usd: float) -> SwapDelta:
    return SwapDelta("x=y", 1.0 / speedup, speedup, cost_usd, True, speedup_range=(speedup * 0.8, speedup * 1.25))


def test_a_downgrade_below_the_measurable_change_saves_at_no_measurable_cost() -> None:
    """0.0054% slower for $0.62M was priced "$113.83M per 1% slower": no rate over a change below
    `MEASURABLE_PERCENT`, in the table's wording and the verdict's (one function)."""
    tiny = _swap(1.0 / (1.0 + 0.000054), -620_000.0)
    assert tiny.kind == "downgrade" and not tiny.measurable
    assert tiny.savings_usd_per_percent_slower is None
    assert trade_phrase(tiny) == "saves $0.62M at no measurable cost"
    assert tiny.to_json(28e6)["measurable"] is False
    layers = (LayerDelta("compute", 0.5, 2.0), LayerDelta("infiniband", 1.0, 1.0))
    said = verdict(None, 2.0, layers, (tiny,), 28e6).sentence  # type: ignore[arg-type]
    assert "x=y (saves $0.62M at no measurable cost)" in said and "per 1% slower" not in said
    real = _swap(1.0 / (1.0 + 2 * MEASURABLE_PERCENT / 100), -620_000.0)
    assert real.measurable and real.savings_usd_per_percent_slower == pytest.approx(620_000.0 / 0.2)
    assert trade_phrase(real) == "saves $3.10M per 1% slower"


def test_an_upgrade_below_the_measurable_change_has_no_rate_per_dollar() -> None:
    tiny = _swap(1.0 + 0.00002, 70_000.0)
    assert tiny.kind == "upgrade" and tiny.percent_per_million_usd is None
    assert trade_phrase(tiny) == "no measurable speed-up for +$0.07M"
    real = _swap(1.02, 1_000_000.0)
    assert trade_phrase(real) == "+2.00% per $1M"
    assert trade_phrase(real, totals=True) == "+2.0% for +$1.00M, +2.00% per $1M"


def test_whatif_table_says_no_measurable_cost() -> None:
    out = CliRunner().invoke(app, ["whatif", "--model", "llama3-8b", "--gpus", "576", "--seq", "2048", "--gbs",
                                   "576", "--swap", "spares=2%"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "at no measurable cost" in out.output and "per 1% slower" not in out.output


RAIL_SAMPLE = (8, 16, 33, 48, 64, 65, 72, 80, 96, 100, 112, 128, 130, 160, 200, 256, 300, 384, 448, 511, 512)


@pytest.mark.parametrize("nodes", RAIL_SAMPLE)
def test_rail_only_never_needs_more_switches_than_the_fat_tree(nodes: int) -> None:
    """72 and 80 DGX H100 nodes took 40 rail-only switches against the fat tree's 36 and 38: each rail's 2 spines
    used 36 of 64 ports. Spines of several rails now share a switch (routes stay on the rail)."""
    rail_only = build_cluster("dgx-h100", nodes=nodes, fabric="rail-only").bom()
    fat_tree = build_cluster("dgx-h100", nodes=nodes).bom()
    assert rail_only.switches_total <= fat_tree.switches_total
    assert rail_only.capex_usd is not None and fat_tree.capex_usd is not None
    assert rail_only.capex_usd <= fat_tree.capex_usd


@pytest.mark.parametrize(("nodes", "switches"), [(72, 34), (80, 35)])
def test_rail_only_at_72_and_80_nodes_by_hand(nodes: int, switches: int) -> None:
    """By hand, NDR and radix-64 QM9700: 72 nodes make rails of 72 NICs: 3 leaves of 24 down and 24 up (24 leaves);
    6 spines of 3 x 4 = 12 ports per rail, 5 to a switch: 48 / 5 -> 10 spine switches (34). 80 nodes: 3 leaves of
    27 (27 up), 3 spines of 3 x 9 = 27 ports, 2 to a switch: 24 / 2 -> 12, or 4 spines of 3 x 7 = 21 ports, 3 to a
    switch: 32 / 3 -> 11 (35). Spines sharing a switch carry only their own rail: no link joins two rails."""
    topo = build_cluster("dgx-h100", nodes=nodes, fabric="rail-only")
    assert topo.bom().switches_total == switches
    first = topo.num_nodes * topo.node.num_links
    src, dst = topo.link_src[first:], topo.link_dst[first:]
    rails = topo.endpoint_rail
    both = (rails[src] >= 0) & (rails[dst] >= 0)
    assert (rails[src][both] == rails[dst][both]).all()
    # a route never touches a leaf, spine link or NIC of another rail than its destination's
    gpus = topo.num_nodes * topo.gpus_per_node
    pairs = np.random.default_rng(0).integers(0, gpus, size=(4000, 2))
    pairs = pairs[pairs[:, 0] // topo.gpus_per_node != pairs[:, 1] // topo.gpus_per_node]
    routes = topo.route(pairs[:, 0], pairs[:, 1], np.arange(len(pairs)))
    assert_valid_routes(topo, pairs[:, 0], pairs[:, 1], routes)
    spine_hops = 0
    for (_, d), path in zip(pairs, routes, strict=True):
        fabric = path[path >= first]
        ends = np.concatenate([topo.link_src[fabric], topo.link_dst[fabric]])
        on = rails[ends]
        assert set(on[on >= 0].tolist()) == {topo.rail_of_gpu(int(d))}
        spine_hops += len(fabric) == 4
    assert spine_hops > 0


def test_calibrate_with_out_and_no_overlay_exits_1(tmp_path: Path) -> None:
    """The README's `calibrate ... --out calib.yaml` then `compare --calibration calib.yaml` failed at the second
    step with 'file not found': a fit that does not beat the catalog now says "no overlay written" and exits 1."""
    out = tmp_path / "calib.yaml"
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(app, ["calibrate", str(ILLUSTRATIVE), str(TWO_NODE), "--system", "dgx-h100",
                                          "--out", str(out), *extra])
        assert result.exit_code == 1, result.output
        assert not out.exists()
        assert f"no overlay written: {out} was not created" in result.stderr


def test_durations_in_minutes_never_read_as_milli() -> None:
    assert units.format_duration(68.34) == "1.139min"
    assert units.parse_duration(units.format_duration(68.34)) == pytest.approx(68.34, rel=1e-3)
    assert units.format_duration(0.5) == "500ms" and units.format_duration(7200) == "2h"


def _row(gpus: int, dp: int, days: float) -> dict[str, object]:
    plan = {"tp": 8, "pp": 1, "dp": dp, "cp": 1, "ep": 1, "vpp": 1, "mbs": 1, "zero": 1, "recompute": "none",
            "precision": "bf16"}
    return {"gpus": gpus, "system": "dgx-h100", "fabric": "ndr", "oversubscription": 1.0, "plan": plan,
            "time_to_train_s": days * 86400, "cost_usd": 1e6, "usd_per_million_tokens": 0.5, "mfu": 0.4,
            "bottleneck": "compute", "tie": True}


def test_size_table_always_shows_the_recommended_plan() -> None:
    """271 ties, the 64-GPU pick named only on the ties line: the pick is marked in the table, and added to it
    when the top rows leave it out."""
    from rich.console import Console

    from fabricsim.cli.size_cmd import ranked_table

    rows = [_row(128, 16, 10.0), _row(128, 16, 10.1)]
    pick = {k: v for k, v in _row(64, 8, 10.2).items() if k != "tie"}

    def text(table: object) -> str:
        console = Console(width=200, record=True)
        console.print(table)
        return console.export_text()

    shown = text(ranked_table(rows, "top 2 by time", pick))
    assert "pick" in shown and "64 dgx-h100" in shown and "t8 p1 d8" in shown
    assert shown.count("tie") == 2
    inside = text(ranked_table([*rows, {**pick, "tie": True}], "top 3 by time", pick))
    assert inside.count("pick") == 1 and inside.count("64 dgx-h100") == 1


def test_size_leaves_no_blank_line_on_stderr() -> None:
    result = CliRunner().invoke(app, ["size", "--model", "llama3-8b", "--tokens", "100B", "--deadline", "60d",
                                      "--gpus", "64", "--gbs", "512", "--systems", "dgx-h100", "--fabrics", "ndr",
                                      "--tp", "1", "--pp", "1"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
