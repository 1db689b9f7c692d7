"""`fabricsim whatif` (package analysis): layer speed-ups, priced swaps, the verdict, and the seed's thesis."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fabricsim.analysis import Scenario, apply_swap, faster_catalog, parse_swap, what_if
from fabricsim.catalog import Catalog
from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.model.presets import load_model
from fabricsim.model.spec import ModelSpec
from fabricsim.topology import ClusterSpec, build_topology
from fabricsim.training.plan import ParallelPlan

# A fine-grained MoE with DeepSeek-V2-Lite's dimensions (deepseek-ai/DeepSeek-V2-Lite config.json: hidden 2048,
# 27 layers, 16 heads, dense FFN 10944, 64 routed experts of 1408 + 2 shared, top-6, first layer dense, vocab
# 102400; MLA modelled as plain multi-head attention).
FINE_MOE = ModelSpec.from_data({"name": "moe-16b-a2.4b", "layers": 27, "hidden": 2048, "heads": 16,
                                "ffn_hidden": 10944, "gated_mlp": True, "vocab": 102400,
                                "moe": {"experts": 64, "top_k": 6, "ffn_hidden": 1408, "shared_experts": 2,
                                        "dense_layers": 1}})


def _priced_xdr(catalog: Catalog) -> Catalog:
    """The catalog has no Q3400 (XDR switch) price; price it at the NDR QM9700's, a lower bound, so the
    ``ib=xdr`` swap is priced at its cheapest."""
    q3400 = catalog.switches["q3400"].model_copy(update={"price_usd": catalog.switches["qm9700"].price_usd})
    return catalog.model_copy(update={"switches": {**catalog.switches, "q3400": q3400}})


def test_faster_catalog_scales_rates_not_latencies(catalog: Catalog) -> None:
    fast = faster_catalog(catalog, "compute", 2.0)
    h100, fast_h100 = catalog.gpu("h100-sxm"), fast.gpu("h100-sxm")
    assert fast_h100.bf16_flops_per_s == 2 * h100.bf16_flops_per_s
    assert fast_h100.fp8_flops_per_s == 2 * (h100.fp8_flops_per_s or 0)
    assert fast_h100.hbm_bytes_per_s == h100.hbm_bytes_per_s
    nv = faster_catalog(catalog, "nvlink", 2.0)
    assert nv.link("nvlink4").bytes_per_s == 2 * catalog.link("nvlink4").bytes_per_s
    assert nv.link("nvlink4").latency_s == catalog.link("nvlink4").latency_s
    assert nv.link("ib-ndr").bytes_per_s == catalog.link("ib-ndr").bytes_per_s
    ib = faster_catalog(catalog, "infiniband", 2.0)
    assert ib.link("ib-ndr").bytes_per_s == 2 * catalog.link("ib-ndr").bytes_per_s
    assert ib.nic("cx7").port_bytes_per_s == 2 * catalog.nic("cx7").port_bytes_per_s
    assert ib.nic("cx7-eth").port_bytes_per_s == catalog.nic("cx7-eth").port_bytes_per_s
    assert faster_catalog(catalog, "hbm", 3.0).gpu("b200").hbm_bytes_per_s == 3 * catalog.gpu("b200").hbm_bytes_per_s
    assert catalog.gpu("h100-sxm").bf16_flops_per_s == h100.bf16_flops_per_s  # the original is untouched
    with pytest.raises(SpecError):
        faster_catalog(catalog, "warp-drive", 2.0)


def test_swaps_parse_and_apply(catalog: Catalog) -> None:
    base = Scenario("dgx-h100", 576, None, 2.0, catalog)
    assert base.nodes == 72
    rack = apply_swap(base, parse_swap("system=gb200-nvl72"))
    assert (rack.system_id, rack.gpus, rack.nodes) == ("gb200-nvl72", 576, 8)
    xdr = apply_swap(base, parse_swap("ib=xdr"))
    assert (xdr.fabric, xdr.nic) == ("ib-xdr", "cx8")  # the NIC that runs XDR replaces the 400G CX-7
    assert xdr.cluster().system.nic == "cx8"
    assert apply_swap(base, parse_swap("oversubscription=1")).oversubscription == 1.0
    for bad in ("ib", "gpu=b200", "oversubscription=0.5", "oversubscription=x", "ib=warp", "system=dgx-h1000"):
        with pytest.raises(SpecError):
            apply_swap(base, parse_swap(bad))
    with pytest.raises(SpecError, match="do not fill whole gb200-nvl72 nodes"):
        apply_swap(Scenario("dgx-h100", 512, None, 1.0, catalog), parse_swap("system=gb200-nvl72"))


def test_swap_cost_is_the_bill_of_materials_difference(catalog: Catalog) -> None:
    """oversubscription 2 -> 1 on 64 DGX H100 nodes adds spine switches and their optics, nothing else; ib=xdr
    re-prices the fabric and replaces 512 CX-7 NICs by CX-8 (+$1,250 each)."""
    cat = _priced_xdr(catalog)
    model, plan = load_model("llama3-8b"), ParallelPlan.build(gpus=512, seq=2048, gbs=512, mbs=1, zero=1)
    result = what_if(model, plan, Scenario("dgx-h100", 512, None, 2.0, cat), 2.0,
                     (parse_swap("oversubscription=1"), parse_swap("ib=xdr")))

    def capex(link: str, ratio: float, nic: str | None = None) -> float:
        spec = ClusterSpec.parse({"system": "dgx-h100", "nodes": 64, "link": link, "oversubscription": ratio,
                                  "nic": nic})
        value = build_topology(spec, cat).bom().capex_usd
        assert value is not None
        return value

    base = capex("ib-ndr", 2.0)
    assert result.base_capex_usd == base
    flat, xdr = result.swaps
    assert flat.cost_delta_usd == pytest.approx(capex("ib-ndr", 1.0) - base)
    assert 0 < flat.cost_delta_usd < 0.1 * base
    assert xdr.cost_delta_usd == pytest.approx(capex("ib-xdr", 2.0, "cx8") - base)
    spec = ClusterSpec.parse({"system": "dgx-h100", "nodes": 64, "link": "ib-xdr", "nic": "cx8"})
    swap = [i for i in build_topology(spec, cat).bom().items if i.category == "nic"]
    assert len(swap) == 1 and swap[0].count == 512 and swap[0].unit_price_usd == 3500 - 2250  # the BOM bills it


def test_dp_heavy_small_model_on_oversubscribed_fabric_names_infiniband(catalog: Catalog) -> None:
    """llama3-8b, pure DP over 512 H100s, 2048 tokens per GPU per step, 2:1 fabric: the gradient reduce-scatter
    and parameter gather outlast the compute windows they hide under, so the step is the network's; a 2x faster
    InfiniBand buys the most (though each NIC's PCIe Gen5 x16 host link caps an 800G port at 63 GB/s) and a
    non-blocking fabric pays for itself (speed-up above its share of capex)."""
    model, plan = load_model("llama3-8b"), ParallelPlan.build(gpus=512, seq=2048, gbs=512, mbs=1, zero=1)
    result = what_if(model, plan, Scenario("dgx-h100", 512, None, 2.0, _priced_xdr(catalog)), 2.0,
                     (parse_swap("ib=xdr"), parse_swap("oversubscription=1")))
    speedups = {d.layer: d.speedup for d in result.layers}
    assert result.verdict.layer == "infiniband"
    assert speedups["infiniband"] > 1.15 > max(v for k, v in speedups.items() if k != "infiniband")
    flat = next(s for s in result.swaps if s.swap == "oversubscription=1")
    assert flat.worth_it(result.base_capex_usd) is True
    assert result.verdict.swap is not None and not result.verdict.compute_bound
    assert "next dollar goes to" in result.verdict.sentence


def test_tp_ep_heavy_moe_on_hgx_names_nvlink(catalog: Catalog) -> None:
    """A fine-grained MoE (hidden 2048, experts of 1408) with tp=8 and ep=2 on HGX H800 nodes (NVLink cut to
    400 GB/s): per layer the TP all-gathers and reduce-scatters move s*h bytes against only ~6 x 3 h x 1408
    FLOPs per token of expert GEMMs, so NVLink outweighs compute; a 2x faster NVLink buys the most."""
    plan = ParallelPlan.build(gpus=64, tp=8, ep=2, seq=4096, gbs=256, mbs=1, zero=1, recompute="none")
    result = what_if(FINE_MOE, plan, Scenario("hgx-h800", 64, None, 1.0, catalog))
    speedups = {d.layer: d.speedup for d in result.layers}
    assert result.verdict.layer == "nvlink"
    assert speedups["nvlink"] > 1.05 * max(speedups["compute"], speedups["infiniband"])


def test_compute_bound_plan_no_network_upgrade_pays(catalog: Catalog) -> None:
    """llama3-70b, tp=8 pp=4 dp=16, seq 8192, 64 micro-batches per step on a 2:1 fabric: compute is ~2/3 of the
    step; XDR (even at NDR switch prices) and a non-blocking fabric each speed it up by less than they add to
    the cluster's cost, and the verdict says so plainly."""
    model = load_model("llama3-70b")
    plan = ParallelPlan.build(gpus=512, tp=8, pp=4, seq=8192, gbs=1024, mbs=1, zero=1, recompute="selective")
    result = what_if(model, plan, Scenario("dgx-h100", 512, None, 2.0, _priced_xdr(catalog)), 2.0,
                     (parse_swap("ib=xdr"), parse_swap("oversubscription=1")))
    assert result.verdict.layer == "compute" and result.verdict.compute_bound
    for swap in result.swaps:
        assert swap.cost_delta_usd is not None and swap.cost_delta_usd > 0
        assert swap.worth_it(result.base_capex_usd) is False
        assert swap.speedup < 1.05
    assert result.verdict.swap is None
    assert "compute-bound" in result.verdict.sentence and "no network upgrade pays" in result.verdict.sentence


def test_unpriced_swap_is_said_not_guessed(catalog: Catalog) -> None:
    """A swap to a part without a catalog price (the Q3400's taken out here) is named, not guessed."""
    q3400 = catalog.switch("q3400").model_copy(update={"price_usd": None})
    unpriced = catalog.model_copy(update={"switches": {**catalog.switches, "q3400": q3400}})
    model, plan = load_model("llama3-8b"), ParallelPlan.build(gpus=512, seq=2048, gbs=512, mbs=1, zero=1)
    result = what_if(model, plan, Scenario("dgx-h100", 512, None, 2.0, unpriced), 2.0, (parse_swap("ib=xdr"),))
    (xdr,) = result.swaps
    assert xdr.cost_delta_usd is None and xdr.worth_it(result.base_capex_usd) is None
    assert "q3400 price" in result.verdict.sentence


def test_whatif_cli_json_shape(runner: CliRunner) -> None:
    out = runner.invoke(app, ["whatif", "--model", "llama3-8b", "--gpus", "576", "--seq", "2048", "--gbs", "576",
                              "--oversubscription", "2", "--swap", "oversubscription=1", "--swap",
                              "system=gb200-nvl72", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["base_step_s"] > 0
    assert [d["layer"] for d in data["layers"]] == ["compute", "hbm", "nvlink", "pcie", "infiniband"]
    assert all({"layer", "step_time_s", "speedup"} <= set(d) for d in data["layers"])
    assert [s["swap"] for s in data["swaps"]] == ["oversubscription=1", "system=gb200-nvl72"]
    assert all({"swap", "step_time_s", "speedup", "cost_delta_usd"} <= set(s) for s in data["swaps"])
    assert data["verdict"]["layer"] == "infiniband" and data["verdict"]["sentence"]
    assert data["chosen"]["chosen_by"] == "search"
    table = runner.invoke(app, ["whatif", "--model", "llama3-8b", "--gpus", "64", "--tp", "8", "--factor", "3"])
    assert table.exit_code == 0, table.output
    assert "verdict:" in table.output and "3x faster" in table.output


@pytest.mark.parametrize("args", [
    ["--swap", "gpu=b200"],
    ["--swap", "ib=warp"],
    ["--swap", "oversubscription=0.5"],
    ["--swap", "system="],
    ["--factor", "1"],
    ["--factor", "0"],
    ["--system", "dgx-h1000"],
])
def test_whatif_bad_input_is_one_line(runner: CliRunner, args: list[str]) -> None:
    out = runner.invoke(app, ["whatif", "--model", "llama3-8b", "--gpus", "64", "--tp", "8", *args])
    assert out.exit_code == 2, out.output
    assert "Traceback" not in out.output
    assert out.output.strip().startswith("error:") and len(out.output.strip().splitlines()) == 1


def test_a_downgrade_is_said_as_savings_per_percent_slower_never_the_next_dollar(catalog: Catalog) -> None:
    """Issue 21: `--swap ib=hdr` on a DGX H100 plan is slower and cheaper. It is a downgrade: dollars saved per 1%
    slower, no '% faster per $1M', never 'worth it' and never where the next dollar goes."""
    model = load_model("llama3-70b")
    plan = ParallelPlan.build(gpus=512, tp=8, pp=4, seq=8192, gbs=512, mbs=1, zero=1, recompute="selective")
    result = what_if(model, plan, Scenario("dgx-h100", 512, None, 1.0, catalog), 2.0, (parse_swap("ib=hdr"),))
    (hdr,) = result.swaps
    assert hdr.speedup < 1.0 and hdr.cost_delta_usd is not None and hdr.cost_delta_usd < 0
    assert hdr.kind == "downgrade"
    assert hdr.percent_per_million_usd is None
    saved = hdr.savings_usd_per_percent_slower
    assert saved is not None and saved == pytest.approx(-hdr.cost_delta_usd / hdr.percent_slower)
    assert hdr.worth_it(result.base_capex_usd) is False
    assert result.verdict.swap is None and "next dollar goes to ib=hdr" not in result.verdict.sentence
    if (hdr.work_per_usd_change(result.base_capex_usd) or 0.0) > 0:
        assert "a downgrade, if time allows: ib=hdr (saves $" in result.verdict.sentence
    data = hdr.to_json(result.base_capex_usd)
    assert data["kind"] == "downgrade" and data["worth_it"] is False and data["percent_per_million_usd"] is None


def test_whatif_table_says_downgrade_not_faster_per_dollar(runner: CliRunner) -> None:
    out = runner.invoke(app, ["whatif", "--model", "llama3-70b", "--gpus", "512", "--tp", "8", "--pp", "4", "--seq",
                              "8192", "--gbs", "512", "--swap", "ib=hdr"], env={"COLUMNS": "160"})
    assert out.exit_code == 0, out.output
    assert "downgrade: saves $" in out.output and "per 1% slower" in out.output
    assert "faster per $1M" not in out.output and "next dollar goes to ib=hdr" not in out.output
