"""Reading a Hugging Face ``config.json`` field by field: typed getters that name the field and file on bad input,
and a record of what was read, so that every field left over is either known to be harmless (metadata, training
losses, numerics) or named in the import's ``ignored:`` line.

The rule: a field that would change what a step costs but that the model spec has no place for is never dropped
silently. Fields whose value switches a feature off (``null``, ``false``, ``0``, empty) cost nothing and pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabricsim.errors import SpecError

# Fields that never change a step's cost: metadata, token ids, initialisation, numerics (norm epsilons, RoPE
# bases and where RoPE applies), training-only losses and dropouts, routing arithmetic that costs the same FLOPs,
# and the activation's name (the family fixes the MLP's matrices; an activation's own cost is elementwise).
HARMLESS: frozenset[str] = frozenset({
    "_name_or_path", "architectures", "model_type", "auto_map", "torch_dtype", "dtype", "transformers_version",
    "bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "sep_token_id", "decoder_start_token_id",
    "boi_token_index", "eoi_token_index", "image_token_index", "image_token_id", "mm_tokens_per_image",
    "tokenizer_class", "use_cache", "cache_implementation", "_attn_implementation_autoset", "for_llm_compressor",
    "initializer_range", "initializer_factor", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps",
    "attention_dropout", "hidden_dropout", "embd_pdrop", "resid_pdrop", "attn_pdrop", "summary_first_dropout",
    "rope_theta", "rope_local_base_freq", "partial_rotary_factor", "rotary_pct", "rope_ntk_alpha", "rope_ntk_beta",
    "rope_scaling_factor", "no_rope_layers", "no_rope_layer_interval", "rope_interleave", "qk_layernorm",
    "max_position_embeddings", "original_max_position_embeddings", "initial_context_length", "max_context_length",
    "hidden_act", "hidden_activation", "swiglu_limit", "use_qk_norm", "attn_temperature_tuning", "floor_scale",
    "attn_scale", "query_pre_attn_scalar", "output_router_logits", "router_aux_loss_coef", "router_jitter_noise",
    "router_z_loss_coef", "aux_loss_alpha", "seq_aux", "norm_topk_prob", "scoring_func", "routed_scaling_factor",
    "topk_method", "topk_group", "ep_size", "pretraining_tp", "layer_types", "sliding_window_pattern",
    "sliding_window_size", "max_window_layers", "use_sliding_window", "is_decoder", "tie_encoder_decoder",
})

# Fields that change the cost when set, with why they are not in the spec ("" when the name says it all).
COSTLY: dict[str, str] = {
    "sliding_window": "attention priced as full",
    "attention_chunk_size": "chunked attention priced as full",
    "rope_scaling": "",
    "attention_bias": "biases not counted",
    "mlp_bias": "biases not counted",
    "attn_logit_softcapping": "",
    "final_logit_softcapping": "",
    "quantization_config": "weights priced at the run's precision",
    "vision_config": "vision tower not modelled",
    "audio_config": "audio tower not modelled",
}

_MISSING = object()


def inactive(value: Any) -> bool:
    """Whether a field's value switches its feature off (null, false, 0 or empty), so it costs nothing."""
    return value is None or value is False or (isinstance(value, int | float) and value == 0) \
        or (isinstance(value, str | list | dict) and not value)


def describe(key: str, value: Any, reason: str = "") -> str:
    """``key=value (reason)`` for a scalar, ``key (reason)`` for a mapping or list."""
    shown = f"{key}={value:g}" if isinstance(value, float) else \
        f"{key}={value}" if isinstance(value, int | str) and not isinstance(value, bool) else key
    return f"{shown} ({reason})" if reason else shown


class ConfigReader:
    """One mapping of a config (the top level or its ``text_config``) with typed getters; remembers what was read
    and collects the notes of the ignored line."""

    def __init__(self, data: Mapping[str, Any], source: str, *, prefix: str = "",
                 defaults: Mapping[str, Any] | None = None) -> None:
        self.data = data
        self.source = source
        self.prefix = prefix
        self.defaults = dict(defaults or {})
        self.used: set[str] = set()
        self.notes: list[str] = []
        if "use_sliding_window" in data and not data["use_sliding_window"]:
            self.used.update(("sliding_window", "max_window_layers"))  # Qwen: the window is switched off

    def error(self, key: str, message: str) -> SpecError:
        """A SpecError naming the field (with its ``text_config.`` prefix) and the file."""
        return SpecError(message, field=self.prefix + key, source=self.source)

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        """The value of ``key`` (or the family's default for it, or ``default``); marks it read."""
        self.used.add(key)
        value = self.data.get(key, self.defaults.get(key, _MISSING))
        if value is _MISSING or value is None:
            if default is _MISSING:
                raise self.error(key, "required field is missing")
            return default
        return value

    def positive(self, key: str, default: int | None = None) -> int:
        """A positive whole number (``default`` when absent or null; required without one)."""
        return self._check_positive(key, self.raw(key, _MISSING if default is None else default))

    def opt_int(self, key: str) -> int | None:
        """A positive whole number, or None when absent or null (DeepSeek-V2-Lite's q_lora_rank)."""
        value = self.raw(key, None)
        return None if value is None else self._check_positive(key, value)

    def _check_positive(self, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.error(key, f"must be a positive whole number, got {value!r}")
        return value

    def count(self, key: str, default: int = 0) -> int:
        """A whole number that may be 0 (shared experts, leading dense layers, MTP modules)."""
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.error(key, f"must be a whole number >= 0, got {value!r}")
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        """A true/false field."""
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}")
        return value

    def ints(self, key: str) -> list[int] | None:
        """A list of whole numbers (layer indices), or None when absent."""
        value = self.raw(key, None)
        if value is None:
            return None
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise self.error(key, f"must be a list of whole numbers, got {value!r}")
        return list(value)

    def section(self, key: str) -> ConfigReader | None:
        """A nested mapping (``text_config``) as its own reader, or None when absent."""
        value = self.raw(key, None)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error(key, "must be a mapping of fields")
        return ConfigReader(value, self.source, prefix=f"{self.prefix}{key}.", defaults=self.defaults)

    def note(self, text: str) -> None:
        """Add an entry to the ignored line (what the spec cannot express and how it is priced instead)."""
        self.notes.append(text)

    def leftovers(self) -> list[str]:
        """Fields not read: harmless ones and switched-off ones pass; costly ones are described with their reason
        and unknown ones named (so a new feature in a config is never dropped without a word)."""
        out = []
        for key, value in self.data.items():
            if key in self.used or key in HARMLESS or inactive(value):
                continue
            out.append(describe(key, value, COSTLY.get(key, "")))
        return out
