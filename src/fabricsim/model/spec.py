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

from fabricsim.errors import SpecError, spec_error

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


class MLASpec(BaseModel):
    """Multi-head Latent Attention (DeepSeek-V2, arXiv:2405.04434 section 2.1): K and V are up-projected from one
    ``kv_lora_rank`` latent per token, which with the ``qk_rope_head_dim`` decoupled RoPE key is all the KV cache
    holds; queries go through a ``q_lora_rank`` latent (none: a full hidden x heads x qk projection)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kv_lora_rank: int = Field(ge=1, le=MAX_WIDTH, strict=True,
                              description="width of the compressed KV latent (cached per token and layer)")
    q_lora_rank: int | None = Field(None, ge=1, le=MAX_WIDTH, strict=True,
                                    description="width of the compressed query latent; none: no query compression")
    qk_nope_head_dim: int = Field(ge=1, le=MAX_WIDTH, strict=True, description="per-head query/key width without RoPE")
    qk_rope_head_dim: int = Field(ge=1, le=MAX_WIDTH, strict=True,
                                  description="per-head query width with RoPE; the key's is shared by heads and cached")
    v_head_dim: int = Field(ge=1, le=MAX_WIDTH, strict=True, description="per-head value width")


class ModelSpec(BaseModel):
    """A decoder-only transformer: ``layers`` blocks of attention (MHA, GQA or MLA) and an MLP (dense or MoE)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="free text")
    layers: int = Field(ge=1, le=MAX_LAYERS, strict=True)
    hidden: int = Field(ge=1, le=MAX_WIDTH, strict=True)
    heads: int = Field(ge=1, le=MAX_HEADS, strict=True)
    kv_heads: int = Field(ge=1, le=MAX_HEADS, strict=True,
                          description="default heads; fewer is grouped-query attention")
    head_dim: int = Field(ge=1, le=MAX_WIDTH, strict=True,
                          description="width of one query/key/value head; default hidden / heads (Qwen3, Gemma: "
                          "heads x head_dim != hidden)")
    ffn_hidden: int = Field(ge=1, le=MAX_WIDTH, strict=True, description="dense MLP hidden size; default 4 * hidden")
    gated_mlp: bool = Field(False, strict=True, description="SwiGLU-style three-matrix MLP")
    vocab: int = Field(ge=1, le=MAX_VOCAB, strict=True)
    tied_embeddings: bool = Field(False, strict=True, description="LM head shares the embedding matrix")
    moe: MoESpec | None = None
    mla: MLASpec | None = Field(None, description="multi-head latent attention (replaces head_dim and kv_heads)")
    mtp_modules: int = Field(0, ge=0, le=MAX_LAYERS, strict=True,
                             description="multi-token-prediction modules shipped with the model (Hugging Face "
                             "num_nextn_predict_layers); speculative decoding (infer --draft-tokens) drafts with "
                             "them; not counted in the parameters")

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        """kv_heads defaults to heads, head_dim to hidden / heads and ffn_hidden to 4 * hidden (resolved before
        validation, so always set); MLA caches one latent shared by all heads, so kv_heads is heads."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("mla") is not None and "heads" in data:
            if data.get("kv_heads") not in (None, data["heads"]):
                raise ValueError("kv_heads does not apply to MLA (every head reads the shared latent); leave it unset")
            data["kv_heads"] = data["heads"]
        if data.get("kv_heads") is None and "heads" in data:
            data["kv_heads"] = data["heads"]
        hidden, heads = data.get("hidden"), data.get("heads")
        if data.get("head_dim") is None and _is_int(hidden) and _is_int(heads) and heads >= 1:
            if hidden % heads:
                raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads}), or give head_dim")
            data["head_dim"] = hidden // heads
        if data.get("ffn_hidden") is None and _is_int(hidden):
            data["ffn_hidden"] = 4 * hidden
        return data

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
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
    def qk_head_dim(self) -> int:
        """Per-head width of Q and K (MLA: the no-RoPE plus the RoPE part)."""
        if self.mla is not None:
            return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim
        return self.head_dim

    @property
    def v_head_dim(self) -> int:
        """Per-head width of V, and of the attention output before the O projection."""
        return self.head_dim if self.mla is None else self.mla.v_head_dim

    @property
    def q_dim(self) -> int:
        """Width of Q: heads x qk_head_dim (hidden unless head_dim or MLA says otherwise)."""
        return self.heads * self.qk_head_dim

    @property
    def o_dim(self) -> int:
        """Input width of the O projection: heads x v_head_dim."""
        return self.heads * self.v_head_dim

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V) from the K and V projections: kv_heads * head_dim (MLA: the latent plus the
        shared RoPE key, what its down-projection produces)."""
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return self.kv_heads * self.head_dim

    def kv_cache_elements(self) -> int:
        """Cached values per token per layer for the whole model: 2 x kv_heads x head_dim (K and V), or MLA's
        kv_lora_rank + qk_rope_head_dim (DeepSeek-V2 section 2.1.2: 4.5 d_h per token for DeepSeek-V2/V3, 576)."""
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.kv_heads * self.head_dim

    def attention_flops_per_exp(self) -> float:
        """Attention matmul FLOPs per softmax exponential over a forward and a backward pass (backward = 2x the
        forward's FLOPs, and one exponential each: the forward's and the backward's recomputed one): 3 x (qk + v)
        per head. The catalog's attention efficiency is such a forward + backward figure, so inference prices its
        exponential share the same way."""
        return 1.5 * self.attention_flops_per_pair() / self.heads

    def attention_flops_per_pair(self, *, absorbed: bool = False) -> int:
        """FLOPs of QK^T and AV per query-key pair per layer, all heads: 2 x heads x (qk + v width). MLA decode
        with the up-projections absorbed (``absorbed``) scores against the 576-wide cached latent+RoPE key and
        sums the 512-wide latent: 2 x heads x (kv_lora + rope + kv_lora) (DeepSeek-V2 section 2.1.2; FlashMLA)."""
        if absorbed and self.mla is not None:
            width = 2 * self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
            return 2 * self.heads * width
        return 2 * self.heads * (self.qk_head_dim + self.v_head_dim)

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

    def mla_down_params(self) -> int:
        """MLA's down-projections, which tensor parallelism replicates: hidden x (q_lora_rank + kv_lora_rank +
        qk_rope_head_dim) plus the two latent norms (0 without MLA)."""
        if self.mla is None:
            return 0
        q_lora = self.mla.q_lora_rank or 0
        return self.hidden * (q_lora + self.kv_dim) + q_lora + self.mla.kv_lora_rank

    def mla_up_params(self) -> int:
        """MLA's head-split up-projections: Q from its latent (or from hidden) and K-nope and V from the KV
        latent (DeepSeek-V3 config.json: q_b_proj 1536 x 128 x 192, kv_b_proj 512 x 128 x 256)."""
        if self.mla is None:
            return 0
        q_in = self.mla.q_lora_rank or self.hidden
        return q_in * self.q_dim + self.mla.kv_lora_rank * self.heads * (self.mla.qk_nope_head_dim
                                                                         + self.mla.v_head_dim)

    def attention_params(self) -> int:
        """Q (hidden x q_dim), O (o_dim x hidden), K and V (hidden x kv_dim each); MLA: its down- and
        up-projections and O."""
        if self.mla is not None:
            return self.mla_down_params() + self.mla_up_params() + self.o_dim * self.hidden
        return self.hidden * self.q_dim + self.o_dim * self.hidden + 2 * self.hidden * self.kv_dim

    def kv_replication(self, tp: int) -> int:
        """How many TP ranks hold each KV head: tp / kv_heads when tp > kv_heads (GQA), else 1."""
        return max(1, tp // self.kv_heads)

    def attention_params_per_rank(self, tp: int) -> float:
        """Attention weights on one of ``tp`` ranks: Q and O split tp ways, K and V min(tp, kv_heads) ways; MLA:
        the down-projections replicated, the up-projections and O split tp ways."""
        if self.mla is not None:
            return self.mla_down_params() + (self.mla_up_params() + self.o_dim * self.hidden) / tp
        return (self.hidden * self.q_dim + self.o_dim * self.hidden) / tp \
            + 2 * self.hidden * self.kv_dim / min(tp, self.kv_heads)

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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
