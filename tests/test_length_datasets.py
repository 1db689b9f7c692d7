"""Request lengths drawn from a benchmark's dataset (``--lengths sharegpt``): the packaged per-request pairs, scaled
to the replay's means, keep their order and spread; every command that simulates arrivals takes them, and the
serving cases whose client sampled ShareGPT with vLLM's sampler replay them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.serving import all_at_once, length_dataset, length_datasets, poisson_requests
from fabricsim.sizing import InferenceSizingSpec
from fabricsim.validation.serving_cases import case_dataset

runner = CliRunner()


def test_the_sharegpt_sample_is_sourced_and_paired() -> None:
    data = length_datasets()["sharegpt"]
    assert "surajssd/llm-k8s@58b61c5" in data.source and "seed 0" in data.source
    assert len(data.prompt_tokens) == len(data.output_tokens) == 200
    assert int(data.prompt_tokens.sum()) == 42659 and int(data.output_tokens.sum()) == 42398  # the file's totals
    assert data.prompt_tokens.max() <= 1024  # vLLM's sampler keeps prompts of at most 1024 tokens
    assert int((data.prompt_tokens + data.output_tokens).max()) <= 2048


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3000), prompt=st.integers(16, 8000), output=st.integers(16, 4000))
def test_a_draw_keeps_the_means_and_the_order(n: int, prompt: int, output: int) -> None:
    data = length_dataset("sharegpt")
    assert data is not None
    prompts, outputs = data.draw(n, prompt, output)
    assert len(prompts) == len(outputs) == n and prompts.min() >= 1 and outputs.min() >= 1
    if n % len(data.prompt_tokens) == 0:  # whole cycles: the means are the ones asked for, to rounding
        assert prompts.mean() == pytest.approx(prompt, rel=0.01, abs=0.5)
        assert outputs.mean() == pytest.approx(output, rel=0.01, abs=0.5)
    order = np.argsort(data.prompt_tokens[: min(n, 200)], kind="stable")
    assert np.all(np.diff(prompts[: min(n, 200)][order]) >= 0)  # scaling keeps each request's rank
    assert int((prompts + outputs).max()) <= data.longest(prompt, output)


def test_fixed_is_none_and_an_unknown_name_lists_the_known() -> None:
    assert length_dataset("fixed") is None
    with pytest.raises(SpecError, match=r"unknown length dataset 'sharegtp'.*did you mean 'sharegpt'.*fixed"):
        length_dataset("sharegtp")


def test_arrivals_take_the_dataset_lengths() -> None:
    data = length_dataset("sharegpt")
    fixed = poisson_requests(20.0, 60.0, seed=3, prompt=512, output=128)
    drawn = poisson_requests(20.0, 60.0, seed=3, prompt=512, output=128, dataset=data)
    assert np.array_equal(fixed.arrival_s, drawn.arrival_s)  # the same Poisson arrivals
    assert np.all(fixed.prompt_tokens == 512) and drawn.prompt_tokens.std() > 100
    burst = all_at_once(300, prompt=512, output=128, dataset=data)
    assert np.all(burst.arrival_s == 0.0) and burst.output_tokens.max() > 3 * 128
    with pytest.raises(SpecError):
        all_at_once(0, prompt=512, output=128)


def test_a_spread_of_lengths_lengthens_the_tail() -> None:
    """The same means with the dataset's spread: the longest requests (its tail) take longer than a request at the
    mean lengths."""
    args = ["infer", "--model", "llama3-8b", "--system", "dgx-h100", "--tp", "1", "--prompt", "220", "--output",
            "200", "--engine", "vllm@0.11", "--rate", "50", "--duration", "20s", "--json"]
    fixed = json.loads(runner.invoke(app, args).stdout)
    drawn = json.loads(runner.invoke(app, [*args, "--lengths", "sharegpt"]).stdout)
    assert drawn["serving_options"]["lengths"] == "sharegpt" and fixed["serving_options"]["lengths"] == "fixed"
    assert drawn["e2e_s_p99"] > fixed["e2e_s_p99"]  # the longest requests take longer than the mean one


def test_lengths_need_arrivals_to_act_on() -> None:
    base = ["infer", "--model", "llama3-8b", "--system", "dgx-h100", "--tp", "1"]
    out = runner.invoke(app, [*base, "--lengths", "sharegpt"])
    assert out.exit_code != 0 and "--lengths" in out.output and "--rate" in out.output
    out = runner.invoke(app, [*base, "--rate", "5", "--lengths", "alpaca"])
    assert out.exit_code != 0 and "unknown length dataset 'alpaca'" in out.output
    out = runner.invoke(app, ["size", "--model", "llama3-8b", "--lengths", "sharegpt"])
    assert out.exit_code != 0 and "--lengths" in out.output and "--inference" in out.output


def test_size_inference_fits_the_longest_request() -> None:
    fixed = InferenceSizingSpec(model="llama3-8b", rate_per_s=5, slo_ttft_s=1, slo_tpot_s=0.05, prompt_tokens=1000,
                                output_tokens=200)
    drawn = fixed.model_copy(update={"lengths": "sharegpt"})
    assert fixed.longest_request_tokens == 1200
    assert drawn.longest_request_tokens > 3 * 1200
    with pytest.raises(ValueError, match="unknown length dataset"):
        InferenceSizingSpec(model="llama3-8b", rate_per_s=5, slo_ttft_s=1, slo_tpot_s=0.05, lengths="nope")


def test_serving_cases_replay_the_sampler_their_client_ran() -> None:
    vllm = {"dataset": "sharegpt", "framework": "vLLM", "flags": "vllm bench serve --dataset-name sharegpt"}
    assert case_dataset(vllm) is length_dataset("sharegpt")
    assert case_dataset({**vllm, "framework": "SGLang"}) is None  # bench_serving: no 1024/2048 caps
    assert case_dataset({**vllm, "flags": "python -m sglang.bench_serving --dataset-name sharegpt"}) is None
    assert case_dataset({"dataset": "random (range ratio 0: fixed input length)"}) is None
