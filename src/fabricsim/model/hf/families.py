"""The Hugging Face model families fabricsim imports: for each ``architectures[0]`` (or ``model_type``), how its
``config.json`` fields map onto a ModelSpec. Field names and defaults follow the transformers configuration
classes (``LlamaConfig``, ``DeepseekV3Config``, ``Gemma3TextConfig``, ...).

What a family's config can say but the spec cannot (layer interleaving, sliding windows, biases, sinks) is priced
the nearest way the spec allows and said in the import's ignored line; see ``hf.reader``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fabricsim.model.hf.reader import ConfigReader, describe

Fields = dict[str, Any]


@dataclass(frozen=True)
class Family:
    """How one architecture's config maps onto a ModelSpec."""

    label: str
    convert: Callable[[ConfigReader, Family], Fields]
    gated: bool = True  # SwiGLU/GeGLU three-matrix MLP (False: up, activation, down)
    defaults: Mapping[str, Any] = field(default_factory=dict)  # transformers' defaults for fields left out
    implicit: tuple[str, ...] = ()  # what the architecture always has but the spec does not price
    nested: bool = False  # the decoder's fields sit under ``text_config`` (multimodal wrappers)


def attention(r: ConfigReader) -> Fields:
    """Layers, hidden size, heads, KV heads (default: heads) and head_dim (default: hidden / heads)."""
    heads = r.positive("num_attention_heads")
    fields: Fields = {"layers": r.positive("num_hidden_layers"), "hidden": r.positive("hidden_size"), "heads": heads,
                      "kv_heads": r.positive("num_key_value_heads", heads)}
    head_dim = r.opt_int("head_dim")
    if head_dim is not None:
        fields["head_dim"] = head_dim
    return fields


def embeddings(r: ConfigReader) -> Fields:
    """Vocabulary and whether the LM head shares the embedding matrix (``tie_word_embeddings``)."""
    return {"vocab": r.positive("vocab_size"), "tied_embeddings": r.flag("tie_word_embeddings", False)}


def dense(r: ConfigReader, family: Family) -> Fields:
    """A dense decoder: attention, one MLP of ``intermediate_size`` per layer (gated by family), embeddings."""
    return {**attention(r), "ffn_hidden": r.positive("intermediate_size"), "gated_mlp": family.gated, **embeddings(r)}


def leading_dense(r: ConfigReader, flags: list[bool], why: str) -> int:
    """How many layers stay dense; the spec keeps them first, so another arrangement is said in the ignored line
    (the parameters and FLOPs are the same, only which pipeline stage holds them moves)."""
    count = flags.count(False)
    if flags != [False] * count + [True] * (len(flags) - count):
        r.note(f"{why} ({count} dense layers priced as the leading ones)")
    return count


def with_moe(r: ConfigReader, fields: Fields, flags: list[bool], why: str,
             expert: Callable[[], Fields]) -> Fields:
    """``fields`` with an ``moe`` section when any layer is MoE (``flags`` per layer), else unchanged (dense);
    ``expert`` reads the expert fields only when they are needed."""
    if not any(flags):
        return fields
    return {**fields, "moe": {**expert(), "dense_layers": leading_dense(r, flags, why)}}


def mixtral(r: ConfigReader, family: Family) -> Fields:
    """Mixtral: every layer MoE; ``intermediate_size`` is the width of one expert."""
    fields = dense(r, family)
    return with_moe(r, fields, [True] * fields["layers"], "", lambda: {
        "experts": r.positive("num_local_experts"), "top_k": r.positive("num_experts_per_tok"),
        "ffn_hidden": fields["ffn_hidden"]})


def qwen_moe(r: ConfigReader, family: Family) -> Fields:
    """Qwen3-MoE: layer i is MoE unless listed in ``mlp_only_layers`` or (i + 1) is not a multiple of
    ``decoder_sparse_step``; dense layers use ``intermediate_size``, experts ``moe_intermediate_size``."""
    fields = dense(r, family)
    step = r.positive("decoder_sparse_step", 1)
    only = set(r.ints("mlp_only_layers") or [])
    experts = r.count("num_experts", 0)
    flags = [experts > 0 and i not in only and (i + 1) % step == 0 for i in range(fields["layers"])]
    why = ", ".join(x for x in (describe("decoder_sparse_step", step) if step > 1 else "",
                                "mlp_only_layers" if only else "") if x)
    return with_moe(r, fields, flags, why, lambda: {
        "experts": experts, "top_k": r.positive("num_experts_per_tok"),
        "ffn_hidden": r.positive("moe_intermediate_size")})


def llama4(r: ConfigReader, family: Family) -> Fields:
    """Llama 4: MoE every ``interleave_moe_layer_step`` layers (or the listed ``moe_layers``) with one shared
    expert, experts of ``intermediate_size``; the other layers dense of ``intermediate_size_mlp``."""
    fields = {**attention(r), "ffn_hidden": r.positive("intermediate_size_mlp"), "gated_mlp": family.gated,
              **embeddings(r)}
    layers = fields["layers"]
    listed = r.ints("moe_layers")
    step = r.count("interleave_moe_layer_step", 1)
    moe_layers = set(listed if listed is not None else range(step - 1, layers, step) if step else ())
    why = "moe_layers" if listed is not None else describe("interleave_moe_layer_step", step)
    flags = [i in moe_layers for i in range(layers)]
    return with_moe(r, fields, flags, why, lambda: {
        "experts": r.positive("num_local_experts"), "top_k": r.positive("num_experts_per_tok"),
        "ffn_hidden": r.positive("intermediate_size"), "shared_experts": 1})


def deepseek(r: ConfigReader, family: Family) -> Fields:
    """DeepSeek-V2/V3: MLA attention; layer i is MoE from ``first_k_dense_replace`` on where i is a multiple of
    ``moe_layer_freq``; ``n_shared_experts`` of ``moe_intermediate_size``; MTP modules kept as ``mtp_modules``."""
    fields: Fields = {"layers": r.positive("num_hidden_layers"), "hidden": r.positive("hidden_size"),
                      "heads": r.positive("num_attention_heads"), "ffn_hidden": r.positive("intermediate_size"),
                      "gated_mlp": family.gated, **embeddings(r)}
    r.raw("num_key_value_heads", None)  # MLA: every head reads the one cached latent
    fields["mla"] = {"kv_lora_rank": r.positive("kv_lora_rank"), "q_lora_rank": r.opt_int("q_lora_rank"),
                     "qk_nope_head_dim": r.positive("qk_nope_head_dim"),
                     "qk_rope_head_dim": r.positive("qk_rope_head_dim"), "v_head_dim": r.positive("v_head_dim")}
    mtp = r.count("num_nextn_predict_layers", 0)
    if mtp:
        fields["mtp_modules"] = mtp
        r.note(describe("MTP num_nextn_predict_layers", mtp, "not in the parameter count; drafts for "
                        "infer --draft-tokens"))
    groups = r.count("n_group", 1)
    if groups > 1:
        r.note(describe("n_group", groups, "group-limited routing priced as plain top-k"))
    experts = r.count("n_routed_experts", 0)
    first = r.count("first_k_dense_replace", 0)
    freq = r.positive("moe_layer_freq", 1)
    flags = [experts > 0 and i >= first and i % freq == 0 for i in range(fields["layers"])]
    return with_moe(r, fields, flags, describe("moe_layer_freq", freq), lambda: {
        "experts": experts, "top_k": r.positive("num_experts_per_tok"),
        "ffn_hidden": r.positive("moe_intermediate_size"), "shared_experts": r.count("n_shared_experts", 0)})


def gpt_oss(r: ConfigReader, family: Family) -> Fields:
    """GPT-OSS: every layer MoE, ``intermediate_size`` is one expert's width; top-k from ``experts_per_token``
    (or ``num_experts_per_tok``); sliding-window attention on the layers ``layer_types`` says."""
    fields = dense(r, family)
    top_k = r.positive("experts_per_token") if r.data.get("experts_per_token") is not None \
        else r.positive("num_experts_per_tok")
    other = r.raw("num_experts_per_tok", None)
    if other is not None and other != top_k:
        raise r.error("num_experts_per_tok", f"{other!r} differs from experts_per_token ({top_k})")
    window = r.opt_int("sliding_window")
    types = r.raw("layer_types", [])
    if window:
        sliding = sum(t == "sliding_attention" for t in types) if isinstance(types, list) else 0
        where = f"on {sliding} of {fields['layers']} layers; " if sliding else ""
        r.note(describe("sliding_window", window, f"{where}attention priced as full"))
    return with_moe(r, fields, [True] * fields["layers"], "", lambda: {
        "experts": r.positive("num_local_experts"), "top_k": top_k, "ffn_hidden": fields["ffn_hidden"]})


GEMMA2 = {"tie_word_embeddings": True, "head_dim": 256, "vocab_size": 256000}  # transformers Gemma2Config
GEMMA3 = {"tie_word_embeddings": True, "head_dim": 256, "vocab_size": 262208}  # transformers Gemma3TextConfig

ARCHITECTURES: dict[str, Family] = {
    "LlamaForCausalLM": Family("Llama 2/3/3.1", dense),
    "Llama4ForCausalLM": Family("Llama 4", llama4),
    "Llama4ForConditionalGeneration": Family("Llama 4", llama4, nested=True),
    "MistralForCausalLM": Family("Mistral", dense),
    "MixtralForCausalLM": Family("Mixtral", mixtral),
    "Qwen2ForCausalLM": Family("Qwen2/2.5", dense, implicit=("q/k/v biases (not counted)",)),
    "Qwen3ForCausalLM": Family("Qwen3", dense),
    "Qwen3MoeForCausalLM": Family("Qwen3-MoE", qwen_moe),
    "DeepseekV2ForCausalLM": Family("DeepSeek-V2", deepseek),
    "DeepseekV3ForCausalLM": Family("DeepSeek-V3", deepseek),
    "GptOssForCausalLM": Family("GPT-OSS", gpt_oss, implicit=("attention sinks", "expert and router biases "
                                                                "(not counted)")),
    "Gemma2ForCausalLM": Family("Gemma 2", dense, defaults=GEMMA2),
    "Gemma3ForCausalLM": Family("Gemma 3", dense, defaults=GEMMA3),
    "Gemma3ForConditionalGeneration": Family("Gemma 3", dense, defaults=GEMMA3, nested=True),
    "Phi3ForCausalLM": Family("Phi-3/Phi-4", dense),
    "PhiForCausalLM": Family("Phi-2", dense, gated=False, implicit=("biases (not counted)",)),
    "NemotronForCausalLM": Family("Nemotron", dense, gated=False),  # squared-ReLU MLP: up, relu2, down
}

# ``model_type`` -> architecture, for configs without ``architectures``.
MODEL_TYPES: dict[str, str] = {
    "llama": "LlamaForCausalLM", "llama4": "Llama4ForConditionalGeneration", "llama4_text": "Llama4ForCausalLM",
    "mistral": "MistralForCausalLM", "mixtral": "MixtralForCausalLM", "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM", "deepseek_v2": "DeepseekV2ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM", "gpt_oss": "GptOssForCausalLM", "gemma2": "Gemma2ForCausalLM",
    "gemma3": "Gemma3ForConditionalGeneration", "gemma3_text": "Gemma3ForCausalLM", "phi3": "Phi3ForCausalLM",
    "phi": "PhiForCausalLM", "nemotron": "NemotronForCausalLM",
}
