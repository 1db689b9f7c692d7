"""Goodput (issue 26): failures from the bill of materials, checkpoint and restart costs, the optimal interval.

The per-component failure rates are fitted on the Llama 3 405B run's Table 5 (the only per-component breakdown we
could verify in a primary text; `catalog/data/failures.yaml` says how), so reproducing that run's interruption
count checks the fit's bookkeeping (parts counted from the BOM), not a held-out prediction."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.catalog import default_catalog, load_documents
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.model import load_model
from fabricsim.training import (
    GoodputSpec,
    InterruptionRates,
    JobParts,
    goodput_at,
    interruption_rates,
    job_parts,
    optimal_interval_s,
    predict_goodput,
)

CATALOG = default_catalog()
H100 = Cluster(CATALOG.system("dgx-h100"), fabric="eth-400g")
MODEL = load_model("llama3-405b")


def _goodput(gpus: int, **options: object) -> float:
    spec = GoodputSpec.model_validate(options)
    return predict_goodput(MODEL, H100, job_parts(H100, gpus), 10.0, 1e6, spec).goodput


def test_goodput_falls_as_the_job_grows() -> None:
    """On one storage system (2 TB/s, unbilled: no network to size to the job): a job of more parts fails more
    often, and nothing else changes."""
    values = [_goodput(g, storage_write_bytes_per_s=2e12, storage_network="none")
              for g in (64, 512, 2048, 8192, 16384, 65536)]
    assert all(a > b for a, b in itertools.pairwise(values)), values
    assert all(0.0 < v <= 1.0 for v in values)


@settings(max_examples=200, deadline=None)
@given(lam_u=st.floats(0.0, 1e-2), lam_p=st.floats(0.0, 1e-3), restart=st.floats(0.0, 3600.0),
       blocking=st.floats(0.0, 600.0), in_flight=st.floats(0.0, 600.0), floor=st.floats(1.0, 60.0))
def test_optimal_interval_beats_every_other(lam_u: float, lam_p: float, restart: float, blocking: float,
                                            in_flight: float, floor: float) -> None:
    rates = InterruptionRates({"x": lam_u}, {"p": lam_p})
    best = optimal_interval_s(rates, restart, blocking, in_flight, floor)
    assert best >= floor
    top = goodput_at(rates, restart, blocking, in_flight, best)
    assert 0.0 <= top <= 1.0
    for factor in (0.25, 0.5, 0.9, 0.99, 1.01, 1.1, 2.0, 4.0, 100.0):
        other = max(floor, best * factor) if math.isfinite(best) else floor * factor
        assert goodput_at(rates, restart, blocking, in_flight, other) <= top + 1e-12


@pytest.mark.parametrize("interval_s", [60.0, 1800.0, 7200.0])
def test_no_failures_leaves_only_the_checkpoint_overhead(interval_s: float) -> None:
    none = InterruptionRates({"gpu": 0.0}, {})
    blocking = 30.0
    assert goodput_at(none, 600.0, blocking, 0.0, interval_s) == pytest.approx(1 - blocking / (interval_s + blocking))
    assert optimal_interval_s(none, 600.0, blocking, 0.0, 1.0) == math.inf
    assert goodput_at(none, 600.0, blocking, 0.0, math.inf) == 1.0


def test_faster_storage_never_lowers_goodput() -> None:
    for mode in ("sync", "async"):
        values = [_goodput(4096, checkpoint=mode, storage_write_bytes_per_s=r) for r in (1e10, 1e11, 1e12, 1e13)]
        assert all(a <= b + 1e-12 for a, b in itertools.pairwise(values)), (mode, values)
    tiers = [_goodput(4096, storage=t) for t in ("superpod-good", "superpod-better", "superpod-best")]
    assert tiers == sorted(tiers)


def test_more_reliable_parts_never_lower_goodput() -> None:
    values = [_goodput(16384, mtbf_scale=s) for s in (0.5, 1.0, 2.0, 10.0)]
    assert values == sorted(values)


def test_llama3_405b_interruptions_and_effective_training_time() -> None:
    """54 days on 16,384 H100 (2,048 nodes): 419 unexpected interruptions (Llama 3 paper, Table 5) and "higher
    than 90% effective training time" (sec. 3.3.4): within 25% and 5 points."""
    parts = job_parts(H100, 16384)
    assert (parts.nodes, parts.nics, parts.cpus) == (2048, 16384, 4096)
    rates = interruption_rates(parts, CATALOG)
    unexpected = rates.unplanned_total_per_s * 54 * 86400
    assert unexpected == pytest.approx(419, rel=0.25)
    planned = rates.planned_total_per_s * 54 * 86400
    assert planned == pytest.approx(47, rel=0.25)
    good = predict_goodput(MODEL, H100, parts, 10.0, 1e6).goodput
    assert 0.85 <= good <= 0.95


def test_rates_scale_with_parts() -> None:
    small = interruption_rates(JobParts(8, 1, 8, 0, 2), CATALOG)
    big = interruption_rates(JobParts(80, 10, 80, 100, 20), CATALOG)
    assert big.unplanned_per_s["gpu"] == pytest.approx(10 * small.unplanned_per_s["gpu"])
    assert big.unplanned_per_s["host"] == pytest.approx(10 * small.unplanned_per_s["host"])
    assert big.unplanned_per_s["software"] == small.unplanned_per_s["software"]
    assert small.unplanned_per_s["network"] == 0.0


def test_a_negative_rate_is_refused() -> None:
    doc = {"failures": [{"id": "gpu", "name": "x", "per": "gpu", "rate_per_hour": -1.0, "source": "test"}]}
    with pytest.raises(SpecError, match="rate_per_hour"):
        load_documents([("overlay.yaml", doc)], base=CATALOG)


@pytest.mark.parametrize(("network", "through"), [("none", "all their NICs"), ("converged", "all their NICs"),
                                                  ("separate", "their storage ports")])
def test_storage_faster_than_the_nics_is_refused(network: str, through: str) -> None:
    with pytest.raises(SpecError, match=through):
        predict_goodput(MODEL, H100, job_parts(H100, 64), 10.0, 1e6,
                        GoodputSpec(storage_write_bytes_per_s=1e15, storage_network=network))


def test_size_ranks_by_wall_clock_time() -> None:
    """`size` stretches each run by its cluster's goodput: the same plans and throughput, longer times, higher
    costs; --no-goodput (spec.goodput None) is the healthy cluster."""
    from fabricsim.sizing import Knobs, SizingSpec, size

    base = SizingSpec(model="llama3-8b", tokens=1e12, gpus=(64, 512), systems=("dgx-h100",), fabrics=("ndr",),
                      oversubscription=(1.0,), knobs=Knobs(tp=(8,), pp=(1,), mbs=(1,), recompute=("none",)))
    with_failures = size(base, executor="serial", exhaustive=True).frame.sort_values(["gpus", "zero", "precision"])
    healthy = size(base.model_copy(update={"goodput": None}), executor="serial", exhaustive=True).frame.sort_values(
        ["gpus", "zero", "precision"])
    assert list(with_failures["tokens_per_s"]) == list(healthy["tokens_per_s"])
    assert (healthy["goodput"] == 1.0).all()
    g = with_failures["goodput"].to_numpy()
    assert ((g > 0.8) & (g < 1.0)).all()
    ratio = with_failures["time_to_train_s"].to_numpy() / healthy["time_to_train_s"].to_numpy()
    assert ratio == pytest.approx(1 / g)


def test_whatif_goodput_swaps() -> None:
    """storage=2x, checkpoint=async and mtbf=2 leave the step as it is and never slow the wall-clock step; a
    slower tier does; storage is priced from its servers and network (not when --storage-network none), reliability
    is not; without goodput they are refused."""
    from fabricsim.analysis import Scenario, parse_swap, what_if
    from fabricsim.training import ParallelPlan

    model = load_model("llama3-70b")
    plan = ParallelPlan.build(tp=8, pp=4, dp=32, mbs=1, gbs=1024, seq=8192)
    scenario = Scenario("dgx-h100", 1024, None, 1.0, CATALOG, goodput=GoodputSpec())
    swaps = tuple(parse_swap(s) for s in ("storage=2x", "checkpoint=async", "mtbf=2", "storage=superpod-good"))
    result = what_if(model, plan, scenario, swaps=swaps)
    by = {s.swap: s for s in result.swaps}
    assert 0.9 < result.base_goodput < 1.0
    for name in ("storage=2x", "checkpoint=async", "mtbf=2"):
        assert by[name].step_time_s == pytest.approx(float(result.base.step_time_s))
        assert by[name].speedup > 1.0
        assert by[name].goodput > result.base_goodput
    assert by["storage=superpod-good"].speedup < 1.0
    assert by["mtbf=2"].cost_delta_usd is None
    assert (by["storage=2x"].cost_delta_usd or 0.0) > 0.0  # twice the servers
    assert (by["storage=superpod-good"].cost_delta_usd or 0.0) <= 0.0
    assert by["checkpoint=async"].cost_delta_usd == 0.0
    unbilled = Scenario("dgx-h100", 1024, None, 1.0, CATALOG, goodput=GoodputSpec(storage_network="none"))
    assert what_if(model, plan, unbilled, swaps=swaps[:1]).swaps[0].cost_delta_usd is None
    healthy = Scenario("dgx-h100", 1024, None, 1.0, CATALOG)
    with pytest.raises(SpecError, match="goodput"):
        what_if(model, plan, healthy, swaps=(parse_swap("storage=2x"),))


def test_peer_memory_checkpoints_beat_slow_storage() -> None:
    """In peers' host memory (Gemini, GEMINI): written and read back over the NICs, so on slow storage the run keeps
    more than with asynchronous writes to it, and storage speed no longer matters."""
    slow = {"storage_write_bytes_per_s": 1e10}
    memory = _goodput(16384, checkpoint="memory", **slow)
    assert memory > _goodput(16384, checkpoint="async", **slow) > _goodput(16384, checkpoint="sync", **slow)
    assert memory == pytest.approx(_goodput(16384, checkpoint="memory", storage_write_bytes_per_s=1e12))
