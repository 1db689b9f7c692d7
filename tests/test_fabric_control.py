"""A shared, lossless fabric (issue 46): back-pressure, rate control's reaction time and traffic classes in the flow
simulator. Ideal max-min stays exactly as it was; every behaviour equals it where nothing is congested; a victim
that shares only an upstream link with an incast is held to the incast's per-flow rate without rate control."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.catalog import default_catalog
from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.network import FabricControl, FlowSet, fabric_control, simulate
from fabricsim.topology import build_cluster
from fabricsim.traffic import JobSpec, build_traffic, job_metrics, load_jobs_file, run_traffic

CATALOG = default_catalog()
GIB = 2.0**30


def _flowset(paths: list[list[int]], size: float | list[float] = GIB, stage: list[int] | None = None,
             releases: list[float] | None = None) -> FlowSet:
    """Flows over hand-made links (flow i crosses paths[i] in order)."""
    indptr = np.cumsum([0] + [len(p) for p in paths]).astype(np.int64)
    links = np.asarray([link for p in paths for link in p], dtype=np.int64)
    n = len(paths)
    stages = np.zeros(n, dtype=np.int64) if stage is None else np.asarray(stage, dtype=np.int64)
    release = np.zeros(int(stages.max()) + 1) if releases is None else np.asarray(releases, dtype=np.float64)
    return FlowSet(indptr, links, np.zeros(0), np.broadcast_to(np.asarray(size, float), (n,)).copy(), np.zeros(n),
                   stages, release)


def _control(num_links: int, reaction_s: float = np.inf, weights: list[float] | None = None,
             pausable: list[bool] | None = None) -> FabricControl:
    mask = np.ones(num_links, dtype=bool) if pausable is None else np.asarray(pausable)
    return FabricControl("test", True, reaction_s, mask, np.asarray(weights or [], dtype=np.float64))


def _rates(fs: FlowSet, capacity: np.ndarray, control: FabricControl | None) -> np.ndarray:
    res = simulate(fs, capacity, control=control, aggregate=False)
    out: np.ndarray = fs.size / (res.flow_drained - res.flow_start)
    return out


# Links: 0 sender A's uplink, 1 sender B's uplink, 2 sender C's uplink, 3 the hot receiver's downlink,
# 4 the victim receiver's downlink. A and B send to the hot receiver; A also sends to the victim receiver.
INCAST = [[0, 3], [1, 3], [2, 3], [0, 4]]
CAP = np.full(5, 100.0)


def test_victim_sharing_only_an_upstream_link_is_held_to_the_incast_rate_without_rate_control() -> None:
    ideal = _rates(_flowset(INCAST, 100.0), CAP, None)
    held = _rates(_flowset(INCAST, 100.0), CAP, _control(5))
    assert ideal[3] > 60  # alone on the victim's receiver: its uplink's spare capacity
    assert held[:3] == pytest.approx([100 / 3] * 3, rel=1e-6)  # the incast itself is unchanged
    assert held[3] == pytest.approx(100 / 3, rel=1e-6)  # HOL: paced by the incast flow it interleaves with


def test_rate_control_frees_the_victim_after_its_reaction_time() -> None:
    """Held for the reaction time, then at the fair share: the victim's bytes over time add up that way."""
    size = 100.0
    reaction = 0.2
    fs = _flowset(INCAST, size)
    res = simulate(fs, CAP, control=_control(5, reaction), aggregate=False)
    ideal = simulate(fs, CAP, aggregate=False)
    # held at 100/3 for 0.2 s (6.67 bytes), then at the ideal rate (200/3) for the rest
    fair = size / (ideal.flow_drained[3] - ideal.flow_start[3])
    expected = reaction + (size - 100 / 3 * reaction) / fair
    assert res.flow_drained[3] == pytest.approx(expected, rel=1e-4)
    assert res.flow_drained[3] > ideal.flow_drained[3]


def test_links_back_pressure_cannot_stop_carry_no_hol() -> None:
    """The GPU-side hop before the NIC is not paused (the NIC pulls): a victim that shares only that hop runs free."""
    paths = [[5, 0, 3], [1, 3], [2, 3], [5, 6, 4]]
    cap = np.full(7, 100.0)
    cap[5] = 300.0
    pausable = [True] * 5 + [False, True]
    held = _rates(_flowset(paths, 100.0), cap, _control(7, pausable=pausable))
    ideal = _rates(_flowset(paths, 100.0), cap, None)
    assert held[3] == pytest.approx(ideal[3], rel=1e-6)


def test_traffic_classes_split_a_link_by_weight_and_hand_on_what_one_leaves() -> None:
    # two flows of class 0 and one of class 1 on one link: weights 1:3 give class 1 three quarters
    fs = _flowset([[0], [0], [0]], 1.0, stage=[0, 0, 1], releases=[0.0, 0.0])
    from dataclasses import replace

    fs = replace(fs, stage_class=np.asarray([0, 1], dtype=np.int64))
    cap = np.array([100.0])
    res = simulate(fs, cap, control=_control(1, 0.0, [1.0, 3.0]), aggregate=False)
    first = fs.size / (res.flow_drained - res.flow_start)
    # class 1 at 75 until it has sent its byte, then class 0 takes the whole link
    assert res.flow_drained[2] == pytest.approx(1 / 75, rel=1e-6)
    assert first[0] == pytest.approx(first[1])
    assert res.flow_drained[0] == pytest.approx(1 / 75 + (1 - 12.5 / 75) / 50, rel=1e-6)


def test_ideal_behaviour_is_no_control_at_all() -> None:
    topo = build_cluster("dgx-h100", nodes=4, fabric="fat-tree")
    assert fabric_control(topo, CATALOG.congestion_control("ideal")) is None
    assert fabric_control(topo, None) is None
    assert fabric_control(topo, CATALOG.congestion_control("ib")) is not None


def _shift(topo_nodes: int, cc: str | None, ib: str = "ndr") -> float:
    topo = build_cluster("dgx-h100", nodes=topo_nodes, fabric="fat-tree", link=f"ib-{ib}" if ib in ("ndr", "hdr")
                         else ib)
    tr = build_traffic(topo, [JobSpec("perm", topo.num_gpus, "permutation", GIB, "packed", 0.0, 3)], [])
    behaviour = None if cc is None else CATALOG.congestion_control(cc)
    return float(job_metrics(run_traffic(topo, tr, "adaptive", behaviour))[0]["completion_time_s"])


@pytest.mark.parametrize(("cc", "ib"), [("ib", "ndr"), ("ib-nocc", "ndr"), ("roce-pfc", "eth-400g"),
                                         ("roce-dcqcn", "eth-400g"), ("spectrum-x", "eth-400g")])
def test_every_behaviour_equals_ideal_on_a_permutation_without_hot_spots(cc: str, ib: str) -> None:
    assert _shift(16, cc, ib) == pytest.approx(_shift(16, None, ib), rel=0.02)


def test_a_behaviour_of_the_other_fabric_kind_is_refused() -> None:
    topo = build_cluster("dgx-h100", nodes=2, fabric="fat-tree")
    with pytest.raises(SpecError, match="--cc"):
        fabric_control(topo, CATALOG.congestion_control("roce-dcqcn"))


def test_every_behaviour_has_a_source_and_ideal_is_instant() -> None:
    entries = CATALOG.congestion_controls
    assert {"ideal", "ib", "ib-nocc", "roce-pfc", "roce-dcqcn", "spectrum-x"} <= set(entries)
    assert entries["ideal"].reaction_s == 0
    for entry in entries.values():
        assert entry.source.strip()
        assert entry.verified or entry.notes  # an unverified figure says why


# ---- property tests ---------------------------------------------------------------------------------------------

paths_st = st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True), min_size=1, max_size=7)
sizes_st = st.lists(st.floats(1.0, 100.0), min_size=7, max_size=7)


@settings(max_examples=60, deadline=None)
@given(paths=paths_st, sizes=sizes_st, caps=st.lists(st.floats(10.0, 100.0), min_size=6, max_size=6),
       reaction=st.sampled_from([0.05, 0.5, np.inf]))
def test_back_pressure_never_speeds_any_flow(paths: list[list[int]], sizes: list[float], caps: list[float],
                                             reaction: float) -> None:
    fs = _flowset(paths, sizes[:len(paths)])
    cap = np.asarray(caps)
    ideal = simulate(fs, cap, aggregate=False)
    held = simulate(fs, cap, control=_control(6, reaction), aggregate=False)
    assert (held.flow_drained >= ideal.flow_drained * (1 - 1e-4)).all()
    assert held.delivered == pytest.approx(fs.size)


@settings(max_examples=60, deadline=None)
@given(paths=paths_st, sizes=sizes_st, caps=st.lists(st.floats(10.0, 100.0), min_size=6, max_size=6),
       classes=st.lists(st.integers(0, 1), min_size=7, max_size=7), low=st.floats(0.5, 4.0),
       raise_by=st.floats(1.0, 8.0), held=st.booleans())
def test_a_higher_qos_weight_never_slows_its_class(paths: list[list[int]], sizes: list[float], caps: list[float],
                                                   classes: list[int], low: float, raise_by: float,
                                                   held: bool) -> None:
    from dataclasses import replace

    n = len(paths)
    fs = _flowset(paths, sizes[:n], stage=list(range(n)), releases=[0.0] * n)
    fs = replace(fs, stage_class=np.asarray(classes[:n], dtype=np.int64))
    cap = np.asarray(caps)
    reaction = np.inf if held else 0.0
    before = simulate(fs, cap, control=_control(6, reaction, [1.0, low]), aggregate=False)
    after = simulate(fs, cap, control=_control(6, reaction, [1.0, low * raise_by]), aggregate=False)
    mine = np.asarray(classes[:n]) == 1
    if mine.any():
        assert after.flow_drained[mine].max() <= before.flow_drained[mine].max() * (1 + 1e-4)


@pytest.mark.parametrize("cc", ["ib", "ib-nocc"])
@settings(max_examples=8, deadline=None)
@given(pattern=st.sampled_from(["all_to_all", "incast", "permutation", "all_reduce"]), seed=st.integers(0, 50))
def test_adding_a_job_never_speeds_another(cc: str, pattern: str, seed: int) -> None:
    topo = build_cluster("dgx-h100", nodes=8, fabric="fat-tree", rail_optimized=False, tiers=2)
    a = JobSpec("a", 16, "all_to_all", 2.0**24, "scattered", 0.0, seed)
    b = JobSpec("b", 24, pattern, 2.0**24, "random", 0.0, seed)
    behaviour = CATALOG.congestion_control(cc)
    alone = job_metrics(run_traffic(topo, build_traffic(topo, [a], []), "ecmp", behaviour))[0]
    both = job_metrics(run_traffic(topo, build_traffic(topo, [a, b], []), "ecmp", behaviour))[0]
    assert both["completion_time_s"] >= alone["completion_time_s"] * (1 - 1e-4)


# ---- jobs files and the command line ------------------------------------------------------------------------------

QOS_JOBS = """storage_nodes: 2
classes: {training: 4, storage: 1}
jobs:
  - {name: train, gpus: 64, pattern: all_reduce, bytes: 64M, class: training}
background:
  - {kind: checkpoint_write, job: train, bytes: 256M, class: storage}
"""


def test_jobs_file_classes_and_their_errors(tmp_path: Path) -> None:
    good = tmp_path / "jobs.yaml"
    good.write_text(QOS_JOBS, encoding="utf-8")
    parsed = load_jobs_file(good)
    assert parsed.classes == {"default": 1.0, "training": 4.0, "storage": 1.0}
    assert parsed.jobs[0].traffic_class == "training" and parsed.background[0].traffic_class == "storage"
    bad = tmp_path / "bad.yaml"
    bad.write_text(QOS_JOBS.replace("class: storage", "class: bulk"), encoding="utf-8")
    with pytest.raises(SpecError, match="bulk"):
        load_jobs_file(bad)
    bad.write_text(QOS_JOBS.replace("storage: 1}", "storage: 0}"), encoding="utf-8")
    with pytest.raises(SpecError, match="positive"):
        load_jobs_file(bad)


def test_traffic_shows_congestion_spreading_and_qos_isolating_it(tmp_path: Path) -> None:
    """A checkpoint incast beside a training job on RoCE: without QoS, PFC alone spreads its congestion into the
    job (slower than under ideal sharing); DCQCN recovers most of it; a class of its own isolates the job."""
    import json

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(QOS_JOBS, encoding="utf-8")
    runner = CliRunner()

    def slowdown(*extra: str) -> float:
        res = runner.invoke(app, ["traffic", "--nodes", "10", "--ib", "eth-400g", "--jobs", str(jobs), "--json",
                                  *extra])
        assert res.exit_code == 0, res.output
        data = json.loads(res.output)
        return float(next(j["slowdown"] for j in data["jobs"] if j["name"] == "train"))

    ideal = slowdown("--no-qos")
    pfc = slowdown("--cc", "roce-pfc", "--no-qos")
    dcqcn = slowdown("--cc", "roce-dcqcn", "--no-qos")
    isolated = slowdown("--cc", "roce-pfc")
    assert pfc > 1.5 * ideal
    assert ideal <= dcqcn < pfc
    assert isolated < ideal


@pytest.mark.parametrize("argv", [
    ["traffic", "--nodes", "2", "--cc", "roce-pfc"],
    ["collective", "--nodes", "2", "--cc", "ib"],
    ["train", "--model", "llama3-8b", "--gpus", "16", "--tp", "8", "--cc", "ib"],
    ["traffic", "--nodes", "2", "--cc", "nonsense"],
])
def test_bad_congestion_options_are_one_line_errors(argv: list[str]) -> None:
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert "--cc" in res.output


WHATIF = ["whatif", "--model", "llama3-8b", "--system", "dgx-a100", "--ib", "hdr", "--gpus", "64", "--tp", "2",
          "--pp", "1", "--seq", "4096", "--gbs", "256", "--zero", "0", "--no-goodput", "--json"]


def test_whatif_swaps_sharp_and_refuses_flow_swaps_without_the_flow_simulator() -> None:
    import json

    runner = CliRunner()
    res = runner.invoke(app, [*WHATIF, "--swap", "sharp=on"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    swap = data["swaps"][0]
    assert swap["swap"] == "sharp=on" and swap["step_time_s"] < data["base_step_s"]
    assert swap["cost_delta_usd"] == 0  # the switches reduce already: no new part
    for bad, says in [("routing=adaptive", "--sim flow"), ("cc=ib", "--sim flow"), ("qos=maybe", "on or off"),
                      ("sharp=yes", "on or off")]:
        res = runner.invoke(app, [*WHATIF, "--swap", bad])
        assert res.exit_code == 2, res.output
        assert says in res.output
    res = runner.invoke(app, [*WHATIF, "--sim", "flow", "--swap", "cc=roce-dcqcn"])
    assert res.exit_code == 2 and "ethernet" in res.output


def test_train_sharp_reduces_in_the_switches_only_with_a_tree() -> None:
    import json

    runner = CliRunner()
    base = ["train", *WHATIF[1:]]

    def step(*extra: str) -> float:
        res = runner.invoke(app, [*base, *extra])
        assert res.exit_code == 0, res.output
        return float(json.loads(res.output)["step_time_s"])

    plain = step()
    assert step("--sharp") < plain
    assert step("--sharp", "--sharp-jobs", "2") == pytest.approx(plain)  # one tree per Quantum switch: taken


def test_train_with_traffic_classes_beside_it_shows_its_step_with_and_without_qos(tmp_path: Path) -> None:
    import json

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("storage_nodes: 2\nclasses: {training: 4, storage: 1}\nown_class: training\njobs:\n"
                    "  - {name: neighbour, gpus: 16, pattern: all_to_all, bytes: 64M, class: training}\n"
                    "background:\n  - {kind: checkpoint_write, job: neighbour, bytes: 256M, class: storage}\n",
                    encoding="utf-8")
    res = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--gpus", "16", "--tp", "8", "--seq", "2048",
                                   "--gbs", "64", "--sim", "flow", "--jobs", str(jobs), "--cluster-nodes", "6",
                                   "--ib", "eth-400g", "--cc", "roce-pfc", "--no-goodput", "--json"])
    assert res.exit_code == 0, res.output
    qos = json.loads(res.output)["qos"]
    assert qos["own_class"] == "training"
    assert qos["on_step_time_s"] <= qos["off_step_time_s"] * (1 + 1e-9)


def test_analytical_collective_keeps_its_share_beside_a_neighbour_and_qos_weights_raise_it() -> None:
    import json

    from fabricsim.collectives import background_share

    assert background_share(0.3) == pytest.approx(0.7)  # what the neighbour leaves
    assert background_share(0.9) == 0.5  # one queue: flow against flow
    assert background_share(0.9, (4.0, 1.0)) == pytest.approx(0.8)
    runner = CliRunner()
    argv = ["collective", "--nodes", "4", "--min", "1G", "--max", "1G", "--json"]

    def busbw(*extra: str) -> float:
        res = runner.invoke(app, [*argv, *extra])
        assert res.exit_code == 0, res.output
        return float(json.loads(res.output)["rows"][0]["busbw_bytes_per_s"])

    alone, shared, weighted = busbw(), busbw("--background", "0.8"), busbw("--background", "0.8", "--qos-weights",
                                                                             "4:1")
    assert shared < weighted < alone
    for bad in (["--background", "1.5"], ["--qos-weights", "4:1"], ["--background", "0.5", "--qos-weights", "x"],
                ["--background", "0.5", "--sim", "flow"]):
        assert runner.invoke(app, [*argv, *bad]).exit_code == 2


def test_size_retimes_each_network_best_plan_under_its_kind_of_behaviour() -> None:
    import json

    res = CliRunner().invoke(app, ["size", "--model", "llama3-8b", "--tokens", "100B", "--deadline", "30d",
                                   "--gpus", "64", "--systems", "dgx-h100", "--fabrics", "ndr,eth-400g",
                                   "--fabric-kinds", "fat-tree", "--oversubscription", "1", "--tp", "1", "--pp", "1",
                                   "--mbs", "1", "--zero", "2", "--recompute", "none", "--congestion", "ib,spectrum-x",
                                   "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["congestion"]
    assert {(r["fabric"], r["congestion_control"]) for r in rows} == {("ndr", "ib"), ("eth-400g", "spectrum-x")}
    designs = CliRunner().invoke(app, ["size", "--model", "llama3-8b", "--tokens", "100B", "--deadline", "30d",
                                       "--gpus", "64", "--systems", "dgx-h100", "--fabrics", "ndr",
                                       "--fabric-kinds", "rail-only,2-plane", "--oversubscription", "1", "--tp", "1",
                                       "--pp", "1", "--mbs", "1", "--zero", "2", "--recompute", "none",
                                       "--congestion", "ib", "--json"])  # the network of a design's label
    assert designs.exit_code == 0, designs.output
    assert {r["fabric"] for r in json.loads(designs.output)["congestion"]} == {"ndr rail-only", "ndr 2-plane"}
    for r in rows:
        assert r["flow_step_s"] >= r["flow_ideal_step_s"] * (1 - 1e-6)
        assert r["time_to_train_s"] > 0 and r["cost_usd"] > 0
    bad = CliRunner().invoke(app, ["size", "--model", "llama3-8b", "--congestion", "nonsense"])
    assert bad.exit_code == 2 and "--congestion" in bad.output
