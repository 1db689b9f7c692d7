"""Stragglers and degraded parts (issue 46 item 4): `--degrade` on train, whatif, collective and traffic. A slow GPU
paces the synchronous step, a slow NIC link the rings through it, a failed fabric link is routed around; a
degraded part never makes anything faster; whatif prices repairing each."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.topology import Degradation, build_cluster, degraded, parse_degrade, selected_links
from fabricsim.traffic import JobSpec, build_traffic, job_metrics, run_traffic

TRAIN = ["train", "--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "2", "--seq", "4096", "--gbs", "512",
         "--no-goodput", "--json"]


def _json(argv: list[str]) -> dict:
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_parse_degrade_reads_every_form_and_refuses_the_rest() -> None:
    d = parse_degrade(["gpu=0.8@3", "node=0.7@5", "link=0.5@node2/nic1", "link=0@leaf2-spine0"])
    assert d == Degradation(((3, 0.8),), ((5, 0.7),), (("node2/nic1", 0.5), ("leaf2-spine0", 0.0)))
    assert d.compute_fraction == 0.7
    assert not parse_degrade(None) and not parse_degrade([])
    for bad in ["gpu=1.5@3", "gpu=0@3", "gpu=0.8", "link=0.5@spine", "link=0@node3", "cpu=0.5@1", "gpu=x@1"]:
        with pytest.raises(SpecError, match="--degrade"):
            parse_degrade([bad])


def test_link_selectors_name_both_directions() -> None:
    topo = build_cluster("dgx-h100", nodes=64, fabric="fat-tree")
    assert len(selected_links(topo, "node3")) == 2 * 8  # 8 NICs, up and down
    assert len(selected_links(topo, "node3/nic1")) == 2
    assert len(selected_links(topo, "leaf0-spine0")) >= 2
    with pytest.raises(SpecError, match="tiers"):
        selected_links(topo, "pod0-spine0")
    with pytest.raises(SpecError, match="node"):
        selected_links(topo, "node99")


def test_a_straggler_paces_the_step_and_a_slow_nic_the_collectives() -> None:
    base = _json(TRAIN)["step_time_s"]
    slow_gpu = _json([*TRAIN, "--degrade", "gpu=0.8@3"])
    assert slow_gpu["degraded"] == ["gpu 3 at 0.8"]
    assert base < slow_gpu["step_time_s"] <= base / 0.8 * (1 + 1e-9)  # compute at 0.8, the network as it was
    slow_nic = _json([*TRAIN, "--degrade", "link=0.25@node1"])["step_time_s"]
    assert slow_nic > base
    healthy_elsewhere = _json([*TRAIN, "--degrade", "link=0.25@node1", "--degrade", "gpu=1@0"])["step_time_s"]
    assert healthy_elsewhere == pytest.approx(slow_nic)


def test_collective_with_a_half_rate_nic_halves_the_network_bound_bandwidth_both_ways() -> None:
    argv = ["collective", "--nodes", "4", "--min", "1G", "--max", "1G", "--json"]
    for sim in ([], ["--sim", "flow"]):
        full = _json([*argv, *sim])["rows"][0]["busbw_bytes_per_s"]
        half = _json([*argv, *sim, "--degrade", "link=0.5@node1/nic3"])["rows"][0]["busbw_bytes_per_s"]
        assert half == pytest.approx(full / 2, rel=0.15)


def test_a_failed_fabric_link_is_routed_around() -> None:
    topo = build_cluster("dgx-h100", nodes=64, fabric="fat-tree")
    tr = build_traffic(topo, [JobSpec("perm", topo.num_gpus, "permutation", 2.0**30, "packed", 0.0, 1)], [])
    healthy_run = run_traffic(topo, tr, "ecmp")
    healthy = job_metrics(healthy_run)[0]["completion_time_s"]
    dead = selected_links(topo, "leaf0-spine0")
    assert np.isin(healthy_run.flowset.links, dead).any()  # some flows hash onto the link before it fails
    broken = degraded(topo, parse_degrade(["link=0@leaf0-spine0"]))
    for routing in ("ecmp", "adaptive", "spray"):
        run = run_traffic(broken, tr, routing)
        fs = run.flowset
        live = np.ones(len(fs.links), dtype=bool) if len(fs.weights) == 0 else fs.weights > 0
        assert (broken.link_capacity[fs.links[live]] > 0).all()
        assert run.result.delivered == pytest.approx(fs.size)
        # no bound against the healthy run: a flow ECMP rehashes off a failed link may land off a collision too
        assert np.isfinite(job_metrics(run)[0]["completion_time_s"]) and healthy > 0


@settings(max_examples=12, deadline=None)
@given(factor=st.floats(0.05, 1.0), node=st.integers(0, 15), nic=st.integers(0, 7),
       pattern=st.sampled_from(["all_to_all", "all_reduce", "permutation"]),
       routing=st.sampled_from(["ecmp", "adaptive"]))
def test_a_degraded_link_never_speeds_a_step(factor: float, node: int, nic: int, pattern: str, routing: str) -> None:
    topo = build_cluster("dgx-h100", nodes=16, fabric="fat-tree", tiers=2, oversubscription=2)
    tr = build_traffic(topo, [JobSpec("job", topo.num_gpus, pattern, 2.0**24, "packed", 0.0, 2)], [])
    healthy = job_metrics(run_traffic(topo, tr, routing))[0]["completion_time_s"]
    slow = degraded(topo, parse_degrade([f"link={factor}@node{node}/nic{nic}"]))
    assert job_metrics(run_traffic(slow, tr, routing))[0]["completion_time_s"] >= healthy * (1 - 1e-6)


def test_whatif_prices_a_spare_node_against_a_new_cable() -> None:
    data = _json(["whatif", "--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "2", "--seq", "4096",
                  "--gbs", "512", "--no-goodput", "--json", "--degrade", "gpu=0.8@3", "--degrade", "link=0.25@node1",
                  "--swap", "repair=gpu", "--swap", "repair=link", "--swap", "repair=all"])
    swaps = {s["swap"]: s for s in data["swaps"]}
    assert swaps["repair=gpu"]["step_time_s"] < data["base_step_s"]
    assert swaps["repair=link"]["step_time_s"] < data["base_step_s"]
    assert swaps["repair=all"]["step_time_s"] < min(swaps["repair=gpu"]["step_time_s"],
                                                     swaps["repair=link"]["step_time_s"]) * (1 + 1e-9)
    assert 0 < swaps["repair=link"]["cost_delta_usd"] < swaps["repair=gpu"]["cost_delta_usd"]
    assert data["degraded"] == ["gpu 3 at 0.8", "link node1 at 0.25"]


@pytest.mark.parametrize(("argv", "says"), [
    (["traffic", "--nodes", "2", "--degrade", "gpu=0.5@1"], "train"),
    (["collective", "--nodes", "2", "--degrade", "node=0.5@1"], "train"),
    (["collective", "--nodes", "2", "--degrade", "link=0.5@leaf0-spine0"], "--sim flow"),
    ([*TRAIN[:-2], "--degrade", "link=0.5@leaf0-spine0"], "--sim flow"),
    ([*TRAIN[:-2], "--degrade", "gpu=0.5@64"], "gpu 64"),
    (["whatif", "--model", "llama3-8b", "--gpus", "8", "--swap", "repair=gpu"], "no GPU is slow"),
])
def test_bad_degradations_are_one_line_errors(argv: list[str], says: str) -> None:
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert says in res.output


def test_sharp_trees_are_a_switch_resource() -> None:
    """One streaming tree per Quantum (HDR) switch: a second job on the same leaves falls back to the ring."""
    argv = ["collective", "--system", "dgx-a100", "--nodes", "4", "--ib", "hdr", "--min", "1G", "--max", "1G",
            "--algo", "collnet", "--json"]
    alone = _json([*argv, "--sharp-jobs", "1"])
    shared = _json([*argv, "--sharp-jobs", "2"])
    assert alone["sharp"] == {"tree": True, "jobs": 1} and alone["rows"][0]["algorithm"] == "collnet"
    assert shared["sharp"]["tree"] is False and "qm8700" in shared["sharp"]["note"]
    assert shared["rows"][0]["algorithm"] != "collnet"
    assert shared["rows"][0]["busbw_bytes_per_s"] < alone["rows"][0]["busbw_bytes_per_s"]
    ndr = _json(["collective", "--nodes", "4", "--min", "1G", "--max", "1G", "--sharp-jobs", "32", "--json"])
    assert ndr["sharp"]["tree"] is True  # one per port on Quantum-2: a leaf's 32 uplinks
    assert _json(["collective", "--nodes", "4", "--min", "1G", "--max", "1G", "--sharp-jobs", "33",
                  "--json"])["sharp"]["tree"] is False


def test_a_degraded_nic_outside_the_job_is_refused() -> None:
    for argv in (["collective", "--nodes", "2", "--degrade", "link=0.5@node5"], [*TRAIN[:-2], "--degrade",
                                                                                  "link=0.5@node9"]):
        res = CliRunner().invoke(app, argv)
        assert res.exit_code == 2 and "node" in res.output, res.output
