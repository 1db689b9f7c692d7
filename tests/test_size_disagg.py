"""`size --inference --disagg` (issue 23, item 4): each system's cheapest prefill and decode pools, one checkpoint
and KV format, the P:D ratio the rate needs, confirmed by the serving simulation with both pools."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.catalog import default_catalog
from fabricsim.cli import app
from fabricsim.model import load_model
from fabricsim.sizing import InferenceSizingSpec
from fabricsim.sizing.inference.disagg import decode_member
from fabricsim.sizing.inference.screen import ReplicaPlan, replica_step_cost

ARGS = ["size", "--inference", "--model", "llama3-8b", "--rate", "10", "--slo-ttft", "1s", "--slo-tpot", "40ms",
        "--systems", "dgx-h100", "--engine", "sglang", "--json"]


def test_disaggregated_pools_are_searched_simulated_and_launchable() -> None:
    out = CliRunner().invoke(app, [*ARGS, "--disagg"])
    assert out.exit_code == 0, out.output
    layouts = json.loads(out.output)["disaggregated"]
    assert layouts
    for e in layouts:
        pre, dec = e["prefill"], e["decode"]
        assert (pre["plan"]["weights"], pre["plan"]["kv"]) == (dec["plan"]["weights"], dec["plan"]["kv"])
        assert e["disagg"] == f"{pre['replicas']}:{dec['replicas']}"
        assert e["gpus"] == pre["replicas"] * pre["plan"]["gpus"] + dec["replicas"] * dec["plan"]["gpus"]
        if e["simulated"]:
            assert e["ttft_s_p90"] <= 1.0 and e["tpot_s_p90"] <= 0.040
    best = layouts[0]
    assert "--disaggregation-mode prefill" in best["launch"]["prefill"]["command"]
    assert best["launch"]["decode"]["instances"] == best["decode"]["replicas"]
    plain = CliRunner().invoke(app, ARGS)
    assert plain.exit_code == 0 and json.loads(plain.output)["disaggregated"] == []


def test_disagg_is_a_serving_option() -> None:
    out = CliRunner().invoke(app, ["size", "--model", "llama3-8b", "--disagg"])
    assert out.exit_code == 2 and "--disagg" in out.output and "--inference" in out.output


@settings(max_examples=25, deadline=None)
@given(st.floats(0.005, 0.2), st.floats(1.0, 4.0))
def test_a_looser_tpot_slo_never_lowers_a_decode_replicas_capacity(slo_s: float, looser: float) -> None:
    catalog = default_catalog()
    model = load_model("llama3-8b")
    plan = ReplicaPlan("dgx-h100", "ndr", "ndr", 1, 1, 1, "bf16", "bf16")
    capacities = []
    for slo in (slo_s, slo_s * looser):
        spec = InferenceSizingSpec.build(model="llama3-8b", rate_per_s=1, slo_ttft_s=1, slo_tpot_s=slo,
                                         prompt_tokens=1024, output_tokens=128)
        member = decode_member(plan, replica_step_cost(model, plan, spec, catalog), spec, 1024)
        capacities.append(0.0 if member is None else member.capacity_rps)
        assert member is None or member.latency_s <= slo
    assert capacities[1] >= capacities[0]


def test_the_decode_pool_may_run_on_another_gpu_type() -> None:
    """With two systems the search pairs pools across them too (prefill where compute is cheap, decode where
    memory bandwidth is): the hand-off then crosses the network, and each pool's command is its own."""
    args = [a if a != "dgx-h100" else "dgx-h100,hgx-h200" for a in ARGS]
    out = CliRunner().invoke(app, [*args, "--disagg"])
    assert out.exit_code == 0, out.output
    layouts = json.loads(out.output)["disaggregated"]
    pairs = {(e["system"], e["decode_system"]) for e in layouts}
    assert {("dgx-h100", "hgx-h200"), ("hgx-h200", "dgx-h100")} & pairs
    assert ("dgx-h100", "dgx-h100") in pairs or ("hgx-h200", "hgx-h200") in pairs
