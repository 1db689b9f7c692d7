"""Issue 45 item 3 (first part): training stacks as profiles. `--framework` on train, whatif and size sets the knobs
a stack runs by default (each read from a named source) where the user left them unset; the megatron profile
changes no prediction; `catalog frameworks` lists them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

import fabricsim
from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.training import FRAMEWORK_SETTABLE, framework_profile, frameworks

STACKS = ("megatron", "torchtitan", "nemo-automodel", "deepspeed", "maxtext")
RUN: dict[str, Any] = {"model": "llama3-8b", "gpus": 64, "goodput": False}


def _without_inputs(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("inputs", "framework")}


def test_the_five_stacks_each_setting_with_its_source() -> None:
    found = frameworks()
    assert set(STACKS) <= set(found)
    for profile in found.values():
        assert profile.source and profile.version
        for name, setting in profile.settings.items():
            assert name in FRAMEWORK_SETTABLE and setting.source.strip(), (profile.id, name)
    assert not found["megatron"].settings  # fabricsim's defaults are Megatron-Core's


def test_names_and_versions_resolve_once_with_clear_errors() -> None:
    assert framework_profile("TorchTitan").id == "torchtitan"
    assert framework_profile("torchtitan@b5bcd76").id == "torchtitan"
    with pytest.raises(SpecError, match=r"^--framework: unknown framework 'titan'; did you mean 'torchtitan'"):
        framework_profile("titan")
    with pytest.raises(SpecError, match="profiled as of b5bcd76"):
        framework_profile("torchtitan@0.1")


def test_megatron_changes_no_prediction() -> None:
    plain = fabricsim.train(**RUN).to_dict()
    named = fabricsim.train(**RUN, framework="megatron").to_dict()
    assert _without_inputs(plain) == _without_inputs(named)
    assert named["framework"] == {"id": "megatron", "name": frameworks()["megatron"].name,
                                  "version": frameworks()["megatron"].version,
                                  "source": frameworks()["megatron"].source, "settings_applied": {}}


def test_a_stack_sets_the_knobs_left_unset_and_the_user_wins() -> None:
    titan = fabricsim.train(**RUN, framework="torchtitan")
    assert (titan.plan.zero, titan.plan.kernels, titan.plan.grad_dtype) == (3, "eager", "fp32")
    assert titan.to_dict()["framework"]["settings_applied"] == {"kernels": "eager", "zero": 3, "grad_dtype": "fp32",
                                                                "tp_comm_overlap": False, "fsdp_copy_out": True}
    given = fabricsim.train(**RUN, framework="torchtitan", zero=1, kernels="fused")
    assert (given.plan.zero, given.plan.kernels) == (1, "fused")
    assert set(given.to_dict()["framework"]["settings_applied"]) == {"grad_dtype", "tp_comm_overlap", "fsdp_copy_out"}
    assert titan.step_time_s != fabricsim.train(**RUN).step_time_s  # eager kernels and FSDP cost time
    maxtext = fabricsim.train(**RUN, framework="maxtext")
    assert (maxtext.plan.recompute, maxtext.plan.dropout, maxtext.plan.zero) == ("full", False, 3)


def test_whatif_and_the_cli_take_it() -> None:
    where = fabricsim.whatif(**RUN, framework="deepspeed")
    assert where.run is not None and where.run.plan.grad_dtype == "bf16"
    run = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--gpus", "64", "--framework", "torchtitan",
                                   "--no-goodput", "--json"])
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["plan"]["zero"] == 3
    table = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--gpus", "64", "--framework", "torchtitan"])
    assert "torchtitan" in table.stdout
    bad = CliRunner().invoke(app, ["train", "--framework", "megatronn"])
    assert bad.exit_code == 2 and "--framework: unknown framework 'megatronn'" in bad.stderr


def test_size_searches_as_the_stack_runs() -> None:
    from fabricsim.api.size_spec import sizing_spec

    base: dict[str, Any] = dict.fromkeys(
        ("tokens", "deadline", "budget", "power_cap", "gpus", "nodes", "systems", "fabrics", "fabric_kinds", "tp",
         "pp", "cp", "ep", "etp", "vpp", "mbs", "recompute", "zero", "precision", "dropout", "ep_comm_overlap",
         "shared_expert_overlap", "moe_balance", "moe_dispatcher", "capacity_factor", "amortize", "gpu_hour", "pue",
         "kwh", "out", "storage_bw", "storage_network", "storage_server", "storage_servers", "spares",
         "checkpoint_interval", "restart", "calibration"))
    base |= {"model": "llama3-8b", "oversubscription": "1", "rail_optimized": True, "seq": 4096, "gbs": "512",
             "flash_attn": True, "overlap": True, "objective": "cost", "top": 10, "resume": False,
             "exhaustive": False, "goodput": False, "storage": "superpod-better", "checkpoint_mode": "sync",
             "mtbf_scale": 1.0, "inference": False}
    titan = sizing_spec(**base, framework="torchtitan")
    assert titan.knobs.zero == (3,) and titan.fixed["kernels"] == "eager" and titan.fixed["grad_dtype"] == "fp32"
    mine = sizing_spec(**{**base, "zero": "1,2"}, framework="torchtitan")
    assert mine.knobs.zero == (1, 2)
    plain = sizing_spec(**base, framework=None)
    assert plain.knobs.zero is None and "kernels" not in plain.fixed
    # every setting a stack fixes holds in the search as in `train` (FSDP2's copy-out, DeepSpeed's ZeRO-3 calls)
    assert titan.fixed["fsdp_copy_out"] is True
    deepspeed = sizing_spec(**{**base, "zero": "3"}, framework="deepspeed")
    assert deepspeed.fixed["zero3_gathers_per_layer"] == 7 and deepspeed.fixed["zero3_reduce_bucket_params"] == 5e8
    with pytest.raises(SpecError, match="--framework"):
        fabricsim.size(model="llama3-8b", inference=True, rate="5", framework="torchtitan")


def test_catalog_lists_the_stacks() -> None:
    run = CliRunner().invoke(app, ["catalog", "frameworks", "--json"])
    assert run.exit_code == 0, run.output
    listed = json.loads(run.stdout)["frameworks"]
    assert [f["id"] for f in listed] == list(frameworks())
    assert all(f["source"] for f in listed)
