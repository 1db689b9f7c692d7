"""Inference: the prefill/decode step of a static batch, its memory, speculative decoding and the per-iteration cost
the serving simulator prices its batches with.
"""

from fabricsim.catalog import LaunchSettings
from fabricsim.inference.engines import DEFAULT_ENGINE, MODERN_KERNELS, EngineProfile, engine_profile
from fabricsim.inference.engines import engines as serving_engines
from fabricsim.inference.experts import expert_load_peak, touched_experts
from fabricsim.inference.kvtier import (
    DEFAULT_KV_SERVER,
    KV_TIERS,
    NetworkKvTier,
    gpu_fabric_bytes_per_s,
    load_bytes_per_s,
    network_kv_tier,
)
from fabricsim.inference.launch import launch_json, launch_settings
from fabricsim.inference.memory import (
    InferenceMemory,
    decode_step_floor_s,
    host_link_bytes_per_s,
    inference_memory,
    kv_bytes_per_token_gpu,
    max_batch,
    max_context,
    weight_bytes_per_gpu,
)
from fabricsim.inference.params import inference_defaults
from fabricsim.inference.plan import LAYERS, InferencePlan, check_inference_plan
from fabricsim.inference.predict import InferencePrediction, NetworkTierUse, predict_inference
from fabricsim.inference.stepcost import InferenceStepCost, step_cost, with_kv_handoff

__all__ = [
    "DEFAULT_ENGINE",
    "DEFAULT_KV_SERVER",
    "KV_TIERS",
    "LAYERS",
    "MODERN_KERNELS",
    "EngineProfile",
    "InferenceMemory",
    "InferencePlan",
    "InferencePrediction",
    "InferenceStepCost",
    "LaunchSettings",
    "NetworkKvTier",
    "NetworkTierUse",
    "check_inference_plan",
    "decode_step_floor_s",
    "engine_profile",
    "expert_load_peak",
    "gpu_fabric_bytes_per_s",
    "host_link_bytes_per_s",
    "inference_defaults",
    "inference_memory",
    "kv_bytes_per_token_gpu",
    "launch_json",
    "launch_settings",
    "load_bytes_per_s",
    "max_batch",
    "max_context",
    "network_kv_tier",
    "predict_inference",
    "serving_engines",
    "step_cost",
    "touched_experts",
    "weight_bytes_per_gpu",
    "with_kv_handoff",
]
