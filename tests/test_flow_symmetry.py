"""Symmetric traffic on its quotient (fabricsim.network.symmetry) against every flow routed and simulated on its
own, split evenly over all its equal-cost paths: same makespan, per-link bytes, finish-time quantiles and job
figures, bytes conserved, no link above capacity; ideal sharing and under a fabric's congestion control."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fabricsim.network.flowroute as flowroute
import fabricsim.traffic.jobs as jobs_module
from fabricsim.catalog import load_catalog
from fabricsim.errors import SpecError
from fabricsim.network import fabric_control, finish_quantiles, link_kinds, routed_flowset, simulate
from fabricsim.topology import build_cluster
from fabricsim.traffic import JobSpec, build_traffic, job_metrics, run_traffic, slowdowns

CATALOG = load_catalog()
MIB = 2.0**20
QUANTILES = (0.0, 0.25, 0.5, 0.99, 1.0)


def _per_flow(topo, traffic, behaviour, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Every flow on its own, split evenly over all its equal-cost paths (spray without a path limit)."""
    monkeypatch.setattr(flowroute, "MAX_PATHS", 1 << 20)
    src, dst, size, stage = traffic.arrays()
    fs = routed_flowset(topo, src, dst, size, stage, np.asarray(traffic.release), "spray")
    control = fabric_control(topo, behaviour)
    if control is not None:
        fs = replace(fs, stage_class=traffic.stage_classes(), stage_group=traffic.stage_groups())
    return fs, simulate(fs, topo.link_capacity, check=True, control=control)


FABRICS = st.sampled_from([
    ("dgx-h100", 2, None, 1.0, True, 1), ("dgx-h100", 6, None, 1.0, True, 1), ("dgx-h100", 5, 2, 1.0, False, 1),
    ("dgx-h100", 4, 3, 1.0, True, 1), ("dgx-h100", 6, 2, 2.0, True, 1), ("dgx-a100-4nic", 4, 2, 1.0, True, 1),
    ("pcie-h100nvl-8gpu", 3, 2, 1.0, False, 1), ("dgx-h100", 3, 2, 3.0, False, 1), ("dgx-h100", 4, None, 1.0, True, 2),
    ("dgx-h100", 6, 2, 1.0, True, 4), ("dgx-h100", 8, None, 1.0, True, 0),
])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fabric=FABRICS, cc=st.sampled_from([None, "ib", "ib-nocc"]), nbytes=st.sampled_from([1.0, 64.0, 1000.0]))
def test_the_quotient_equals_every_flow_split_evenly(fabric: tuple[str, int, int | None, float, bool, int],
                                                    cc: str | None, nbytes: float,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Fabrics: (system, nodes, tiers, oversubscription, rail-optimized, planes; 0: a rail-only fabric)."""
    system, nodes, tiers, over, rail, planes = fabric
    topo = build_cluster(system, nodes=nodes, fabric="rail-only") if planes == 0 else \
        build_cluster(system, nodes=nodes, fabric="fat-tree", tiers=tiers, oversubscription=over,
                      rail_optimized=rail, planes=planes)
    behaviour = None if cc is None else CATALOG.congestion_control(cc)
    job = [JobSpec("a2a", topo.num_gpus, "all_to_all", nbytes * MIB)]
    monkeypatch.setattr(jobs_module, "SYMMETRIC_FROM_FLOWS", 0)
    sym = build_traffic(topo, job, [], symmetric_ok=True)
    assert sym.symmetric is not None
    run = run_traffic(topo, sym, "ecmp", behaviour)
    monkeypatch.setattr(jobs_module, "SYMMETRIC_FROM_FLOWS", 1 << 60)
    plain = build_traffic(topo, job, [], symmetric_ok=True)
    assert plain.symmetric is None
    fs, ref = _per_flow(topo, plain, behaviour, monkeypatch)
    got = run.result
    assert run.flowset.total_flows == fs.num_flows == topo.num_gpus * (topo.num_gpus - 1)
    assert run.flowset.num_flows < fs.num_flows
    assert got.makespan == pytest.approx(ref.makespan, rel=1e-9)
    assert got.link_bytes == pytest.approx(ref.link_bytes, rel=1e-9, abs=1e-6)
    assert finish_quantiles(run.flowset, got, q=QUANTILES) == pytest.approx(
        np.quantile(ref.flow_finish, QUANTILES, method="inverted_cdf"), rel=1e-9)
    assert got.events == ref.events
    # bytes conserved: every class delivers its bytes, all GPUs' together; no link ran above its capacity
    assert got.delivered == pytest.approx(run.flowset.size, rel=1e-9)
    assert (got.delivered * run.flowset.multiplicity).sum() == pytest.approx(nbytes * MIB * (topo.num_gpus - 1),
                                                                             rel=1e-9)
    assert ref.max_utilisation <= 1 + 1e-9
    mine = job_metrics(run)[0]
    assert mine["flows"] == fs.num_flows
    assert mine["bytes_per_s_per_gpu"] == pytest.approx(
        nbytes * MIB * (topo.num_gpus - 1) / topo.num_gpus / ref.makespan, rel=1e-9)


def test_a_fabric_with_a_fuller_leaf_gets_kinds_per_leaf() -> None:
    topo = build_cluster("dgx-h100", nodes=33, fabric="fat-tree")  # 17 + 16 nodes a rail: two kinds of leaf
    kinds = link_kinds(topo)
    assert len(np.unique(kinds.gpu_kind)) >= 2
    assert kinds.members.sum() == topo.num_links


def test_small_or_mixed_traffic_is_not_aggregated_and_other_routings_are_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    topo = build_cluster("dgx-h100", nodes=2, fabric="fat-tree")
    a2a = [JobSpec("a2a", topo.num_gpus, "all_to_all", MIB)]
    assert build_traffic(topo, a2a, [], symmetric_ok=True).symmetric is None  # below SYMMETRIC_FROM_FLOWS
    monkeypatch.setattr(jobs_module, "SYMMETRIC_FROM_FLOWS", 0)
    assert build_traffic(topo, a2a, []).symmetric is None  # the caller did not allow it
    half = [JobSpec("a2a", topo.num_gpus // 2, "all_to_all", MIB)]
    assert build_traffic(topo, half, [], symmetric_ok=True).symmetric is None  # not every GPU
    sym = build_traffic(topo, a2a, [], symmetric_ok=True)
    with pytest.raises(SpecError, match="ecmp"):
        run_traffic(topo, sym, "adaptive")
    with pytest.raises(SpecError, match="quotient"):
        sym.arrays()
    with pytest.raises(SpecError, match="quotient"):
        sym.counted()
    assert slowdowns(topo, run_traffic(topo, sym, "ecmp"), "ecmp") == {"a2a": 1.0}
    torus = build_cluster("dgx-h100", nodes=8, fabric="torus")
    assert build_traffic(torus, [JobSpec("a2a", torus.num_gpus, "all_to_all", MIB)], [],
                         symmetric_ok=True).symmetric is None  # a fabric the quotient is not checked on
