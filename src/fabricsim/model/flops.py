"""FLOPs of a model's forward pass, from the matmuls of each layer (dense or MoE), attention and the LM head.

Forward, for T = B * s tokens (B sequences of s tokens):
- weight matmuls: 2 * T * (active weight-matrix parameters of the layer): Q, K, V, O; the MLP, or for MoE the
  top_k routed + shared experts and the router;
- attention: QK^T and AV, 2 * B * s^2 * heads * (qk + v head widths) per layer (= 4 B s^2 h when heads x head_dim
  = hidden; MLA's 192-wide QK and 128-wide V in prefill and training form). Causal masking is NOT
  halved by default, as in Megatron's formula (Narayanan et al. SC21 eq. 3); ``causal=True`` halves it, which is
  what block-skipping kernels (FlashAttention) execute;
- LM head: 2 * T * vocab * hidden (the embedding lookup is free).
Norms, softmax and other element-wise work are not FLOPs here (they are memory-bound). What a training step adds
(backward, recompute, the split over a parallel plan) is ``fabricsim.training.flops``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from fabricsim.model.spec import ModelSpec


@dataclass(frozen=True)
class ForwardFlops:
    """Forward FLOPs by kind."""

    linear: float  # weight matmuls of the transformer layers (attention projections, MLP / experts, router)
    attention: float  # QK^T and AV
    lm_head: float

    @property
    def layers(self) -> float:
        """Transformer layers only (what full recompute repeats)."""
        return self.linear + self.attention

    @property
    def total(self) -> float:
        return self.linear + self.attention + self.lm_head


def layer_linear_params(model: ModelSpec, index: int) -> int:
    """Weight-matrix parameters one token passes through in layer ``index``."""
    if model.is_moe_layer(index):
        assert model.moe is not None
        experts = model.moe.top_k + model.moe.shared_experts
        return model.attention_params() + experts * model.expert_params() + model.router_params()
    return model.attention_params() + model.mlp_params()


@lru_cache(maxsize=256)
def _linear_params_by_layer(model: ModelSpec) -> tuple[int, ...]:
    """Weight-matrix parameters per layer (cached per model: the sizing search re-evaluates the same model)."""
    return tuple(layer_linear_params(model, i) for i in range(model.layers))


def forward_flops(
    model: ModelSpec,
    sequences: float,
    seq: int,
    *,
    layers: Iterable[int] | None = None,
    lm_head: bool = True,
    causal: bool = False,
) -> ForwardFlops:
    """Forward FLOPs of ``sequences`` sequences of ``seq`` tokens through ``layers`` (default all), + LM head."""
    tokens = sequences * seq
    per_layer = _linear_params_by_layer(model)
    if layers is None:
        indices: list[int] | range = range(model.layers)
        linear_params = float(sum(per_layer))
    else:
        indices = list(layers)
        linear_params = float(sum(per_layer[i] for i in indices))
    linear = 2.0 * tokens * linear_params
    attention_per_layer = float(sequences) * seq * seq * model.attention_flops_per_pair()
    if causal:
        attention_per_layer /= 2
    attention = attention_per_layer * len(indices)
    head = 2.0 * tokens * model.vocab * model.hidden if lm_head else 0.0
    return ForwardFlops(linear=linear, attention=attention, lm_head=head)


def megatron_step_flops(batch: float, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Megatron's closed form with full recompute: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) (SC21 eq. 3).

    For GPT models with an ungated 4h MLP and multi-head attention; a reference for tests and reports.
    """
    return 96.0 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
