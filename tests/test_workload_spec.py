"""Model specs: the closed schema, defaults, files and presets, and parameter counts against published figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricsim.errors import SpecError
from fabricsim.model.presets import list_presets, load_model, preset
from fabricsim.model.spec import ModelSpec

GPT_76B = {"name": "gpt-76b", "layers": 60, "hidden": 10240, "heads": 80, "vocab": 51200}


def test_design_example_loads_with_defaults() -> None:
    m = ModelSpec.from_data(GPT_76B)
    assert m.kv_heads == 80
    assert m.ffn_hidden == 4 * 10240
    assert not m.gated_mlp and not m.tied_embeddings and m.moe is None


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_text("name: x\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nhiden_size: 3\n")
    with pytest.raises(SpecError, match="hiden_size") as info:
        load_model(path)
    assert str(path) in str(info.value)
    assert "unknown field" in str(info.value)


def test_unknown_nested_moe_key_suggests_close_match() -> None:
    data = {**GPT_76B, "moe": {"experts": 8, "topk": 2}}
    with pytest.raises(SpecError, match=r"moe\.topk.*did you mean 'top_k'"):
        ModelSpec.from_data(data, source="m.yaml")


def test_missing_field_is_named() -> None:
    data = {k: v for k, v in GPT_76B.items() if k != "vocab"}
    with pytest.raises(SpecError, match="vocab: required field is missing"):
        ModelSpec.from_data(data)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden": 10020}, r"hidden \(10020\) must be divisible by heads \(80\)"),
        ({"kv_heads": 7}, r"heads \(80\) must be a multiple of kv_heads \(7\)"),
        ({"kv_heads": 160}, r"multiple of kv_heads \(160\)"),
        ({"moe": {"experts": 4, "top_k": 5}}, r"top_k \(5\) must be <= experts \(4\)"),
        ({"moe": {"experts": 4, "top_k": 1, "dense_layers": 60}}, r"dense_layers \(60\) must be below layers"),
        ({"layers": 0}, "layers"),
    ],
)
def test_invalid_shapes_rejected(change: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ModelSpec.from_data({**GPT_76B, **change})


def test_yaml_and_json_files_load(tmp_path: Path) -> None:
    y = tmp_path / "m.yaml"
    y.write_text("name: tiny\nlayers: 2\nhidden: 64\nheads: 4\nkv_heads: 2\ngated_mlp: true\nvocab: 100\n"
                 "moe:\n  experts: 4\n  top_k: 2\n")
    j = tmp_path / "m.json"
    j.write_text(json.dumps({"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "vocab": 100}))
    my, mj = load_model(str(y)), load_model(j)
    assert my.kv_heads == 2 and my.moe is not None and my.expert_ffn_hidden == 256
    assert mj.ffn_hidden == 256


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not found"):
        load_model(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SpecError, match="not valid JSON"):
        load_model(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- 1\n- 2\n")
    with pytest.raises(SpecError, match="expected a mapping"):
        load_model(lst)


def test_preset_typo_suggests_close_names() -> None:
    with pytest.raises(SpecError, match=r"unknown model 'llama3-70'.*did you mean 'llama3-70b'"):
        load_model("llama3-70")


def test_preset_names_case_insensitive_and_listed() -> None:
    assert load_model("Llama3-8B").name == "llama3-8b"
    names = list_presets()
    for expected in ("gpt-1.7b", "gpt-1t", "gpt3-175b", "llama3-405b", "mixtral-8x7b", "deepseek-v3"):
        assert expected in names
    assert len(names) == 17


def test_every_preset_has_a_source_and_its_own_name() -> None:
    for name in list_presets():
        p = preset(name)
        assert p.source.strip()
        assert p.model.name == name


def test_deepseek_preset_has_mla() -> None:
    p = preset("deepseek-v3")
    assert p.model.mla is not None and p.model.mla.kv_lora_rank == 512 and p.model.kv_cache_elements() == 576
    assert "MLA" in p.notes and "APPROXIMATION" not in p.notes
    assert not p.verified


# ---- parameter counts --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "published", "tolerance"),
    [
        ("gpt3-175b", 175e9, 0.02),
        ("llama3-8b", 8.03e9, 0.02),
        ("llama3-70b", 70.6e9, 0.02),
        ("llama3-405b", 405e9, 0.02),
        ("deepseek-v3", 671e9, 0.02),
    ],
)
def test_total_parameters_match_published(name: str, published: float, tolerance: float) -> None:
    assert load_model(name).parameters().total == pytest.approx(published, rel=tolerance)


def test_mixtral_total_and_active() -> None:
    p = load_model("mixtral-8x7b").parameters()
    assert p.total == pytest.approx(46.7e9, rel=0.02)
    assert p.active == pytest.approx(12.9e9, rel=0.02)


def test_deepseek_active_matches_with_mla() -> None:
    assert load_model("deepseek-v3").parameters().active == pytest.approx(37e9, rel=0.02)


# Megatron SC21 Table 1: the name is the parameter count from the paper's own formula
# P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)), which adds biases and a 2048 x h position table to our count.
MEGATRON_TABLE_1 = {
    "gpt-1.7b": 1.7e9, "gpt-3.6b": 3.6e9, "gpt-7.5b": 7.5e9, "gpt-18.4b": 18.4e9, "gpt-39.1b": 39.1e9,
    "gpt-76.1b": 76.1e9, "gpt-145.6b": 145.6e9, "gpt-310.1b": 310.1e9, "gpt-529.6b": 529.6e9, "gpt-1t": 1008.0e9,
}


@pytest.mark.parametrize(("name", "published"), MEGATRON_TABLE_1.items())
def test_megatron_table_1_sizes(name: str, published: float) -> None:
    m = load_model(name)
    n, h, v, s = m.layers, m.hidden, m.vocab, 2048
    paper_formula = 12 * n * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * n * h))
    assert round(paper_formula / 1e9, 1) == pytest.approx(published / 1e9, abs=0.051)
    assert m.parameters().total == pytest.approx(paper_formula, rel=0.01)


def test_tied_embeddings_counted_once() -> None:
    untied = ModelSpec.from_data(GPT_76B)
    tied = ModelSpec.from_data({**GPT_76B, "tied_embeddings": True})
    assert untied.parameters().total - tied.parameters().total == 51200 * 10240
    assert tied.parameters().lm_head == 0


def test_dense_model_active_equals_total_and_moe_parts_add_up() -> None:
    dense = load_model("llama3-70b").parameters()
    assert dense.active == dense.total and dense.routed_experts == 0
    ds = load_model("deepseek-v3")
    p = ds.parameters()
    parts = p.embedding + p.lm_head + p.attention + p.dense_mlp + p.routed_experts + p.shared_experts + p.router
    assert p.total == parts + p.norms
    assert p.routed_experts == 58 * 256 * 3 * 7168 * 2048
    assert p.dense_mlp == 3 * 3 * 7168 * 18432
