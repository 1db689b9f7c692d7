"""Issue 43, items 15 and 16: options accepted and ignored where another command refuses them, and errors that
named the wrong cause; each is a one-line `error:` naming the option (exit 2) on the CLI and a SpecError in the API."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

import fabricsim
from fabricsim.cli import app

TRAIN = ["--model", "llama3-8b", "--gpus", "8"]


def _refused(runner: CliRunner, args: list[str], *needles: str) -> str:
    """The command exits 2 with one `error:` line holding every needle."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    text = result.output.strip()
    assert text.startswith("error:") and len(text.splitlines()) == 1, text
    for needle in needles:
        assert needle in text, text
    return text


def _api_refuses(func: Any, kwargs: dict[str, Any], *needles: str) -> None:
    with pytest.raises(fabricsim.SpecError) as info:
        func(**kwargs)
    for needle in needles:
        assert needle in str(info.value), str(info.value)


# --planes: the values `topo` builds (a port's lanes split 1, 2, 4 or 8 ways, as the switch allows)

@pytest.mark.parametrize("planes", ["0", "-1", "3", "16"])
def test_train_refuses_planes_topo_refuses(runner: CliRunner, planes: str) -> None:
    _refused(runner, ["train", *TRAIN, "--planes", planes], "--planes", "1, 2, 4 or 8")
    _refused(runner, ["topo", "--planes", planes], "--planes", "1, 2, 4 or 8")
    _api_refuses(fabricsim.train, {"model": "llama3-8b", "gpus": 8, "planes": int(planes)}, "--planes")


def test_train_refuses_planes_the_switch_cannot_split(runner: CliRunner) -> None:
    """sn5600's 800 Gb/s ports do not split into 8 planes of a 400 Gb/s NIC: `topo` and `train` say so alike."""
    _refused(runner, ["topo", "--ib", "eth-800g", "--planes", "8"], "do not split")
    _refused(runner, ["train", *TRAIN, "--ib", "eth-800g", "--planes", "8"], "--planes", "do not split")


def test_train_takes_planes_topo_builds(runner: CliRunner) -> None:
    result = runner.invoke(app, ["train", *TRAIN, "--planes", "2", "--json"])
    assert result.exit_code == 0, result.output


# --dragonfly-routing: known routings, on a dragonfly, acting on the flow simulator

@pytest.mark.parametrize("command", [["train", *TRAIN], ["collective"], ["topo"], ["traffic", "--bytes", "1M"]])
def test_unknown_dragonfly_routing_is_refused(runner: CliRunner, command: list[str]) -> None:
    _refused(runner, [*command, "--dragonfly-routing", "bogus"], "--dragonfly-routing", "minimal, valiant, ugal")


def test_dragonfly_routing_api() -> None:
    _api_refuses(fabricsim.train, {"model": "llama3-8b", "gpus": 8, "dragonfly_routing": "bogus"},
                 "--dragonfly-routing", "ugal")
    _api_refuses(fabricsim.collective, {"dragonfly_routing": "bogus"}, "--dragonfly-routing")
    _api_refuses(fabricsim.topology, {"dragonfly_routing": "valiant"}, "--dragonfly-routing", "--fabric dragonfly")


def test_dragonfly_routing_on_a_fat_tree_is_refused(runner: CliRunner) -> None:
    _refused(runner, ["topo", "--dragonfly-routing", "valiant"], "--dragonfly-routing", "--fabric dragonfly")
    _refused(runner, ["train", *TRAIN, "--dragonfly-routing", "ugal"], "--dragonfly-routing", "--fabric dragonfly")


def test_dragonfly_routing_needs_the_flow_simulator(runner: CliRunner) -> None:
    """The analytical model prices a dragonfly as a tapered fat tree: no routing changes it."""
    _refused(runner, ["train", "--model", "llama3-8b", "--gpus", "2048", "--fabric", "dragonfly",
                      "--dragonfly-routing", "valiant"], "--dragonfly-routing", "--sim flow")
    _refused(runner, ["collective", "--nodes", "200", "--fabric", "dragonfly", "--dragonfly-routing", "ugal"],
             "--dragonfly-routing", "--sim flow")


def test_topo_still_builds_a_routed_dragonfly(runner: CliRunner) -> None:
    result = runner.invoke(app, ["topo", "--fabric", "dragonfly", "--nodes", "400", "--dragonfly-routing", "valiant",
                                 "--json"])
    assert result.exit_code == 0, result.output


# train --fabric dragonfly below two groups

def test_train_refuses_a_dragonfly_of_one_group(runner: CliRunner) -> None:
    topo = _refused(runner, ["topo", "--fabric", "dragonfly", "--nodes", "1"], "one dragonfly group")
    assert "128 nodes" in topo
    _refused(runner, ["train", *TRAIN, "--fabric", "dragonfly"], "--gpus", "one dragonfly group (128 nodes")
    _refused(runner, ["train", *TRAIN, "--fabric", "dragonfly", "--cluster-nodes", "100"], "--cluster-nodes",
             "one dragonfly group")
    _api_refuses(fabricsim.train, {"model": "llama3-8b", "gpus": 8, "fabric_kind": "dragonfly"}, "dragonfly group")


def test_train_takes_a_dragonfly_of_two_groups(runner: CliRunner) -> None:
    result = runner.invoke(app, ["train", *TRAIN, "--fabric", "dragonfly", "--cluster-nodes", "200", "--json"])
    assert result.exit_code == 0, result.output


# topo --storage

def test_topo_refuses_an_unknown_storage_tier(runner: CliRunner) -> None:
    _refused(runner, ["topo", "--storage", "bogus"], "--storage", "superpod-best, superpod-better, superpod-good")
    _api_refuses(fabricsim.topology, {"storage": "bogus"}, "--storage", "superpod-good")


def test_topo_storage_without_a_storage_network_says_why(runner: CliRunner) -> None:
    _refused(runner, ["topo", "--storage", "superpod-best"], "--storage", "--storage-network separate or converged")
    _api_refuses(fabricsim.topology, {"storage": "superpod-best"}, "--storage-network")


def test_topo_storage_tier_with_a_network_sizes_the_servers(runner: CliRunner) -> None:
    import json

    best = runner.invoke(app, ["topo", "--nodes", "16", "--storage-network", "separate", "--storage", "superpod-best",
                               "--json"])
    default = runner.invoke(app, ["topo", "--nodes", "16", "--storage-network", "separate", "--json"])
    assert best.exit_code == 0 and default.exit_code == 0, best.output + default.output
    tier_best = json.loads(best.output)["storage"]["tier"]
    tier_default = json.loads(default.output)["storage"]["tier"]
    assert (tier_best, tier_default) == ("superpod-best", "superpod-better")


# MoE options on a dense model

@pytest.mark.parametrize("flag", [["--moe-balance", "forced"], ["--moe-dispatcher", "deepep"],
                                  ["--capacity-factor", "1.25"], ["--ep-comm-overlap"], ["--shared-expert-overlap"]])
@pytest.mark.parametrize("command", ["train", "whatif"])
def test_moe_options_on_a_dense_model_are_refused(runner: CliRunner, flag: list[str], command: str) -> None:
    _refused(runner, [command, *TRAIN, *flag], flag[0], "mixture-of-experts", "llama3-8b is dense")


def test_moe_options_at_their_defaults_are_not_refused(runner: CliRunner) -> None:
    result = runner.invoke(app, ["train", *TRAIN, "--no-ep-comm-overlap", "--no-shared-expert-overlap", "--json"])
    assert result.exit_code == 0, result.output


def test_moe_options_api() -> None:
    for func in (fabricsim.train, fabricsim.whatif):
        _api_refuses(func, {"model": "llama3-8b", "gpus": 8, "moe_dispatcher": "deepep"}, "--moe-dispatcher",
                     "dense")
    _api_refuses(fabricsim.size, {"model": "llama3-8b", "tokens": "1B", "gpus": "8", "executor": "serial",
                                  "moe_balance": "forced"}, "--moe-balance", "dense")


def test_shared_expert_overlap_needs_shared_experts(runner: CliRunner) -> None:
    _refused(runner, ["train", "--model", "mixtral-8x7b", "--gpus", "8", "--shared-expert-overlap"],
             "--shared-expert-overlap", "shared experts", "mixtral-8x7b has none")


def test_moe_options_still_act_on_an_moe_model(runner: CliRunner) -> None:
    result = runner.invoke(app, ["train", "--model", "mixtral-8x7b", "--gpus", "8", "--moe-balance", "forced",
                                 "--json"])
    assert result.exit_code == 0, result.output


# --capacity-factor: finite and > 0

@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_capacity_factor_must_be_finite_and_positive(runner: CliRunner, value: str) -> None:
    text = _refused(runner, ["train", "--model", "mixtral-8x7b", "--gpus", "8", "--capacity-factor", value],
                    "capacity-factor", "finite number > 0")
    assert "less than or equal" not in text
    _api_refuses(fabricsim.train, {"model": "mixtral-8x7b", "gpus": 8, "capacity_factor": float(value)},
                 "finite number > 0")


def test_size_capacity_factor_nan_says_finite(runner: CliRunner) -> None:
    _refused(runner, ["size", "--model", "mixtral-8x7b", "--tokens", "1B", "--gpus", "8", "--executor", "serial",
                      "--capacity-factor", "nan"], "--capacity-factor", "finite")


# lists with an empty element; empty names

def test_size_refuses_an_empty_list_element(runner: CliRunner) -> None:
    _refused(runner, ["size", "--model", "llama3-8b", "--tokens", "1B", "--gpus", "8", "--executor", "serial",
                      "--spares", "0,,5%"], "--spares", "empty element")


def test_empty_checkpoint_is_refused(runner: CliRunner) -> None:
    _refused(runner, ["traffic", "--nodes", "4", "--bytes", "1G", "--checkpoint", ""], "--checkpoint", "empty")
    _refused(runner, ["size", "--inference", "--model", "llama3-8b", "--rate", "1", "--slo-ttft", "2s",
                      "--slo-tpot", "50ms", "--checkpoint", " "], "--checkpoint", "empty")


# errors that named the wrong cause

def test_collective_torus_says_the_flow_simulator_prices_it(runner: CliRunner) -> None:
    text = _refused(runner, ["collective", "--fabric", "torus"], "--fabric", "--sim flow", "fat-tree-like")
    assert "rail-only and --planes" not in text
    _refused(runner, ["collective", "--fabric", "bogus"], "--fabric", "unknown fabric")
    _refused(runner, ["collective", "--planes", "2"], "--planes", "--sim flow")


def test_storage_servers_beyond_the_storage_fabric_names_the_count(runner: CliRunner) -> None:
    for command in (["train", *TRAIN], ["topo", "--nodes", "4", "--storage-network", "separate"]):
        text = _refused(runner, [*command, "--storage-servers", "100000"], "--storage-servers", "at most")
        assert "--storage-network" not in text
    most = int(text.split("at most ")[1].split()[0])
    ok = runner.invoke(app, ["topo", "--nodes", "4", "--storage-network", "separate", "--storage-servers", str(most)])
    assert ok.exit_code == 0, ok.output
    _refused(runner, ["topo", "--nodes", "4", "--storage-network", "separate", "--storage-servers", str(most + 1)],
             "--storage-servers", f"at most {most}")
