"""Auto knobs in `fabricsim train`: unset vpp, mbs, recompute and zero are chosen as the fastest setting that fits,
set knobs are kept, and the output says what the search chose."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from typer.testing import CliRunner

from fabricsim.catalog import Catalog
from fabricsim.cli import app
from fabricsim.comm.cluster import Cluster
from fabricsim.model.presets import load_model
from fabricsim.training.auto import AUTO_KNOBS, knob_values, search_knobs
from fabricsim.training.memory import memory_report
from fabricsim.training.plan import ParallelPlan
from fabricsim.training.step import predict_training

RUN = {"gpus": 1024, "tp": 8, "pp": 4, "seq": 8192, "gbs": 1024}
AUTO = dict.fromkeys(AUTO_KNOBS)


def _cluster(catalog: Catalog, system: str = "dgx-h100") -> Cluster:
    return Cluster(catalog.system(system), catalog=catalog)


def test_candidate_values_follow_the_rules() -> None:
    """llama3-70b, pp=4: vpp divides 80/4 = 20; mbs powers of two dividing gbs/dp = 1024/32 = 32, up to 8;
    ZeRO-3 only without pipeline parallelism."""
    model = load_model("llama3-70b")
    base = ParallelPlan.build(**RUN)
    assert knob_values(model, base, "virtual_stages") == [1, 2, 4, 5, 10, 20]
    assert knob_values(model, base, "mbs") == [1, 2, 4, 8]
    assert knob_values(model, base, "recompute") == ["none", "selective", "full"]
    assert knob_values(model, base, "zero") == [0, 1, 2]
    flat = ParallelPlan.build(gpus=64, tp=8, seq=4096, gbs=24)  # gbs/dp = 3: only mbs 1
    assert knob_values(model, flat, "virtual_stages") == [1]
    assert knob_values(model, flat, "mbs") == [1]
    assert knob_values(model, flat, "zero") == [0, 1, 2, 3]


def test_search_is_the_fastest_fitting_setting_by_brute_force(catalog: Catalog) -> None:
    """Every candidate timed by hand: the search's choice fits and no fitting candidate is faster."""
    model = load_model("llama3-8b")
    cluster = _cluster(catalog)
    fields: dict[str, Any] = {"gpus": 64, "tp": 8, "seq": 8192, "gbs": 64, **AUTO}
    choice = search_knobs(model, fields, cluster)
    assert choice.fits and choice.prediction.memory.fits
    fastest = min(
        predict_training(model, plan, cluster).step_time_s
        for mbs in (1, 2, 4, 8) for recompute in ("none", "selective", "full") for zero in (0, 1, 2, 3)
        if memory_report(model, plan := ParallelPlan.build(gpus=64, tp=8, seq=8192, gbs=64, mbs=mbs,
                                                           recompute=recompute, zero=zero),
                         catalog.gpu("h100-sxm")).fits
    )
    assert choice.prediction.step_time_s == pytest.approx(fastest, rel=1e-12)
    assert set(choice.chosen) == {"vpp", "mbs", "recompute", "zero"}
    assert choice.chosen["vpp"] == 1  # pp = 1: no interleaving


def test_ties_go_to_the_simpler_setting(catalog: Catalog) -> None:
    """ZeRO-1 and ZeRO-2 time the same (gradient sharding moves no extra bytes here); with room in memory the
    search keeps ZeRO-1, and recompute stays off."""
    model = load_model("llama3-8b")
    choice = search_knobs(model, {"gpus": 64, "tp": 8, "seq": 4096, "gbs": 256, "mbs": 1, "virtual_stages": None,
                                  "recompute": None, "zero": None}, _cluster(catalog))
    assert choice.chosen == {"vpp": 1, "recompute": "none", "zero": 1}


def test_set_knobs_are_kept(catalog: Catalog) -> None:
    model = load_model("llama3-70b")
    choice = search_knobs(model, {**RUN, **AUTO, "mbs": 1, "recompute": "full"}, _cluster(catalog))
    assert choice.plan.mbs == 1 and choice.plan.recompute == "full"
    assert set(choice.chosen) == {"vpp", "zero"}
    none_left = search_knobs(model, {**RUN, "mbs": 1, "virtual_stages": 1, "recompute": "selective", "zero": 1},
                             _cluster(catalog))
    assert none_left.chosen == {} and none_left.candidates == 1


def test_memory_forces_recompute(catalog: Catalog) -> None:
    """llama3-70b on 64 GPUs with tp=8 and no pipeline: 70B x 2 bytes / 8 = 17.5 GB of weights per GPU, and at
    seq 8192 without recompute the activations of one sequence are ~2.7 GB per layer x 80 layers / 8: the search
    must turn on recompute or shard more (ZeRO-2/3), never return a plan that does not fit."""
    model = load_model("llama3-70b")
    choice = search_knobs(model, {"gpus": 64, "tp": 8, "seq": 8192, "gbs": 64, **AUTO}, _cluster(catalog))
    assert choice.fits
    plain = ParallelPlan.build(gpus=64, tp=8, seq=8192, gbs=64, mbs=8, recompute="none", zero=1)
    assert not memory_report(model, plain, catalog.gpu("h100-sxm")).fits


def test_nothing_fits_reports_the_smallest_shortfall(catalog: Catalog) -> None:
    """llama3-405b on 8 GPUs cannot fit in any setting (810 GB of bf16 weights alone over 8 x 80 GiB with tp=8
    and no ZeRO-3 sharding beyond dp=1): the search says so and returns the closest setting."""
    model = load_model("llama3-405b")
    choice = search_knobs(model, {"gpus": 8, "tp": 8, "seq": 4096, "gbs": 8, **AUTO}, _cluster(catalog))
    assert not choice.fits
    assert "no setting" in choice.note() and "short by" in choice.note()
    assert choice.prediction.memory.shortfall_bytes > 0
    assert choice.chosen["recompute"] == "full" and choice.chosen["mbs"] == 1


def test_auto_search_is_fast(catalog: Catalog) -> None:
    """216 settings of llama3-70b on 1024 GPUs are searched well under a second (memory first, then timing)."""
    model = load_model("llama3-70b")
    start = time.perf_counter()
    choice = search_knobs(model, {**RUN, **AUTO}, _cluster(catalog))
    assert time.perf_counter() - start < 2.0
    assert choice.candidates == 216 and 0 < choice.timed < choice.candidates


def test_train_cli_says_what_it_chose(runner: CliRunner) -> None:
    args = ["train", "--model", "llama3-70b", "--gpus", "1024", "--tp", "8", "--pp", "4", "--seq", "8192",
            "--gbs", "1024"]
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "auto: chose" in table.output
    data = json.loads(runner.invoke(app, [*args, "--recompute", "selective", "--json"]).output)
    assert data["chosen"]["chosen_by"] == "search" and data["chosen"]["fits"] is True
    assert set(data["chosen"]["knobs"]) == {"vpp", "mbs", "zero"}
    assert data["plan"]["recompute"] == "selective"
    assert data["plan"]["vpp"] == data["chosen"]["knobs"]["vpp"]
    fixed = json.loads(runner.invoke(app, [*args, "--recompute", "none", "--mbs", "1", "--vpp", "1", "--zero", "1",
                                           "--json"]).output)
    assert fixed["chosen"]["chosen_by"] == "user" and fixed["chosen"]["knobs"] == {}


def test_train_cli_bad_knob_is_one_line(runner: CliRunner) -> None:
    bad = runner.invoke(app, ["train", "--model", "llama3-8b", "--gpus", "8", "--tp", "8", "--zero", "7"])
    assert bad.exit_code == 2
    assert "Traceback" not in bad.output
