"""Speculative decoding with the model's own MTP module: the draft module as a one-layer model on the last stage
(its decoder layer, eh_proj and the two input norms) and its collectives."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from fabricsim.caching import ByIdentity
from fabricsim.catalog import GPU
from fabricsim.comm import Cluster, group_comm
from fabricsim.inference.comms import _groups, _layer_comm
from fabricsim.inference.plan import ACT_BYTES, InferencePlan
from fabricsim.inference.stage import _Stage, _stage
from fabricsim.model import ModelSpec


@lru_cache(maxsize=256)
def _draft_model(model_ref: ByIdentity[ModelSpec]) -> ModelSpec:
    """The model's MTP module as a one-layer model: one decoder layer of the model's last-layer shape (an MoE layer
    for an MoE model, as DeepSeek-V3's layer 61), its embedding and LM head shared with the model."""
    model = model_ref.value
    moe = None if model.moe is None else model.moe.model_copy(update={"dense_layers": 0})
    return model.model_copy(update={"layers": 1, "moe": moe})


def _draft_parts(model: ModelSpec, plan: InferencePlan, gpu: GPU) -> tuple[ModelSpec, InferencePlan, _Stage]:
    """The draft module's one-layer model, the plan it runs under (on the target's last stage: pp 1) and its stage:
    the layer's GEMMs and kernels plus the input projection eh_proj (2 x hidden -> hidden, row-parallel over tp, as
    TensorRT-LLM's DeepseekV3MTP) and the two input norms (enorm, hnorm)."""
    draft = _draft_model(ByIdentity(model))
    plan1 = replace(plan, pp=1, draft_tokens=0, acceptance_length=1.0)
    st = _stage(draft, plan1, gpu)
    eh = (float(model.hidden), 2.0 * model.hidden / plan.tp, 1.0)
    return draft, plan1, replace(st, dense_gemms=(*st.dense_gemms, eh), common_params=st.common_params + eh[0] * eh[1],
                                 gemm_bytes=(*st.gemm_bytes, st.weight_bytes),
                                 gemm_rates=(*st.gemm_rates, st.gemm_rate),
                                 kernels=st.kernels + 1 + 2)  # eh_proj, enorm and hnorm


def _eh_proj_comm(model: ModelSpec, plan: InferencePlan, cluster: Cluster, tokens_rank: float,
                  out: dict[str, float]) -> None:
    """The all-reduce of the draft module's row-parallel eh_proj over tp (none at tp = 1)."""
    if plan.tp > 1:
        tp_n, tp_ppn = _groups(plan, cluster.system.gpus_per_node).tp
        t, kind = group_comm(cluster, tp_n, tp_ppn, "all_reduce", tokens_rank * model.hidden * ACT_BYTES)
        out[kind] += t


def _draft_comm(model: ModelSpec, plan: InferencePlan, cluster: Cluster, tokens_rank: float, tokens_group: float,
                out: dict[str, float]) -> None:
    """One draft forward's collectives: its layer's (as the target's) and the eh_proj all-reduce."""
    draft = _draft_model(ByIdentity(model))
    _layer_comm(draft, replace(plan, pp=1, draft_tokens=0, acceptance_length=1.0), cluster, tokens_rank,
                tokens_group, out)
    _eh_proj_comm(model, plan, cluster, tokens_rank, out)
