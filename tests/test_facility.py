"""Issue 47 item 3: the facility as a constraint and an output. Cooling classes in the catalog, the facility layout
of a cluster (racks, facility power, floor), `size --facility` (once --power-cap, which still works) and
`--cooling`, a GPU power limit lowering its systems' power, GPU power operating points as a search dimension, and
whatif's gpu-power and cooling swaps."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import fabricsim
from fabricsim.catalog import default_catalog, with_gpu_power
from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.sizing import SizingSpec, rank, size
from fabricsim.topology import build_cluster, facility

SMALL: dict[str, Any] = dict(
    model="llama3-8b", tokens=1e11, gpus=(64, 128), systems=("dgx-h100",), fabrics=("ndr",), oversubscription=(1.0,),
    knobs={"tp": (8,), "pp": (1,), "mbs": (1,), "recompute": ("none",), "zero": (1,), "precision": ("bf16",)},
    gbs=(512,), goodput=None, objective="time", top=50)
API_SMALL: dict[str, Any] = dict(model="llama3-8b", tokens="1e11", gpus="64", systems="dgx-h100", fabrics="ndr",
                                 oversubscription="1", tp="8", pp="1", mbs="1", recompute="none", zero="1",
                                 precision="bf16", gbs="512", goodput=False, executor="serial", top=3)


def test_the_catalog_has_air_and_liquid_halls_each_figure_sourced() -> None:
    catalog = default_catalog()
    air, liquid = catalog.cooling_class("air"), catalog.cooling_class("liquid")
    assert air.hosts == ("air",) and set(liquid.hosts) == {"air", "liquid"}
    assert air.rack_power_w.value == 40_800 and liquid.rack_power_w.value >= 120_000
    for hall in (air, liquid):
        for figure in (hall.rack_power_w, hall.pue, hall.floor_m2_per_rack, hall.rack_units):
            assert figure.source.strip() and not figure.verified  # secondary or estimated: said so
    assert catalog.systems["gb200-nvl72"].cooling == catalog.systems["gb300-nvl72"].cooling == "liquid"
    assert catalog.systems["dgx-h100"].cooling == catalog.systems["dgx-b200"].cooling == "air"
    assert catalog.system("gb200-nvl72/64").cooling == "liquid"
    listed = CliRunner().invoke(app, ["catalog", "cooling", "--json"])
    halls = [e["id"] for e in json.loads(listed.stdout)["cooling"]]
    assert listed.exit_code == 0 and halls == ["air", "liquid", "liquid-hd"]
    with pytest.raises(SpecError, match="unknown cooling class"):
        catalog.cooling_class("immersion")


def test_servers_per_rack_are_bound_by_units_or_power_and_a_rack_scale_system_is_a_rack() -> None:
    catalog = default_catalog()
    air, liquid = catalog.cooling_class("air"), catalog.cooling_class("liquid")
    h100, b200, nvl72 = (catalog.system(s) for s in ("dgx-h100", "dgx-b200", "gb200-nvl72"))
    one = facility(h100, catalog.gpu(h100.gpu), 10, 1e6, air)
    assert one.nodes_per_rack == 4 and one.racks == 3  # 40.8 kW // 10.2 kW = 4 (42U // 8U = 5)
    assert one.facility_power_w == pytest.approx(1e6 * air.pue.value)
    assert one.floor_m2 == pytest.approx(3 * air.floor_m2_per_rack.value)
    assert one.racks_per_mw == pytest.approx(3 / (1e6 * air.pue.value / 1e6))
    assert facility(b200, catalog.gpu(b200.gpu), 8, 1e6, air).nodes_per_rack == 2  # 14.3 kW servers
    assert facility(b200, catalog.gpu(b200.gpu), 8, 1e6, liquid).nodes_per_rack == 4  # 48U // 10U, 132 // 14.3
    racks = facility(nvl72, catalog.gpu(nvl72.gpu), 3, 4e5, liquid)
    assert racks.racks == 3 and racks.rack_power_w == 120_000 and racks.hostable
    joined = catalog.system("gb200-nvl72@144")
    assert facility(joined, catalog.gpu(joined.gpu), 2, 5e5, liquid).racks == 4


def test_an_air_hall_refuses_a_liquid_cooled_system_with_its_reason() -> None:
    catalog = default_catalog()
    nvl72 = catalog.system("gb200-nvl72")
    refused = facility(nvl72, catalog.gpu(nvl72.gpu), 2, 3e5, catalog.cooling_class("air"))
    assert not refused.hostable and refused.racks is None
    assert "needs liquid cooling" in (refused.reason or "") and "'air'" in (refused.reason or "")
    result = fabricsim.size(**{**API_SMALL, "gpus": "72", "systems": "gb200-nvl72", "gbs": "288"}, cooling="air")
    assert result.rows == [] and result.note is not None and "needs liquid cooling" in result.note
    cli = CliRunner().invoke(app, ["size", "--model", "llama3-8b", "--tokens", "1e11", "--gpus", "72", "--systems",
                                   "gb200-nvl72", "--fabrics", "ndr", "--gbs", "288", "--no-goodput", "--executor",
                                   "serial", "--cooling", "air"])
    assert cli.exit_code == 2 and "needs liquid cooling" in cli.output


def test_a_gpu_power_limit_lowers_each_system_by_its_gpus_share() -> None:
    catalog = default_catalog()
    limited = with_gpu_power(catalog, "h100-sxm", 500)
    rated = catalog.systems["dgx-h100"]
    mine = limited.systems["dgx-h100"]
    assert rated.power_w is not None and mine.power_w == pytest.approx(rated.power_w - 8 * (700 - 500))
    assert mine.rated_power_w == rated.power_w and limited.systems["dgx-b200"] == catalog.systems["dgx-b200"]
    base = build_cluster("dgx-h100", nodes=4, fabric="fat-tree", link="ib-ndr", catalog=catalog).bom()
    bill = build_cluster("dgx-h100", nodes=4, fabric="fat-tree", link="ib-ndr", catalog=limited).bom()
    assert base.power_w is not None and bill.power_w == pytest.approx(base.power_w - 4 * 8 * 200)
    assert any("500 W board power limit" in n for n in bill.notes)
    gb = with_gpu_power(catalog, "gb200", 1000)
    assert gb.system("gb200-nvl72@144").power_w == pytest.approx(catalog.system("gb200-nvl72@144").power_w
                                                                 - 144 * 200)


@lru_cache(maxsize=1)
def _frame() -> Any:
    """Every plan of a small search with no constraint (exhaustive), at the rating and at 0.7 of it."""
    return size(SizingSpec(**SMALL, gpu_power_points=(1.0, 0.7)), executor="serial", exhaustive=True).frame


@settings(max_examples=25, deadline=None)
@given(st.floats(min_value=5e4, max_value=3e5))
def test_size_facility_never_returns_a_cluster_above_it(limit: float) -> None:
    spec = SizingSpec(**SMALL, gpu_power_points=(1.0, 0.7), power_cap_w=limit)
    ranked = rank(_frame(), spec)
    assert (ranked["power_w"] * spec.pue <= limit).all()


@settings(max_examples=25, deadline=None)
@given(st.floats(min_value=5e4, max_value=3e5), st.floats(min_value=1.0, max_value=3.0))
def test_more_facility_power_never_a_slower_best_plan(limit: float, more: float) -> None:
    def best(watts: float) -> float:
        ranked = rank(_frame(), SizingSpec(**SMALL, gpu_power_points=(1.0, 0.7), power_cap_w=watts))
        return float("inf") if ranked.empty else float(ranked["time_to_train_s"].iloc[0])

    assert best(limit * more) <= best(limit)


def test_the_search_itself_keeps_to_the_facility_and_the_hall() -> None:
    result = size(SizingSpec(**SMALL, power_cap_w=150e3, cooling="liquid", pue=1.2), executor="serial")
    assert len(result.ranked) and (result.ranked["power_w"] * 1.2 <= 150e3).all()
    rows = result.to_json()["results"]
    block = rows[0]["facility"]
    assert block["cooling"] == "liquid" and block["pue"] == 1.2 and block["hostable"]
    assert block["facility_power_w"] == pytest.approx(rows[0]["power_w"] * 1.2) and block["racks"] >= 1


def test_operating_points_pick_more_gpus_at_lower_power_when_the_facility_binds() -> None:
    """128 GPUs at full power need ~223 kW of facility, at 0.7 of it ~188 kW; 64 at full ~108 kW: under 200 kW the
    fastest plan is 128 GPUs at 490 W, faster than the 64 a single rated point allows."""
    limit = 200e3
    rated = size(SizingSpec(**SMALL, power_cap_w=limit), executor="serial")
    points = size(SizingSpec(**SMALL, power_cap_w=limit, gpu_power_points=(1.0, 0.7)), executor="serial")
    best_rated, best = rated.ranked.iloc[0], points.ranked.iloc[0]
    assert int(best_rated["gpus"]) == 64 and float(best_rated["gpu_power_w"]) == 700
    assert int(best["gpus"]) == 128 and float(best["gpu_power_w"]) == pytest.approx(490)
    assert best["time_to_train_s"] < best_rated["time_to_train_s"]
    assert points.to_json()["results"][0]["gpu_power_w"] == pytest.approx(490)


def test_a_gpu_without_a_power_curve_runs_at_its_rating_with_a_note() -> None:
    spec = SizingSpec(**{**SMALL, "systems": ("dgx-h100", "pcie-h100-8gpu"), "gpus": (64,)},
                      gpu_power_points=(1.0, 0.8))
    result = size(spec, executor="serial")
    powers = result.frame.groupby("system")["gpu_power_w"].unique()
    assert sorted(powers["pcie-h100-8gpu"]) == [350.0] and sorted(powers["dgx-h100"]) == [560.0, 700.0]
    skipped = result.to_json()["gpu_power_points"]["skipped"]
    assert len(skipped) == 1 and "pcie-h100-8gpu" in skipped[0] and "no clock-vs-power" in skipped[0]


def test_gpu_power_points_parse_and_refuse_bad_input() -> None:
    from fabricsim.sizing import parse_power_points

    assert parse_power_points("rated,0.85,70%,500W", "--gpu-power-points") == (1.0, 0.85, 0.7, 500.0)
    for bad in ("fast", "0", "-1", "0.5W"):
        with pytest.raises(SpecError, match=r"operating point|not rated"):
            parse_power_points(bad, "--gpu-power-points")
    with pytest.raises(SpecError, match="give one"):
        fabricsim.size(**API_SMALL, gpu_power="500", gpu_power_points="rated,0.7")


def test_whatif_prices_gpu_power_and_cooling_swaps() -> None:
    result = fabricsim.whatif(model="llama3-8b", system="dgx-h100", gpus=64, tp=8, pp=1, goodput=False,
                              swap=["gpu-power=500", "cooling=liquid", "cooling=air"])
    swaps = {s["swap"]: s for s in result.data["swaps"]}
    base = result.data["base_facility"]
    limited = swaps["gpu-power=500"]
    assert limited["facility"]["it_power_w"] == pytest.approx(base["it_power_w"] - 8 * 8 * 200)  # 8 nodes
    assert limited["step_time_s"] > result.data["base_step_s"] and limited["energy_per_step_j"] is not None
    assert swaps["cooling=liquid"]["facility"]["pue"] < swaps["cooling=air"]["facility"]["pue"]
    assert all(s["refused"] is None for s in swaps.values())
    rack = fabricsim.whatif(model="llama3-8b", system="gb200-nvl72", gpus=72, tp=8, pp=1, gbs=288,
                            swap=["cooling=air", "cooling=liquid"])
    rows = {s["swap"]: s for s in rack.data["swaps"]}
    assert "needs liquid cooling" in rows["cooling=air"]["refused"] and rows["cooling=liquid"]["refused"] is None
    with pytest.raises(SpecError, match="cooling=immersion"):
        fabricsim.whatif(model="llama3-8b", system="dgx-h100", gpus=64, tp=8, swap=["cooling=immersion"])


def test_old_power_cap_inputs_still_mean_the_facility_limit(tmp_path: Path) -> None:
    old = fabricsim.size(**API_SMALL, power_cap="200kW")
    new = fabricsim.size(**API_SMALL, facility="200kW")
    assert old.data["constraints"]["power_cap_w"] == new.data["constraints"]["facility_w"] == 200e3
    assert old.rows == new.rows
    run = tmp_path / "run.yaml"
    run.write_text("power_cap: 1kW\n")
    assert "power cap" in (fabricsim.size(**API_SMALL, config=str(run)).note or "")
    with pytest.raises(SpecError, match="disagree"):
        fabricsim.size(**API_SMALL, power_cap="1MW", facility="2MW")
    cli = CliRunner().invoke(app, ["size", "--model", "llama3-8b", "--tokens", "1e11", "--gpus", "64", "--systems",
                                   "dgx-h100", "--fabrics", "ndr", "--tp", "8", "--pp", "1", "--mbs", "1", "--gbs",
                                   "512", "--no-goodput", "--executor", "serial", "--power-cap", "1kW"])
    assert cli.exit_code == 2 and "facility power cap of 0.001 MW" in cli.output
