"""Counted flows (fabricsim.network.flowcount, Traffic.add_stage's count): a row standing for several flows between
the same GPUs gives exactly the run of every flow on its own (same ECMP hashes: members keep their flow ids)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.catalog import load_catalog
from fabricsim.network import fabric_control, finish_quantiles, routed_flowset, simulate
from fabricsim.topology import build_cluster
from fabricsim.traffic import JobSpec, build_traffic, job_metrics, run_traffic
from fabricsim.traffic.jobs import Traffic, count_pairs

CATALOG = load_catalog()
QUANTILES = (0.0, 0.5, 0.99, 1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from([1.0, 2.0])), min_size=0,
                max_size=30))
def test_counted_rows_expand_to_the_flows_in_their_order(flows: list[tuple[int, int, float]]) -> None:
    src = np.array([f[0] for f in flows], dtype=np.int64)
    dst = np.array([f[1] for f in flows], dtype=np.int64)
    size = np.array([f[2] for f in flows])
    rows = count_pairs(src, dst, size)
    if rows is None:
        assert len({(a, b, c) for a, b, c in flows}) == len(flows)
        return
    s, d, b, count, members = rows
    assert count.sum() == len(flows) and sorted(members.tolist()) == list(range(len(flows)))
    assert len({(a, c, e) for a, c, e in zip(s.tolist(), d.tolist(), b.tolist(), strict=True)}) == len(s)
    tr = Traffic()
    tr.add_stage("job", 0.0, s, d, b, count=count, member_ids=members)
    got_src, got_dst, got_size, _ = tr.arrays()
    assert got_src.tolist() == src.tolist() and got_dst.tolist() == dst.tolist()
    assert got_size.tolist() == size.tolist()
    counts, ids = tr.counted() or (None, None)
    assert counts is not None and ids is not None and np.array_equal(np.sort(ids), np.arange(len(flows)))


FABRICS = st.sampled_from([(6, 2, 1), (5, 2, 1), (4, 3, 1), (4, 2, 2)])


@settings(max_examples=10, deadline=None)
@given(fabric=FABRICS, pattern=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]),
       routing=st.sampled_from(["ecmp", "ecmp", "spray", "adaptive"]), cc=st.sampled_from([None, "ib"]))
def test_counted_collectives_equal_every_flow_on_its_own(fabric: tuple[int, int, int], pattern: str, routing: str,
                                                          cc: str | None) -> None:
    nodes, tiers, planes = fabric
    topo = build_cluster("dgx-h100", nodes=nodes, fabric="fat-tree", tiers=tiers, planes=planes)
    behaviour = None if cc is None else CATALOG.congestion_control(cc)
    tr = build_traffic(topo, [JobSpec("ar", 16, pattern, 2.0**22, "scattered")], [])
    assert any(c is not None for c in tr.count)  # the rings' channels repeat GPU pairs: counted
    run = run_traffic(topo, tr, routing, behaviour)
    src, dst, size, stage = tr.arrays()
    fs = routed_flowset(topo, src, dst, size, stage, np.asarray(tr.release), routing,
                        np.asarray(tr.dep_before), np.asarray(tr.dep_after))
    control = fabric_control(topo, behaviour)
    if control is not None:
        fs = replace(fs, stage_class=tr.stage_classes(), stage_group=tr.stage_groups())
    ref = simulate(fs, topo.link_capacity, check=True, control=control)
    assert run.flowset.total_flows == fs.num_flows == tr.num_flows
    assert run.result.makespan == pytest.approx(ref.makespan, rel=1e-9)
    assert run.result.link_bytes == pytest.approx(ref.link_bytes, rel=1e-9, abs=1e-6)
    assert run.result.stage_finish == pytest.approx(ref.stage_finish, rel=1e-9)
    assert finish_quantiles(run.flowset, run.result, q=QUANTILES) == pytest.approx(
        np.quantile(ref.flow_finish, QUANTILES, method="inverted_cdf"), rel=1e-9)
    assert job_metrics(run)[0]["flows"] == fs.num_flows
    assert ref.max_utilisation <= 1 + 1e-9
    assert run.result.link_bytes.sum() == pytest.approx(ref.link_bytes.sum(), rel=1e-12)  # bytes conserved


@settings(max_examples=12, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(0, 63), st.integers(0, 63), st.integers(1, 6)), min_size=1, max_size=12),
       routing=st.sampled_from(["ecmp", "ecmp", "spray", "adaptive"]), cc=st.sampled_from([None, "ib"]),
       seed=st.integers(0, 3))
def test_repeated_pairs_hash_as_their_flows(pairs: list[tuple[int, int, int]], routing: str, cc: str | None,
                                            seed: int) -> None:
    """Pairs across leaves (several spines: ECMP choices), each repeated, in shuffled order."""
    topo = build_cluster("dgx-h100", nodes=8, fabric="fat-tree", tiers=3, rail_optimized=False)
    flows = [(a, b) for a, b, k in pairs if a != b for _ in range(k)]
    if not flows:
        return
    order = np.random.default_rng(seed).permutation(len(flows))
    src = np.array([flows[i][0] for i in order], dtype=np.int64)
    dst = np.array([flows[i][1] for i in order], dtype=np.int64)
    size = np.full(len(src), 2.0**20)
    rows = count_pairs(src, dst, size)
    tr = Traffic()
    if rows is None:
        tr.add_stage("job", 0.0, src, dst, size)
    else:
        tr.add_stage("job", 0.0, rows[0], rows[1], rows[2], count=rows[3], member_ids=rows[4])
    behaviour = None if cc is None else CATALOG.congestion_control(cc)
    run = run_traffic(topo, tr, routing, behaviour)
    fs = routed_flowset(topo, src, dst, size, np.zeros(len(src), dtype=np.int64), np.zeros(1), routing)
    control = fabric_control(topo, behaviour)
    if control is not None:
        fs = replace(fs, stage_class=tr.stage_classes(), stage_group=tr.stage_groups())
    ref = simulate(fs, topo.link_capacity, control=control)
    assert run.result.makespan == pytest.approx(ref.makespan, rel=1e-9)
    assert run.result.link_bytes == pytest.approx(ref.link_bytes, rel=1e-9, abs=1e-6)
    assert finish_quantiles(run.flowset, run.result, q=QUANTILES) == pytest.approx(
        np.quantile(ref.flow_finish, QUANTILES, method="inverted_cdf"), rel=1e-9)
