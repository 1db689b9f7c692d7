"""Each training stack's own launch line beside `train`'s prediction: the plan's parallel sizes, batch, sequence,
recompute, ZeRO stage and precision in that stack's syntax (flag names read from its source), a config file where
the stack reads one, and a one-line reason, never a wrong line, where the stack's flags cannot state the plan."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim import train
from fabricsim.cli import app
from fabricsim.model import load_model
from fabricsim.training import ParallelPlan, framework_launch_json, framework_profile, frameworks

runner = CliRunner()
STACKS = ("megatron", "torchtitan", "nemo-automodel", "deepspeed", "maxtext")


def _launch(stack: str, model: str = "llama3-70b", **plan: Any) -> dict[str, Any]:
    fields = {"tp": 4, "pp": 2, "dp": 8, "mbs": 1, "gbs": 256, "seq": 4096, "recompute": "full", "zero": 1,
              **plan}
    return framework_launch_json(framework_profile(stack), ParallelPlan.build(**fields), load_model(model), model, 8)


def test_every_stack_has_a_sourced_launch_template() -> None:
    for stack in STACKS:
        launch = frameworks()[stack].launch
        assert launch is not None and launch.read_at and launch.source
    assert "d98e8a6" in frameworks()["megatron"].launch.source  # type: ignore[union-attr]


def test_megatron_states_the_plan_in_pretrain_gpt_flags() -> None:
    line = _launch("megatron")["train"]
    argv = line["argv"]
    assert argv[:6] == ["torchrun", "--nnodes", "8", "--nproc_per_node", "8", "pretrain_gpt.py"]

    def value(flag: str) -> str:
        return str(argv[argv.index(flag) + 1])

    assert (value("--tensor-model-parallel-size"), value("--pipeline-model-parallel-size")) == ("4", "2")
    assert (value("--micro-batch-size"), value("--global-batch-size"), value("--seq-length")) == ("1", "256", "4096")
    assert value("--recompute-granularity") == "full" and "--use-distributed-optimizer" in argv
    assert value("--num-query-groups") == "8" and "--sequence-parallel" in argv and "--bf16" in argv
    moe = _launch("megatron", "mixtral-8x7b", tp=2, pp=1, dp=32, ep=8, etp=1, gbs=512)["train"]["argv"]
    assert moe[moe.index("--expert-model-parallel-size") + 1] == "8"
    assert moe[moe.index("--expert-tensor-parallel-size") + 1] == "1"


def test_torchtitan_states_batches_in_tokens_and_recompute_as_its_subcommand() -> None:
    argv = _launch("torchtitan", zero=3)["train"]["argv"]
    assert argv[argv.index("--module") + 1] == "llama3" and argv[argv.index("--config") + 1] == "llama3_70b"
    assert argv[argv.index("--parallelism.data_parallel_shard_degree") + 1] == "8"
    assert argv[argv.index("--training.num_tokens_per_microbatch_per_dp_rank") + 1] == str(4096)
    assert argv[argv.index("--training.num_tokens_per_train_step") + 1] == str(256 * 4096)
    assert argv[-1] == "activation-checkpoint:full"
    other = _launch("torchtitan", "gpt3-175b", tp=8, pp=1, dp=8, zero=3)["train"]
    assert "MODULE" in other["argv"] and any("write one for gpt3-175b" in n for n in other["notes"])


def test_config_file_stacks_write_files_their_loaders_read() -> None:
    ds = _launch("deepspeed", pp=1, dp=16, zero=3)["train"]
    config = json.loads(ds["config_files"]["ds_config.json"])
    assert config["train_batch_size"] == 256 and config["train_micro_batch_size_per_gpu"] == 1
    assert config["gradient_accumulation_steps"] == 16 and config["zero_optimization"]["stage"] == 3
    assert config["tensor_parallel"]["autotp_size"] == 4 and config["bf16"]["enabled"] is True
    assert ds["argv"][-1] == "ds_config.json"
    am = _launch("nemo-automodel", zero=3)["train"]
    recipe = yaml.safe_load(am["config_files"]["automodel.yaml"])
    assert recipe["distributed"] == {**recipe["distributed"], "strategy": "fsdp2", "dp_size": 8, "tp_size": 4,
                                     "pp_size": 2}
    assert recipe["step_scheduler"] == {"local_batch_size": 1, "global_batch_size": 256}
    assert recipe["distributed"]["activation_checkpointing"] is True


def test_maxtext_lays_the_plan_on_its_mesh() -> None:
    argv = _launch("maxtext", zero=3)["train"]["argv"]
    assert "model_name=llama3.1-70b" in argv and "ici_tensor_parallelism=4" in argv
    assert "ici_fsdp_parallelism=2" in argv and "dcn_fsdp_parallelism=4" in argv  # 4 x 2 in a node, 4 x 2 nodes
    assert "dcn_pipeline_parallelism=2" in argv and "remat_policy=full" in argv
    refused = _launch("maxtext", tp=4, cp=4, pp=1, dp=2, gbs=256)  # tp x cp = 16 GPUs span two 8-GPU nodes
    assert "cannot place this plan" in refused["error"]


@pytest.mark.parametrize(("stack", "plan", "option"), [
    ("deepspeed", {"virtual_stages": 2, "pp": 4, "dp": 4}, "vpp"),
    ("torchtitan", {"pp": 1, "dp": 16, "ep": 8, "etp": 1}, "etp"),
])
def test_a_plan_the_stack_cannot_state_is_refused_in_one_line(stack: str, plan: dict[str, Any], option: str) -> None:
    model = "mixtral-8x7b" if "ep" in plan else "llama3-70b"
    out = _launch(stack, model, **plan)
    assert set(out) == {"error"} and f"cannot state {option}=" in out["error"]


@settings(max_examples=30, deadline=None)
@given(stack=st.sampled_from(STACKS), tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2]),
       dp=st.sampled_from([1, 2, 8]), recompute=st.sampled_from(["none", "selective", "full"]),
       zero=st.sampled_from([0, 1, 2, 3]), precision=st.sampled_from(["bf16", "fp8"]))
def test_a_line_or_a_reason_for_every_plan(stack: str, tp: int, pp: int, dp: int, recompute: str, zero: int,
                                           precision: str) -> None:
    out = _launch(stack, "llama3-8b", tp=tp, pp=pp, dp=dp, gbs=16 * dp, recompute=recompute,
                  zero=zero if pp == 1 or zero < 3 else 1, precision=precision)
    assert ("train" in out) != ("error" in out)
    if "train" in out:
        assert out["train"]["command"].split()[0] in ("torchrun", "deepspeed", "python3")


def test_train_prints_the_stacks_line_and_the_api_carries_it() -> None:
    result = train(model="llama3-8b", gpus=16, tp=2, framework="torchtitan")
    assert result.data["launch"]["train"]["engine"] == "torchtitan@b5bcd76"
    assert result.step_time_s > 0
    out = runner.invoke(app, ["train", "--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--framework",
                              "deepspeed"])
    assert out.exit_code == 0, out.output
    assert "launch (deepspeed@edaa722): deepspeed --num_nodes 2 --num_gpus 8 train.py" in " ".join(out.output.split())
