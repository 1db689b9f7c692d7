"""Disaggregated serving as deployed (issue 23, item 4): the decode pool on its own parallelism and GPU type, the KV
hand-off priced for both pools' shards, and each pool's launch command."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fabricsim.catalog import default_catalog
from fabricsim.cli import app
from fabricsim.comm import Cluster
from fabricsim.inference import InferencePlan, step_cost, with_kv_handoff
from fabricsim.model import load_model

BASE = ["infer", "--model", "llama3-70b", "--system", "dgx-h100", "--tp", "4", "--weights", "fp8", "--kv", "fp8",
        "--prompt", "2048", "--output", "128", "--rate", "4", "--duration", "30s", "--disagg", "1:1", "--json"]


def _run(*extra: str) -> dict[str, object]:
    out = CliRunner().invoke(app, [*BASE, *extra])
    assert out.exit_code == 0, out.output
    data: dict[str, object] = json.loads(out.output)
    return data


def test_the_decode_pool_runs_its_own_plan_and_gpu() -> None:
    """A TP2 decode pool on H200 (more HBM bandwidth) decodes faster than the same pool on H100; its plan and
    launch command are reported."""
    h100 = _run("--decode-tp", "2")
    h200 = _run("--decode-tp", "2", "--decode-system", "hgx-h200", "--engine", "sglang")
    h100_sg = _run("--decode-tp", "2", "--engine", "sglang")
    assert h200["decode_pool"] == {"system": "hgx-h200", "plan": h200["decode_pool"]["plan"]}  # type: ignore[index]
    assert h200["decode_pool"]["plan"]["tp"] == 2  # type: ignore[index]
    assert h200["tpot_s_p50"] < h100_sg["tpot_s_p50"]  # type: ignore[operator]
    assert "--tp-size 2" in h200["launch"]["decode"]["command"]  # type: ignore[index]
    assert "--tp-size 4" in h200["launch"]["prefill"]["command"]  # type: ignore[index]
    assert h100["decode_pool"]["plan"]["tp"] == 2  # type: ignore[index]


def test_decode_options_need_a_disaggregated_layout() -> None:
    out = CliRunner().invoke(app, ["infer", "--model", "llama3-8b", "--rate", "2", "--decode-tp", "2"])
    assert out.exit_code == 2 and "--decode-tp" in out.output and "--disagg" in out.output


def test_the_smaller_pool_sets_the_kv_hand_off() -> None:
    """Every GPU of each pool moves its shard at once: a one-GPU decode pool takes the whole KV through one GPU."""
    model = load_model("llama3-70b")
    catalog = default_catalog()
    cluster = Cluster(catalog.system("dgx-h100"), catalog=catalog)
    prefill = InferencePlan(tp=4, weights="fp8", kv="fp8", prompt_tokens=2048, output_tokens=128)
    cost = step_cost(model, cluster, prefill)
    same = with_kv_handoff(cost, model, cluster, prefill, prefill)
    narrow = with_kv_handoff(cost, model, cluster, prefill, InferencePlan(tp=1, weights="fp8", kv="fp8"))
    for same_node in (True, False):
        assert same.kv_transfer_s(4096, same_node) == cost.kv_transfer_s(4096, same_node)
        assert narrow.kv_transfer_s(4096, same_node) > same.kv_transfer_s(4096, same_node)
