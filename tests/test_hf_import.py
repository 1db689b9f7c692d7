"""Hugging Face config import: every shipped config reproduces its published parameter count, Llama 3.1 70B imports
as the llama3-70b preset (same spec, same predicted step), folders, cache entries and hf:org/name resolve from the
local cache only, what the spec cannot hold is named in one ignored line, and bad configs are one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricsim.cli import app
from fabricsim.errors import SpecError
from fabricsim.model import (
    HFImport,
    import_hf_config,
    known_architectures,
    load_model,
    load_model_import,
    preset,
    shipped_configs,
)

CARDS = {card.id: card for card in shipped_configs()}
PLAN = ["--system", "dgx-h100", "--gpus", "64", "--tp", "8", "--pp", "2", "--gbs", "64"]


def shipped(config_id: str) -> HFImport:
    return import_hf_config(CARDS[config_id].path)


def write_config(folder: Path, data: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def llama_31_70b() -> dict[str, object]:
    return dict(json.loads(CARDS["llama-3.1-70b"].path.read_text(encoding="utf-8")))


def test_every_family_is_shipped() -> None:
    archs = {shipped(c).architecture for c in CARDS}
    assert {"LlamaForCausalLM", "Llama4ForConditionalGeneration", "MistralForCausalLM", "MixtralForCausalLM",
            "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV2ForCausalLM",
            "DeepseekV3ForCausalLM", "GptOssForCausalLM", "Gemma2ForCausalLM", "Gemma3ForConditionalGeneration",
            "Phi3ForCausalLM", "NemotronForCausalLM"} <= archs
    assert sorted(p.name for p in CARDS["llama-2-7b"].path.parent.glob("*.json")) == \
        sorted(c.file for c in CARDS.values())


@pytest.mark.parametrize("config_id", sorted(CARDS))
def test_parameter_count_matches_the_card(config_id: str) -> None:
    card = CARDS[config_id]
    total = shipped(config_id).spec.parameters().total
    assert abs(total - card.params) / card.params < 0.005, (config_id, total, card.params)
    assert card.card.startswith("https://") and card.source


def test_llama31_70b_is_the_preset() -> None:
    imported = shipped("llama-3.1-70b").spec
    assert imported.model_copy(update={"name": "llama3-70b"}) == preset("llama3-70b").model


def test_mixtral_and_deepseek_v3_are_their_presets() -> None:
    for config_id, name in (("mixtral-8x7b", "mixtral-8x7b"), ("deepseek-v3", "deepseek-v3")):
        spec = shipped(config_id).spec
        assert spec.model_copy(update={"name": name}) == preset(name).model, config_id


def test_llama31_70b_predicts_the_preset_step(runner: CliRunner) -> None:
    """The same prediction, field for field; only the import's own note (JSON "model_import") is added."""
    docs = []
    for model in ("llama3-70b", str(CARDS["llama-3.1-70b"].path)):
        result = runner.invoke(app, ["train", "--model", model, *PLAN, "--json"])
        assert result.exit_code == 0, result.output
        docs.append({k: v for k, v in json.loads(result.stdout).items() if k not in ("inputs", "model_import")})
    assert docs[0]["step_time_s"] > 0
    assert docs[0] == docs[1]


def test_ignored_lines() -> None:
    assert shipped("llama-2-7b").note is None
    assert shipped("llama-3.1-70b").note == "ignored: rope_scaling"
    gemma2, gemma3 = shipped("gemma-2-9b").note or "", shipped("gemma-3-27b").note or ""
    assert "sliding_window=4096 (attention priced as full)" in gemma2 and "softcapping" in gemma2
    assert "sliding_window=1024" in gemma3 and "vision_config" in gemma3
    v3 = shipped("deepseek-v3")
    assert "MTP" in (v3.note or "") and v3.spec.mtp_modules == 1
    assert "sinks" in (shipped("gpt-oss-120b").note or "")
    assert "sliding_window=4096" in (shipped("mistral-7b").note or "")
    assert "biases" in (shipped("qwen2.5-72b").note or "")
    for imported in map(shipped, CARDS):
        assert imported.note is None or "\n" not in imported.note


def test_shapes_of_the_families() -> None:
    maverick = shipped("llama-4-maverick")
    assert maverick.spec.moe is not None and maverick.spec.moe.dense_layers == 24
    assert maverick.spec.moe.shared_experts == 1 and maverick.spec.ffn_hidden == 16384
    assert "interleave_moe_layer_step=2" in (maverick.note or "")
    assert shipped("gemma-3-27b").spec.tied_embeddings and shipped("gemma-3-27b").spec.vocab == 262208
    assert shipped("qwen3-32b").spec.head_dim == 128
    lite = shipped("deepseek-v2-lite").spec
    assert lite.mla is not None and lite.mla.q_lora_rank is None and lite.moe is not None
    assert lite.moe.dense_layers == 1 and lite.moe.shared_experts == 2
    oss = shipped("gpt-oss-120b").spec
    assert oss.moe is not None and oss.moe.top_k == 4 and oss.moe.experts == 128 and oss.gated_mlp
    assert not shipped("nemotron-4-340b").spec.gated_mlp
    assert shipped("phi-3-mini-4k").spec.gated_mlp


def test_unknown_and_harmless_fields(tmp_path: Path) -> None:
    data = {**llama_31_70b(), "rope_scaling": None, "initializer_range": 0.01, "fancy_new_feature": 3,
            "use_sliding_window": False, "sliding_window": 4096}
    imported = import_hf_config(write_config(tmp_path / "m", data))
    assert imported.ignored == ("fancy_new_feature=3",)


def test_unknown_architecture_is_one_line(tmp_path: Path) -> None:
    path = write_config(tmp_path / "bad", {**llama_31_70b(), "architectures": ["FooForCausalLM"]})
    with pytest.raises(SpecError) as err:
        load_model(str(path))
    message = str(err.value)
    assert "\n" not in message and "FooForCausalLM" in message and str(path) in message
    assert all(arch in message for arch in known_architectures())


def test_unknown_architecture_via_cli_exits_2(tmp_path: Path) -> None:
    write_config(tmp_path / "bad", {"architectures": ["FooForCausalLM"], "hidden_size": 8})
    proc = subprocess.run([sys.executable, "-m", "fabricsim", "train", "--model", "bad/config.json", *PLAN],
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "FooForCausalLM" in proc.stderr and "LlamaForCausalLM" in proc.stderr


@pytest.mark.parametrize(("field", "value"), [("hidden_size", None), ("num_hidden_layers", "80"),
                                              ("num_attention_heads", 0), ("tie_word_embeddings", "no")])
def test_bad_field_names_field_and_file(tmp_path: Path, field: str, value: object) -> None:
    data = llama_31_70b()
    if value is None:
        del data[field]
    else:
        data[field] = value
    path = write_config(tmp_path / "m", data)
    with pytest.raises(SpecError) as err:
        load_model(str(path))
    assert field in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_nested_text_config_field_is_named(tmp_path: Path) -> None:
    data = json.loads(CARDS["gemma-3-27b"].path.read_text(encoding="utf-8"))
    del data["text_config"]["hidden_size"]
    with pytest.raises(SpecError, match=r"text_config\.hidden_size"):
        import_hf_config(write_config(tmp_path / "g", data))


def test_folder_and_cache_entry_and_hf_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "Llama-3.1-70B"
    write_config(folder, llama_31_70b())
    assert load_model(str(folder)).name == "Llama-3.1-70B"
    assert load_model(folder / "config.json").layers == 80

    entry = tmp_path / "hub" / "models--meta-llama--Llama-3.1-70B"
    write_config(entry / "snapshots" / "aaa", {**llama_31_70b(), "num_hidden_layers": 2})
    write_config(entry / "snapshots" / "bbb", llama_31_70b())
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text("bbb", encoding="utf-8")
    assert load_model(str(entry)).layers == 80  # the snapshot refs/main names
    assert load_model(str(entry)).name == "meta-llama/Llama-3.1-70B"
    assert load_model(str(entry / "snapshots" / "bbb" / "config.json")).name == "meta-llama/Llama-3.1-70B"

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    imported = load_model_import("hf:meta-llama/Llama-3.1-70B")
    assert imported is not None and imported.spec.layers == 80 and imported.note == "ignored: rope_scaling"

    (entry / "refs" / "main").unlink()
    os.utime(entry / "snapshots" / "aaa", (2_000_000_000, 2_000_000_000))
    assert load_model("hf:meta-llama/Llama-3.1-70B").layers == 2  # no ref: the newest snapshot


def test_hf_home_and_missing_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    write_config(tmp_path / "hub" / "models--org--m" / "snapshots" / "x", llama_31_70b())
    assert load_model("hf:org/m").hidden == 8192
    for bad in ("hf:org/absent", "hf:no-slash", str(tmp_path / "hub")):
        with pytest.raises(SpecError) as err:
            load_model(bad)
        assert "\n" not in str(err.value)


def test_presets_and_spec_files_have_no_import(tmp_path: Path) -> None:
    assert load_model_import("llama3-70b") is None
    spec = tmp_path / "tiny.json"
    spec.write_text(json.dumps({"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "vocab": 100}),
                    encoding="utf-8")
    assert load_model_import(str(spec)) is None and load_model(str(spec)).name == "tiny"


def test_catalog_models_lists_shipped_configs(runner: CliRunner) -> None:
    result = runner.invoke(app, ["catalog", "models", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [m["id"] for m in data["models"]][:1] == ["gpt-1.7b"]
    assert {c["id"] for c in data["hf_configs"]} == set(CARDS)
    table = runner.invoke(app, ["catalog", "models"])
    assert table.exit_code == 0 and "hf:org/name" in table.output and "gemma-3-27b" in table.output


def test_the_config_s_context_window_bounds_inference(runner: CliRunner) -> None:
    """max_position_embeddings is the window `infer` checks a request against, as a preset's max_context."""
    assert shipped("llama-2-7b").max_context == 4096
    path = str(CARDS["llama-2-7b"].path)
    refused = runner.invoke(app, ["infer", "--model", path, "--gpus", "1", "--prompt", "8000", "--output", "256"])
    assert refused.exit_code == 2 and "context window of 4096" in refused.stderr
    assert runner.invoke(app, ["infer", "--model", path, "--gpus", "1", "--prompt", "2048"]).exit_code == 0
