"""The plan and cluster options of one training run (`train`, `whatif`): the model, the GPUs and how they are
split, the batch, the kernels and overlaps, the MoE knobs, and the network between nodes."""

from __future__ import annotations

from fabricsim.api.specs.fields import OptionGroup, opt
from fabricsim.api.specs.shared import (
    CapacityFactorOption,
    EpOption,
    FlashAttnOption,
    FrameworkOption,
    GpuPowerOption,
    ModelOption,
    NetworkOption,
    OversubscriptionOption,
    PpOption,
    SystemOption,
    TpOption,
)


class PlanOptions(OptionGroup):
    """The model, the parallel plan and the cluster it runs on; knobs left unset are chosen as the fastest
    setting that fits."""

    model: ModelOption
    system: SystemOption
    gpu_power: GpuPowerOption
    gpus: int | None = opt(None, "total GPUs (= tp*pp*dp*cp)")
    tp: TpOption
    pp: PpOption
    dp: int | None = opt(None, "default: gpus / (tp*pp*cp)")
    cp: int = opt(1, "context-parallel size")
    ep: EpOption
    etp: int | None = opt(None, "expert tensor-parallel size (MoE; default tp): etp*ep divides tp*cp*dp, so EP may "
                          "span TP ranks (MoE parallel folding)")
    gpus_per_node: int | None = opt(None, "GPUs of each node (rack) the job uses (default all): 64 runs 128 GPUs on "
                                    "two GB200 NVL72 racks; the whole node is still priced")
    seq: int = opt(4096, "sequence length (tokens)", unit="tokens")
    gbs: int = opt(512, "global batch (sequences)", unit="sequences")
    mbs: int | None = opt(None, "micro-batch (sequences) (default: auto)", unit="sequences")
    vpp: int | None = opt(None, "virtual pipeline stages (interleaved 1F1B when > 1) (default: auto)")
    recompute: str | None = opt(None, "none, selective or full (default: auto)")
    zero: int | None = opt(None, "ZeRO stage 0-3 (1 = distributed optimizer, 3 = FSDP) (default: auto)")
    precision: str = opt("bf16", "bf16, or fp8 (TransformerEngine FP8 GEMMs)")
    kernels: str | None = opt(None, "element-wise kernels: fused (Megatron/TE) or eager [default: the framework's; "
                              "megatron: fused]")
    zero3_gathers_per_layer: int | None = opt(None, "ZeRO-3/FSDP all-gathers per layer and pass, each paying the "
                                              "collective's latency: 1 gathers a layer as one FSDP unit; DeepSpeed "
                                              "gathers each sub-module (linear layer) by its own call [default: the "
                                              "framework's; megatron: 1]")
    zero3_reduce_bucket_params: float | None = opt(None, "parameters per ZeRO-3 gradient reduce-scatter "
                                                   "(DeepSpeed reduce_bucket_size) [default: the framework's; "
                                                   "megatron: one per layer]", unit="parameters")
    fsdp_copy_out: bool | None = opt(None, "FSDP2 copies each all-gathered layer out of the flat gather output "
                                     "into its parameters on the compute stream (an exposed read and write of its "
                                     "weights) [default: the framework's; torchtitan, nemo-automodel: on; "
                                     "megatron: off]")
    attention_kernel: str | None = opt(None, "fused attention kernels: native (the GPU generation's own: "
                                       "TransformerEngine/cuDNN, FlashAttention-3 on Hopper) or fa2 (FlashAttention-2: "
                                       "the flash-attn 2 package, PyTorch SDPA's flash backend; Ampere-style kernels "
                                       "at the GPU's sm80 kernel fraction on Hopper and later) [default: the "
                                       "framework's; megatron: native]")
    grad_dtype: str | None = opt(None, "gradient buffer and reduction: fp32 (Megatron default), bf16 (NeMo FP8 "
                                 "performance recipes) or fp16 (Megatron-LM --fp16) [default: the framework's; "
                                 "megatron: fp32]")
    pp_layout: str | None = opt(None, "layers per pipeline stage, e.g. 7,8,8,7 (default: automatic)")
    flash_attn: FlashAttnOption
    sequence_parallel: bool | None = opt(None, "Megatron sequence parallelism [default: on when tp > 1]")
    overlap_grad_reduce: bool = opt(True, "reduce gradients during the backward pass")
    overlap_param_gather: bool = opt(True, "gather updated parameters during the next forward")
    tp_comm_overlap: bool | None = opt(None, "overlap TP collectives with GEMMs (TransformerEngine userbuffers) "
                                       "[default: the framework's; megatron: off]")
    ep_comm_overlap: bool = opt(False, "overlap the MoE all-to-all of one micro-batch with another's compute "
                                "(Megatron-Core --overlap-moe-expert-parallel-comm)")
    shared_expert_overlap: bool = opt(False, "run the shared experts beside the same micro-batch's all-to-all "
                                      "(Megatron-Core --moe-shared-expert-overlap)")
    dropout: bool | None = opt(None, "hidden dropout (Megatron-LM's default; its 1-byte masks are kept for the "
                               "backward); --no-dropout as today's Llama/DeepSeek/Qwen recipes run [default: the "
                               "framework's; megatron: on]")
    moe_balance: str = opt("random", "expert load: forced (Megatron's force-balanced benchmarks), random (balanced "
                           "top-k routing) or skewed (a trained router's measured skew)")
    capacity_factor: CapacityFactorOption
    moe_dispatcher: str = opt("alltoall", "token dispatch: alltoall (NCCL, a copy per routed expert) or deepep "
                              "(DeepEP/HybridEP: one copy per destination node over the network, fanned out over "
                              "NVLink)")
    ib: NetworkOption
    oversubscription: OversubscriptionOption
    framework: FrameworkOption
