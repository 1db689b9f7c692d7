"""`fabricsim traffic`: JSON shape, jobs files with background traffic, plots, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricsim.cli import app

TOPO = ["traffic", "--nodes", "8", "--fabric", "fat-tree", "--ib", "ndr", "--tiers", "2"]


def _run(runner: CliRunner, *args: str) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(app, [*TOPO, *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_json_shape(runner: CliRunner) -> None:
    data = _run(runner, "--pattern", "permutation", "--bytes", "64M", "--routing", "spray")
    assert set(data) >= {"jobs", "links", "flows", "events", "wall_s"}
    job = data["jobs"][0]
    assert set(job) >= {"name", "completion_time_s", "bytes_per_s_per_gpu", "fraction_of_line_rate"}
    assert data["flows"] == 64
    assert set(data["links"]) == {"by_tier", "hottest"}
    assert "leaf->spine" in data["links"]["by_tier"] or "nic->leaf" in data["links"]["by_tier"]


def test_jobs_file_with_background_and_plot(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text("0,1000000\n2000000,0\n")
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "storage_nodes: 1\n"
        "jobs:\n"
        "  - {name: a, gpus: 16, placement: scattered, pattern: all_to_all, bytes: 16M}\n"
        "  - {name: b, gpus: 16, placement: random, pattern: all_reduce, bytes: 16M, seed: 4}\n"
        "  - {name: c, gpus: 2, pattern: m.csv, bytes: 1}\n"
        "background:\n"
        "  - {kind: checkpoint_write, job: a, bytes: 8M}\n")
    png = tmp_path / "t.png"
    data = _run(runner, "--jobs", str(jobs), "--plot", str(png))
    names = [j["name"] for j in data["jobs"]]
    assert names[:3] == ["a", "b", "c"] and names[3].startswith("checkpoint_write")
    assert all(j["slowdown"] >= 1 - 1e-9 for j in data["jobs"] if j["name"] in "abc")
    assert png.stat().st_size > 0


@pytest.mark.parametrize(("args", "message"), [
    (["--pattern", "zigzag"], "unknown pattern"),
    (["--gpus", "4096"], "needs 4096 GPUs"),
    (["--routing", "random"], "unknown routing"),
    (["--placement", "diagonal"], "unknown placement"),
])
def test_bad_input_is_one_line(runner: CliRunner, args: list[str], message: str) -> None:
    result = runner.invoke(app, [*TOPO, *args])
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_malformed_matrix_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2\n3\n")
    result = runner.invoke(app, [*TOPO, "--pattern", str(bad), "--gpus", "2"])
    assert result.exit_code == 2
    assert "matrix" in result.output and len(result.output.strip().splitlines()) == 1
    bad.write_text("0,1\n1,0\n")
    result = runner.invoke(app, [*TOPO, "--pattern", str(bad), "--gpus", "3"])
    assert result.exit_code == 2 and "2x2" in result.output


def test_bad_jobs_file_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {gpus: 8, pattern: ring, bytes: 1M, colour: red}\n")
    result = runner.invoke(app, [*TOPO, "--jobs", str(jobs)])
    assert result.exit_code == 2 and "unknown key 'colour'" in result.output


def test_collective_sim_flow_times_the_schedule_on_the_fabric() -> None:
    """--sim flow runs the ring's schedule on the built fat tree: a 4-node ring all-reduce at 1 GiB reaches the
    8 NICs' line rate per node (400 GB/s busbw, within the pipeline's latency), bound by InfiniBand; in-network
    algorithms are refused in one line."""
    import json as _json

    from typer.testing import CliRunner as _Runner

    from fabricsim.cli import app as _app

    runner = _Runner()
    args = ["collective", "--system", "dgx-h100", "--nodes", "4", "--op", "all_reduce", "--min", "1G", "--max", "1G",
            "--sim", "flow", "--json"]
    out = runner.invoke(_app, args)
    assert out.exit_code == 0, out.output
    row = _json.loads(out.output)["rows"][0]
    analytical = _json.loads(runner.invoke(_app, [*args[:-3], "--algo", "ring", "--json"]).output)["rows"][0]
    # one model of a link (issue 25): with nothing else on the fabric the flow run is the analytical ring
    assert row["protocol"] == analytical["protocol"] == "Simple" and row["bound"] == "infiniband"
    assert row["busbw_bytes_per_s"] == pytest.approx(analytical["busbw_bytes_per_s"], rel=0.02)
    assert row["congestion_s"] <= 0.02 * row["time_s"]
    bad = runner.invoke(_app, [*args[:-1], "--algo", "nvls"])
    assert bad.exit_code == 2 and bad.output.startswith("error:") and "in the network" in bad.output


def test_train_sim_flow_prices_every_data_parallel_group_on_the_fabric() -> None:
    """Llama 3 8B pure DP on 64 DGX H100 nodes: the flow simulator times the gradient all-reduce of the whole
    job on the built fat tree. At 1:1 it is within 15% of the analytical model (line rates vs the catalog's
    link efficiency); at 2:1 NCCL's rail-aligned rings cross the spine only at leaf boundaries, so the flow
    result barely moves while the analytical model (every byte charged at 2:1) slows down."""
    from fabricsim.catalog import load_catalog
    from fabricsim.comm.cluster import Cluster
    from fabricsim.errors import SpecError
    from fabricsim.model.presets import load_model
    from fabricsim.training.plan import ParallelPlan
    from fabricsim.training.step import predict_training

    cat = load_catalog()
    plan = ParallelPlan.build(gpus=512, seq=4096, gbs=512, zero=0, overlap_grad_reduce=False)
    model = load_model("llama3-8b")

    def network_s(sim: str, over: float) -> float:
        cluster = Cluster(cat.system("dgx-h100"), oversubscription=over, catalog=cat, sim=sim)
        return predict_training(model, plan, cluster).breakdown.exposed["infiniband"]

    flat_flow, flat_analytical = network_s("flow", 1.0), network_s("analytical", 1.0)
    assert flat_flow == pytest.approx(flat_analytical, rel=0.15)
    assert network_s("flow", 2.0) < 1.1 * flat_flow < network_s("analytical", 2.0)
    with pytest.raises(SpecError, match="unknown simulator"):
        Cluster(cat.system("dgx-h100"), catalog=cat, sim="packet")


def test_train_sim_flow_moe_all_to_all_across_nodes() -> None:
    from fabricsim.catalog import load_catalog
    from fabricsim.comm.cluster import Cluster
    from fabricsim.model.presets import load_model
    from fabricsim.training.plan import ParallelPlan
    from fabricsim.training.step import predict_training

    cat = load_catalog()
    plan = ParallelPlan.build(gpus=32, tp=1, ep=8, seq=4096, gbs=32, order="tp-cp-dp-ep-pp")
    model = load_model("mixtral-8x7b")
    flow = predict_training(model, plan, Cluster(cat.system("dgx-h100"), catalog=cat, sim="flow"))
    analytical = predict_training(model, plan, Cluster(cat.system("dgx-h100"), catalog=cat))
    assert flow.breakdown.exposed["infiniband"] > 0
    assert flow.step_time_s == pytest.approx(analytical.step_time_s, rel=0.3)


def test_train_sim_flow_with_other_jobs_sharing_the_leaves(tmp_path: Path) -> None:
    """Llama 3 8B DP on 48 of 64 DGX H100 nodes (2:1): its rail rings cross the spine between leaf groups 0-31 and
    32-47; a neighbour's all-to-all on nodes 48-63 sends cross-rail bytes over the same group-1 leaves' links, so
    the gradient all-reduce slows; the same neighbour without --sim flow is refused in one line."""
    from fabricsim.cli import app as _app

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: neighbour, gpus: 128, pattern: all_to_all, bytes: 16G}\n")
    runner = CliRunner()
    args = ["train", "--model", "llama3-8b", "--gpus", "384", "--seq", "4096", "--gbs", "384", "--zero", "0",
            "--no-overlap-grad-reduce", "--vpp", "1", "--mbs", "1", "--recompute", "none", "--oversubscription", "2",
            "--sim", "flow", "--cluster-nodes", "64", "--json"]
    alone = runner.invoke(_app, args)
    shared = runner.invoke(_app, [*args, "--jobs", str(jobs)])
    assert alone.exit_code == 0 and shared.exit_code == 0, alone.output + shared.output
    ib_alone = json.loads(alone.output)["exposed_s"]["infiniband"]
    ib_shared = json.loads(shared.output)["exposed_s"]["infiniband"]
    assert ib_shared > 1.5 * ib_alone
    refused = runner.invoke(_app, [a for a in args if a not in ("--sim", "flow")] + ["--jobs", str(jobs)])
    assert refused.exit_code == 2 and refused.output.startswith("error:") and "--sim flow" in refused.output
