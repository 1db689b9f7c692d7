"""Collective model: validation against published nccl-tests figures, physical sanity, the seed claims."""

from __future__ import annotations

import itertools
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.catalog import Catalog
from fabricsim.collectives import (
    ALGORITHMS,
    OPS,
    CollectiveModel,
    busbw_factor,
    choices,
    group_shape,
    in_network_busbw_factor,
    scaled,
    size_sweep,
)
from fabricsim.errors import SpecError
from fabricsim.validation import load_cases, run_collective_case, tolerance_for_size

CASES, ORIGIN = load_cases("nccl_tests.yaml")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_validation_case_within_size_tolerance(case: dict[str, object], catalog: Catalog) -> None:
    result = run_collective_case(case, catalog)
    size = int(case["size_bytes"])  # type: ignore[call-overload]
    assert result.tolerance == tolerance_for_size(size)
    assert abs(result.error) <= result.tolerance, (
        f"{result.id}: measured {result.measured:.1f}, predicted {result.predicted:.1f} ({result.error:+.1%})"
    )


def test_validation_median_error_at_most_8_percent(catalog: Catalog) -> None:
    errors = [abs(run_collective_case(c, catalog).error) for c in CASES]
    assert len(errors) >= 15
    assert statistics.median(errors) <= 0.08


def test_forced_algorithm_is_used(catalog: Catalog) -> None:
    case = next(c for c in CASES if c.get("algo"))
    result = run_collective_case(case, catalog)
    assert str(case["algo"]) in result.detail


SYSTEMS = ["dgx-a100", "dgx-h100", "dgx-b200", "pcie-h100-8gpu", "gb200-nvl72"]


@settings(max_examples=60, deadline=None)
@given(
    system=st.sampled_from(SYSTEMS),
    nodes=st.integers(1, 64),
    op=st.sampled_from(OPS),
    size_log2=st.integers(3, 34),
)
def test_busbw_never_exceeds_bottleneck_link(system: str, nodes: int, op: str, size_log2: int) -> None:
    """Wire-bound algorithms stay under the slowest line rate they use; in-network reductions under the
    link rate scaled by nccl-tests' in-network factor (n-1)/(n+1) relative to 2(n-1)/n."""
    shape = group_shape(system, nodes * _gpn(system))
    model = CollectiveModel(shape)
    size = 2**size_log2
    row = model.predict(op, [size]).rows[0]
    caps = []
    if shape.ranks_per_node > 1:
        caps.append(shape.intra_line_bytes_per_s)
    if shape.nnodes > 1:
        caps.append(shape.net_line_bytes_per_s_per_node)
    cap_GBps = min(caps) / 1e9
    busbw = row.busbw_GBps
    if ALGORITHMS[row.algorithm].in_network:
        n = shape.nranks
        busbw *= in_network_busbw_factor(n) / busbw_factor("all_reduce", n)
    assert busbw <= cap_GBps * (1 + 1e-9)


def _gpn(system: str) -> int:
    from fabricsim.catalog import default_catalog

    return default_catalog().system(system).gpus_per_node


@settings(max_examples=40, deadline=None)
@given(system=st.sampled_from(SYSTEMS), nodes=st.integers(1, 16), op=st.sampled_from(OPS))
def test_time_non_decreasing_in_size(system: str, nodes: int, op: str) -> None:
    model = CollectiveModel(group_shape(system, nodes * _gpn(system)))
    times = model.times_s(op, size_sweep(8, 16 * 2**30, 2))
    assert all(b >= a for a, b in itertools.pairwise(times))


@settings(max_examples=40, deadline=None)
@given(
    system=st.sampled_from(SYSTEMS),
    nodes=st.integers(1, 16),
    op=st.sampled_from(OPS),
    size_log2=st.integers(3, 34),
    which=st.sampled_from(["intra", "net", "both"]),
)
def test_more_bandwidth_never_slower(system: str, nodes: int, op: str, size_log2: int, which: str) -> None:
    shape = group_shape(system, nodes * _gpn(system))
    faster = scaled(shape, intra=2.0 if which != "net" else 1.0, net=2.0 if which != "intra" else 1.0)
    size = 2**size_log2
    assert CollectiveModel(faster).time_s(op, size) <= CollectiveModel(shape).time_s(op, size) * (1 + 1e-12)


def test_nvlink_all_reduce_beats_pcie() -> None:
    size = 256 * 2**20
    nvlink = CollectiveModel(group_shape("dgx-h100", 8)).time_s("all_reduce", size)
    pcie = CollectiveModel(group_shape("pcie-h100-8gpu", 8)).time_s("all_reduce", size)
    assert nvlink * 4 < pcie
    assert CollectiveModel(group_shape("pcie-h100-8gpu", 8)).choose("all_reduce", size).cost.bound(size) == "pcie"


@pytest.mark.parametrize("system", ["dgx-a100", "dgx-b200"])
def test_two_node_all_reduce_bounded_by_nics(system: str) -> None:
    size = 4 * 2**30
    choice = CollectiveModel(group_shape(system, 16)).choose("all_reduce", size)
    assert choice.cost.bound(size) == "infiniband"


def test_two_node_a100_ring_matches_published_192GBps() -> None:
    """NVIDIA: 'DGX-A100 ... 8x200Gbit/s IB cards and we measure 192GB/s AllReduce BusBW'
    (github.com/NVIDIA/nccl/issues/812)."""
    row = CollectiveModel(group_shape("dgx-a100", 16)).predict("all_reduce", [8 * 2**30]).rows[0]
    assert row.algorithm == "ring"
    assert row.busbw_GBps == pytest.approx(192, rel=0.10)


def test_intra_node_busbw_several_times_inter_node_per_gpu() -> None:
    """Seed claim: on DGX H100 NVLink gives each GPU several times the bandwidth InfiniBand does."""
    size = 2**30
    intra = CollectiveModel(group_shape("dgx-h100", 8)).predict("all_reduce", [size]).rows[0].busbw_GBps
    rail = group_shape("dgx-h100", 8, ranks_per_node=1)  # one GPU per node: the InfiniBand path alone
    inter = CollectiveModel(rail).predict("all_reduce", [size]).rows[0].busbw_GBps
    assert intra > 4 * inter


def test_nvls_beats_ring_on_h100_at_large_sizes() -> None:
    model = CollectiveModel(group_shape("dgx-h100", 8))
    size = 2**30
    assert model.time_s("all_reduce", size, algo="nvls") < model.time_s("all_reduce", size, algo="ring")
    assert model.choose("all_reduce", size).algorithm == "nvls"


def test_small_messages_latency_bound() -> None:
    model = CollectiveModel(group_shape("dgx-h100", 16))
    times = model.times_s("all_reduce", [8, 64, 512, 1024, 2048])
    assert times[-1] < times[0] * 1.1
    assert model.predict("all_reduce", [8]).rows[0].bound == "latency"


def test_unsupported_combinations_raise() -> None:
    a100 = CollectiveModel(group_shape("dgx-a100", 8))
    with pytest.raises(SpecError, match="NVLink SHARP"):
        a100.time_s("all_reduce", 2**20, algo="nvls")
    eth = CollectiveModel(group_shape("dgx-h100", 16, fabric="eth-400g"))
    with pytest.raises(SpecError, match="SHARP"):
        eth.time_s("all_reduce", 2**20, algo="collnet")
    with pytest.raises(SpecError, match="power-of-two"):
        CollectiveModel(group_shape("dgx-h100", 6)).time_s("all_reduce", 2**20, algo="halving_doubling")
    with pytest.raises(SpecError, match="does not implement"):
        a100.time_s("all_to_all", 2**20, algo="ring")
    with pytest.raises(SpecError, match="unknown algorithm"):
        a100.time_s("all_reduce", 2**20, algo="rign")
    with pytest.raises(SpecError, match="at least 2 ranks"):
        CollectiveModel(group_shape("dgx-h100", 1)).time_s("all_reduce", 2**20)


def test_sharp_available_on_ndr_and_forced_collnet_runs() -> None:
    model = CollectiveModel(group_shape("dgx-h100", 64))
    assert model.shape.sharp
    assert model.time_s("all_reduce", 2**30, algo="collnet") > 0


@pytest.mark.parametrize("algo", ["ring", "tree", "nvls_tree", "hierarchical", "halving_doubling", "collnet"])
def test_every_algorithm_predicts_on_multi_node_h100(algo: str) -> None:
    model = CollectiveModel(group_shape("dgx-h100", 32))
    rows = model.predict("all_reduce", size_sweep(8, 2**30, 8), algo=algo).rows
    assert all(r.algorithm == algo and r.time_s > 0 for r in rows)


def test_busbw_conventions() -> None:
    assert busbw_factor("all_reduce", 8) == pytest.approx(1.75)
    assert busbw_factor("all_gather", 8) == pytest.approx(0.875)
    assert busbw_factor("all_to_all", 8) == pytest.approx(0.875)
    assert busbw_factor("broadcast", 8) == 1.0
    assert busbw_factor("send_recv", 8) == 1.0
    row = CollectiveModel(group_shape("dgx-h100", 8)).predict("all_gather", [2**30]).rows[0]
    assert row.busbw_GBps == pytest.approx(row.algbw_GBps * 7 / 8)
    assert row.algbw_GBps == pytest.approx(2**30 / row.time_s / 1e9)


def test_size_sweep_matches_nccl_tests() -> None:
    assert size_sweep(8, 64, 2) == [8, 16, 32, 64]
    assert len(size_sweep(8, 8 * 2**30, 2)) == 31
    with pytest.raises(SpecError, match="--max"):
        size_sweep(64, 8)


def test_choices_cached_per_shape() -> None:
    shape = group_shape("dgx-h100", 1024)
    model = CollectiveModel(shape)
    assert choices("all_reduce", shape, model.tuning) is choices("all_reduce", shape, model.tuning)


def test_calibration_overlay_changes_prediction(tmp_path: object) -> None:
    from pathlib import Path

    from fabricsim.catalog import load_catalog

    overlay = Path(str(tmp_path)) / "calib.yaml"
    overlay.write_text("links:\n  - {id: nvlink4, name: NVLink4 slow, kind: nvlink, generation: '4', unit: link,"
                       " bytes_per_s: 25GB/s, latency_s: 0.6us, efficiency: 0.5, source: test}\n")
    cat = load_catalog(overlay)
    slow = CollectiveModel(group_shape("dgx-h100", 8, catalog=cat), catalog=cat).time_s("all_reduce", 2**30)
    fast = CollectiveModel(group_shape("dgx-h100", 8)).time_s("all_reduce", 2**30)
    assert slow > fast * 1.5
