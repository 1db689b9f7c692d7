"""An engine's own launch settings for a plan (issue 23, item 4): the command line (and config file) that starts
vLLM, SGLang or TensorRT-LLM with the parallelism, formats, batch and budget fabricsim priced."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.catalog import default_catalog
from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.inference import InferencePlan, launch_json, launch_settings

H100 = default_catalog().gpu("h100-sxm")
TP_FLAG = {"vllm": "--tensor-parallel-size", "sglang": "--tp-size", "trtllm": "--tp_size"}
BATCH_FLAG = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests", "trtllm": "--max_batch_size"}
MEMORY_FLAG = {"vllm": "--gpu-memory-utilization", "sglang": "--mem-fraction-static",
               "trtllm": "--kv_cache_free_gpu_memory_fraction"}


def _value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@given(st.sampled_from(["vllm", "vllm@0.8", "vllm@0.6", "sglang", "trtllm"]), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from(["bf16", "fp8"]), st.sampled_from(["bf16", "fp8"]), st.integers(1, 4096))
def test_the_command_states_the_plan_it_was_priced_with(engine: str, tp: int, weights: str, kv: str,
                                                        seqs: int) -> None:
    plan = InferencePlan(tp=tp, weights=weights, kv=kv, engine=engine)
    s = launch_settings(plan, H100, "org/model", max_seqs=seqs)
    name = engine.split("@")[0]
    assert "org/model" in s.argv
    assert (_value(s.argv, TP_FLAG[name]) == str(tp)) if tp > 1 else TP_FLAG[name] not in s.argv
    assert _value(s.argv, BATCH_FLAG[name]) == str(seqs)
    assert float(_value(s.argv, MEMORY_FLAG[name])) == plan.engine_profile.settings.kv_memory.fraction
    said_fp8_kv = "fp8" in s.command or any("fp8" in text for text in s.config_files.values())
    assert said_fp8_kv is (kv == "fp8" or (weights == "fp8" and name != "trtllm"))
    if name == "trtllm" and weights == "fp8":
        assert any("FP8 checkpoint" in note for note in s.notes)  # read from the checkpoint, said in a note


def test_attention_data_parallel_spans_the_tensor_parallel_group_where_the_engine_says_so() -> None:
    """SGLang and TensorRT-LLM size their tensor-parallel flag as the whole group, with attention data parallel
    switched on; vLLM gives both sizes."""
    plan = {"tp": 1, "dp": 8, "ep": 8, "batch": 8}
    sg = launch_settings(InferencePlan(**plan, engine="sglang"), H100, "m")
    assert _value(sg.argv, "--tp-size") == "8" and _value(sg.argv, "--dp-size") == "8"
    assert "--enable-dp-attention" in sg.argv and _value(sg.argv, "--ep-size") == "8"
    trt = launch_settings(InferencePlan(**plan, kv="fp8", engine="trtllm"), H100, "m")
    assert _value(trt.argv, "--tp_size") == "8" and _value(trt.argv, "--ep_size") == "8"
    assert trt.argv[-2:] == ("--extra_llm_api_options", "extra-llm-api-config.yml")
    assert trt.config_files["extra-llm-api-config.yml"] == ('enable_attention_dp: true\nkv_cache_config:\n'
                                                            '  dtype: "fp8"\n')
    vl = launch_settings(InferencePlan(**plan, engine="vllm"), H100, "m")
    assert _value(vl.argv, "--data-parallel-size") == "8" and "--enable-expert-parallel" in vl.argv


def test_what_a_release_cannot_state_is_a_one_line_error() -> None:
    with pytest.raises(SpecError, match="cannot state dp=2"):
        launch_settings(InferencePlan(dp=2, batch=2, engine="vllm@0.6"), H100, "m")
    with pytest.raises(SpecError, match=r"no launch settings .*trtllm@1\.0\+"):
        launch_settings(InferencePlan(engine="trtllm@0.9"), H100, "m")
    with pytest.raises(SpecError, match="no disaggregated launch settings"):
        launch_settings(InferencePlan(engine="trtllm"), H100, "m", role="prefill")
    assert "error" in launch_json(InferencePlan(engine="trtllm"), H100, "m", disagg=(1, 2))


def test_disaggregated_pools_get_their_role() -> None:
    sg = launch_json(InferencePlan(tp=2, engine="sglang"), H100, "m", disagg=(1, 3))
    assert sg["prefill"]["instances"] == 1 and sg["decode"]["instances"] == 3
    assert "--disaggregation-mode prefill" in sg["prefill"]["command"]
    assert "--disaggregation-mode decode" in sg["decode"]["command"]
    vl = launch_json(InferencePlan(tp=2, engine="vllm"), H100, "m", disagg=(2, 2))
    config = json.loads(vl["decode"]["argv"][vl["decode"]["argv"].index("--kv-transfer-config") + 1])
    assert config == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def test_whole_prompts_are_said_to_each_engine() -> None:
    """SGLang without chunking: -1 and the prefill budget; vLLM 0.6 leaves its whole-prompt budget to the engine."""
    sg = launch_settings(InferencePlan(engine="sglang"), H100, "m", chunked_prefill=False, max_batched_tokens=16384)
    assert _value(sg.argv, "--chunked-prefill-size") == "-1" and _value(sg.argv, "--max-prefill-tokens") == "16384"
    v0 = launch_settings(InferencePlan(engine="vllm@0.6"), H100, "m")
    assert "--max-num-batched-tokens" not in v0.argv and "--enable-chunked-prefill" not in v0.argv


def test_infer_and_size_print_the_launch_command() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["infer", "--model", "llama3-8b", "--engine", "vllm", "--checkpoint",
                              "meta-llama/Llama-3.1-8B-Instruct", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["launch"]["serve"]["command"].startswith(
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 1024")
    served = runner.invoke(app, ["infer", "--model", "llama3-8b", "--engine", "sglang", "--rate", "2", "--duration",
                                 "20s", "--max-seqs", "64", "--disagg", "1:1"])
    assert served.exit_code == 0, served.output
    assert "launch prefill (sglang@0.5)" in served.output and "--max-running-requests 64" in served.output
    size = runner.invoke(app, ["size", "--inference", "--model", "llama3-8b", "--rate", "5", "--slo-ttft", "2s",
                               "--slo-tpot", "80ms", "--systems", "dgx-h100", "--engine", "sglang", "--json"])
    assert size.exit_code == 0, size.output
    best = json.loads(size.output)["results"][0]
    assert best["launch"]["serve"]["command"].startswith("python3 -m sglang.launch_server --model-path llama3-8b")


def test_a_plan_counting_on_the_host_tier_switches_it_on() -> None:
    sg = launch_settings(InferencePlan(engine="sglang", prefix_host=0.5), H100, "m")
    assert "--enable-hierarchical-cache" in sg.argv
    assert "--enable-hierarchical-cache" not in launch_settings(InferencePlan(engine="sglang"), H100, "m").argv
    vl = launch_settings(InferencePlan(engine="vllm", prefix_host=0.5), H100, "m")
    assert any("OffloadingConnector" in note for note in vl.notes)


def test_size_names_the_checkpoint_and_refuses_it_for_training() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["size", "--inference", "--model", "llama3-8b", "--rate", "5", "--slo-ttft", "2s",
                              "--slo-tpot", "80ms", "--systems", "dgx-h100", "--checkpoint", "org/ckpt", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["results"][0]["launch"]["serve"]["argv"][1] == "org/ckpt"
    wrong = runner.invoke(app, ["size", "--model", "llama3-8b", "--checkpoint", "org/ckpt"])
    assert wrong.exit_code == 2 and "--checkpoint" in wrong.output
