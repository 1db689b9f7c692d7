"""Model specs: the transformer shapes of DESIGN.md "Model spec file" (dense and MoE) and their parameter counts.

The schema is stable and closed: unknown keys are an error. Sequence length, batch sizes and the parallel plan are
run options (see ``plan.py``), never part of a model.

Parameter counts cover the weight matrices (attention Q, K, V, O; the MLP or each expert; the router), the norm
weights (one vector of ``hidden`` per norm, two norms per layer plus the final one) and the token embedding and LM
head. Biases and learned position embeddings are not counted: they are outside the schema and below 0.1 % of any
preset (GPT-3 175B's 2048 x 12288 position table is 0.014 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fabricsim.errors import SpecError
from fabricsim.workload._validation import spec_error

# Upper bounds far above any published model and far below what would exhaust memory or overflow a count
# (``layers: 1e12`` in JSON is refused here, before anything is allocated per layer).
MAX_LAYERS = 100_000
MAX_WIDTH = 2**22  # hidden and MLP sizes
MAX_HEADS = 2**16
MAX_VOCAB = 2**26
MAX_EXPERTS = 2**16


class MoESpec(BaseModel):
    """Mixture-of-experts feed-forward: ``experts`` routed experts, each token to ``top_k``, plus shared experts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    experts: int = Field(ge=1, le=MAX_EXPERTS, strict=True, description="routed experts per MoE layer")
    top_k: int = Field(ge=1, le=MAX_EXPERTS, strict=True, description="routed experts each token goes to")
    ffn_hidden: int | None = Field(None, ge=1, le=MAX_WIDTH, strict=True,
                                   description="hidden size of one expert; default the model's ffn_hidden")
    shared_experts: int = Field(0, ge=0, le=MAX_EXPERTS, strict=True,
                                description="experts every token goes to, of size ffn_hidden")
    dense_layers: int = Field(0, ge=0, le=MAX_LAYERS, strict=True,
                              description="leading layers that keep a dense MLP of the model's ffn_hidden")

    @model_validator(mode="after")
    def _check(self) -> MoESpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= experts ({self.experts})")
        return self


class ModelSpec(BaseModel):
    """A decoder-only transformer: ``layers`` blocks of attention (MHA or GQA) and an MLP (dense or MoE)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="free text")
    layers: int = Field(ge=1, le=MAX_LAYERS, strict=True)
    hidden: int = Field(ge=1, le=MAX_WIDTH, strict=True)
    heads: int = Field(ge=1, le=MAX_HEADS, strict=True)
    kv_heads: int = Field(ge=1, le=MAX_HEADS, strict=True,
                          description="default heads; fewer is grouped-query attention")
    ffn_hidden: int = Field(ge=1, le=MAX_WIDTH, strict=True, description="dense MLP hidden size; default 4 * hidden")
    gated_mlp: bool = Field(False, strict=True, description="SwiGLU-style three-matrix MLP")
    vocab: int = Field(ge=1, le=MAX_VOCAB, strict=True)
    tied_embeddings: bool = Field(False, strict=True, description="LM head shares the embedding matrix")
    moe: MoESpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        """kv_heads defaults to heads and ffn_hidden to 4 * hidden (resolved before validation, so always set)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("kv_heads") is None and "heads" in data:
            data["kv_heads"] = data["heads"]
        hidden = data.get("hidden")
        if data.get("ffn_hidden") is None and isinstance(hidden, int) and not isinstance(hidden, bool):
            data["ffn_hidden"] = 4 * hidden
        return data

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.kv_heads > self.heads or self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.moe is not None and self.moe.dense_layers >= self.layers:
            raise ValueError(f"moe.dense_layers ({self.moe.dense_layers}) must be below layers ({self.layers})")
        return self

    @classmethod
    def from_data(cls, data: Any, source: str | None = None) -> ModelSpec:
        """Validate a mapping (parsed YAML/JSON); errors become a SpecError naming the field and the file."""
        if not isinstance(data, dict):
            raise SpecError("expected a mapping of model fields (name, layers, hidden, heads, vocab, ...)",
                            source=source)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise spec_error(exc, cls, source) from None

    # ---- shapes -------------------------------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): kv_heads * head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def expert_ffn_hidden(self) -> int:
        """Hidden size of one routed or shared expert (the model's ffn_hidden when moe.ffn_hidden is unset)."""
        if self.moe is None or self.moe.ffn_hidden is None:
            return self.ffn_hidden
        return self.moe.ffn_hidden

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return 0 if self.moe is None else self.layers - self.moe.dense_layers

    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP."""
        return self.layers - self.moe_layers

    def is_moe_layer(self, index: int) -> bool:
        """Whether layer ``index`` (0-based) has an MoE MLP: all but the leading ``moe.dense_layers``."""
        return self.moe is not None and index >= self.moe.dense_layers

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices per MLP or expert: 3 when gated (gate, up, down), else 2."""
        return 3 if self.gated_mlp else 2

    def attention_params(self) -> int:
        """Q and O (hidden x hidden each) plus K and V (hidden x kv_dim each)."""
        return 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_dim

    def kv_replication(self, tp: int) -> int:
        """How many TP ranks hold each KV head: tp / kv_heads when tp > kv_heads (GQA), else 1."""
        return max(1, tp // self.kv_heads)

    def attention_params_per_rank(self, tp: int) -> float:
        """Attention weights on one of ``tp`` ranks: Q and O split tp ways, K and V min(tp, kv_heads) ways."""
        return 2 * self.hidden * self.hidden / tp + 2 * self.hidden * self.kv_dim / min(tp, self.kv_heads)

    def mlp_params(self, ffn_hidden: int | None = None) -> int:
        """One dense MLP or one expert of width ``ffn_hidden`` (default the model's)."""
        return self.mlp_matrices * self.hidden * (self.ffn_hidden if ffn_hidden is None else ffn_hidden)

    def expert_params(self) -> int:
        """One routed (or shared) expert."""
        return self.mlp_params(self.expert_ffn_hidden)

    def router_params(self) -> int:
        """The router of one MoE layer: hidden x experts."""
        return 0 if self.moe is None else self.hidden * self.moe.experts

    def parameters(self) -> ParameterCount:
        """Total parameters and those active per token (MoE: top_k + shared experts instead of all)."""
        h = self.hidden
        embedding = self.vocab * h
        lm_head = 0 if self.tied_embeddings else self.vocab * h
        attention = self.layers * self.attention_params()
        norms = (2 * self.layers + 1) * h
        dense_mlp = self.dense_layers * self.mlp_params()
        routed = shared = router = active_routed = 0
        if self.moe is not None:
            routed = self.moe_layers * self.moe.experts * self.expert_params()
            shared = self.moe_layers * self.moe.shared_experts * self.expert_params()
            router = self.moe_layers * self.router_params()
            active_routed = self.moe_layers * self.moe.top_k * self.expert_params()
        common = embedding + lm_head + attention + norms + dense_mlp + shared + router
        return ParameterCount(
            embedding=embedding,
            lm_head=lm_head,
            attention=attention,
            dense_mlp=dense_mlp,
            routed_experts=routed,
            shared_experts=shared,
            router=router,
            norms=norms,
            total=common + routed,
            active=common + active_routed,
        )


@dataclass(frozen=True)
class ParameterCount:
    """Parameters by part; ``total`` stores every expert, ``active`` counts what one token passes through.

    ``lm_head`` is 0 with tied embeddings (the embedding matrix is counted once).
    """

    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    routed_experts: int
    shared_experts: int
    router: int
    norms: int
    total: int
    active: int
