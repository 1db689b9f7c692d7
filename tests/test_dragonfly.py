"""Dragonfly+ (issue 27, item 1, in part): groups of leaf-spine joined by global links; minimal, Valiant and UGAL
routing. Small instances use an 8-port switch (4-NIC PCIe servers, 4 nodes a group) so every GPU pair is checked."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.catalog import Catalog, default_catalog
from fabricsim.errors import SpecError
from fabricsim.topology import Topology, build_cluster
from fabricsim.traffic import JobSpec, build_traffic, run_traffic
from fabricsim.traffic.jobs import Traffic
from topology_checks import all_pairs, assert_valid_routes, max_flow_gbps

BASE = default_catalog()
TINY: Catalog = BASE.model_copy(update={"switches": {
    **BASE.switches, "tiny8": BASE.switch("qm9700").model_copy(update={"id": "tiny8", "radix": 8})}})


def _tiny(nodes: int, routing: str = "minimal") -> Topology:
    return build_cluster("pcie-h100-8gpu", nodes=nodes, fabric="dragonfly", link="tiny8",
                         dragonfly_routing=routing, catalog=TINY)


@pytest.mark.parametrize("routing", ["minimal", "valiant", "ugal"])
@pytest.mark.parametrize("nodes", [8, 12, 20])
def test_every_pair_routes(nodes: int, routing: str) -> None:
    topo = _tiny(nodes, routing)
    s, d = all_pairs(topo)
    for salt in (0, 7919):
        assert_valid_routes(topo, s, d, topo.route(s, d, np.arange(len(s)) * 13 + salt))


@pytest.mark.parametrize("nodes", [8, 12, 16, 20])
def test_counting(nodes: int) -> None:
    """Every NIC on one cable, no switch past its 8 ports, global links as designed, the BOM's cables as the
    links."""
    topo = _tiny(nodes)
    first = topo.num_nodes * topo.node.num_links
    src = topo.link_src[first:]
    switches = np.flatnonzero(topo.endpoint_node < 0)
    ports = np.bincount(src, minlength=topo.num_endpoints)
    assert (ports[switches] <= 8).all()
    nic = topo.endpoint_kind[topo.nic_endpoint(0)]
    nic_ends = src[topo.endpoint_kind[src] == nic]
    assert len(nic_ends) == len(np.unique(nic_ends)) == nodes * 4
    bill = topo.bom()
    assert bill.cables_total == len(src) // 2
    groups = -(-nodes // 4)
    assert bill.cables["global"] == groups * (groups - 1) // 2 * (16 // (groups - 1))


@pytest.mark.parametrize("nodes", [8, 16, 24])
def test_bisection_matches_max_flow_between_group_halves(nodes: int) -> None:
    topo = _tiny(nodes)
    half = np.arange(nodes // 2)
    assert max_flow_gbps(topo, half, half + nodes // 2) == pytest.approx(topo.bisection_bytes_per_s)


def _adversarial(topo: Topology, split: int = 64) -> Traffic:
    """Every GPU of group 0 sends to its twin in group 1 and back: all traffic on one group pair; each transfer as
    ``split`` flows, so ECMP's hash spreads them over the paths rather than luck deciding."""
    per_group = 4 * topo.gpus_per_node
    g0 = np.arange(per_group)
    tr = Traffic()
    src, dst = np.concatenate([g0, g0 + per_group]), np.concatenate([g0 + per_group, g0])
    tr.add_stage("adversarial", 0.0, np.repeat(src, split), np.repeat(dst, split),
                 np.full(len(src) * split, 2.0**28 / split))
    return tr


def _makespan(topo: Topology, traffic: Traffic) -> float:
    return float(run_traffic(topo, traffic, "ecmp").result.makespan)


def test_non_minimal_routing_helps_an_adversarial_pattern_and_costs_a_uniform_one() -> None:
    minimal, valiant, ugal = (_tiny(16, r) for r in ("minimal", "valiant", "ugal"))
    adv = {name: _makespan(t, _adversarial(t)) for name, t in
           (("minimal", minimal), ("valiant", valiant), ("ugal", ugal))}
    assert adv["valiant"] < 0.6 * adv["minimal"]  # two detour groups: twice the global links
    assert adv["ugal"] < adv["minimal"]

    def uniform(topo: Topology) -> float:
        return _makespan(topo, build_traffic(topo, [JobSpec("u", topo.num_gpus, "all_to_all", 2.0**28)], [], 0))

    assert uniform(valiant) > 1.2 * uniform(minimal)  # every flow between groups crosses two global links


def test_dragonfly_errors() -> None:
    with pytest.raises(SpecError, match="one dragonfly group"):
        _tiny(4)
    with pytest.raises(SpecError, match="NICs do not fit"):
        build_cluster("dgx-h100", nodes=8, fabric="dragonfly", link="tiny8", catalog=TINY)
    with pytest.raises(SpecError, match="fat trees only"):
        _ = build_cluster("pcie-h100-8gpu", nodes=8, fabric="dragonfly", link="tiny8", catalog=TINY,
                          oversubscription=2.0)


def test_large_dragonfly_is_priced_and_routes() -> None:
    """2,048 DGX H100 (16k GPUs) on QM9700: 16 groups, priced, every GPU's flow routed."""
    topo = build_cluster("dgx-h100", nodes=2048, fabric="dragonfly", dragonfly_routing="ugal")
    bill = topo.bom()
    assert bill.capex_usd is not None and bill.switches == {"leaf": 512, "spine": 512}
    s = np.arange(topo.num_gpus)
    d = (s * 7 + 4099) % topo.num_gpus
    keep = s != d
    assert_valid_routes(topo, s[keep], d[keep], topo.route(s[keep], d[keep], s[keep]))


def test_collective_and_train_run_on_the_new_fabrics_at_flow_level() -> None:
    """`collective --sim flow` and `train --sim flow` build the design asked for (rail-only, planes, dragonfly);
    the analytical model prices a fat tree, its all_to_all tapered to a direct network's bisection."""
    import json

    from typer.testing import CliRunner

    from fabricsim.cli import app

    runner = CliRunner()
    times = {}
    for extra in ([], ["--fabric", "rail-only"], ["--planes", "2"], ["--fabric", "dragonfly", "--ib", "ndr"]):
        out = runner.invoke(app, ["collective", "--system", "pcie-h100-8gpu", "--nodes", "8", "--op", "all_to_all",
                                  "--min", "16M", "--max", "16M", "--sim", "flow", "--json", *extra])
        if extra[:2] == ["--fabric", "dragonfly"]:  # 8 nodes of 4 NICs fit one QM9700 group: refused, one line
            assert out.exit_code == 2 and "one dragonfly group" in out.output
            continue
        assert out.exit_code == 0, out.output
        times[" ".join(extra)] = json.loads(out.output)["rows"][0]["time_s"]
    assert all(t > 0 for t in times.values()) and len(times) == 3
    one_group = runner.invoke(app, ["train", "--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--fabric",
                                    "dragonfly"])  # 8 nodes in one group's leaf-spine: refused as `topo` does
    assert one_group.exit_code == 2 and "one dragonfly group" in one_group.output, one_group.output
    steps = {}
    for kind in ("fat-tree", "dragonfly", "slim-fly"):  # analytical: all_to_all tapered to the bisection, 1 here
        out = runner.invoke(app, ["train", "--model", "mixtral-8x7b", "--gpus", "2048", "--tp", "8", "--ep", "8",
                                  "--fabric", kind, "--json"])
        assert out.exit_code == 0, out.output
        steps[kind] = json.loads(out.output)["step_time_s"]
    assert steps["dragonfly"] == pytest.approx(steps["fat-tree"]) and steps["slim-fly"] == pytest.approx(
        steps["fat-tree"])
    ran = runner.invoke(app, ["train", "--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--sim", "flow",
                              "--fabric", "rail-only", "--json"])
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.output)["step_time_s"] > 0
