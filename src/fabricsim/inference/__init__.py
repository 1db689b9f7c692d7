"""Inference: the prefill/decode step of a static batch, its memory, speculative decoding and the per-iteration cost
the serving simulator prices its batches with.
"""

from fabricsim.inference.step import (
    LAYERS,
    InferencePlan,
    InferencePrediction,
    InferenceStepCost,
    check_inference_plan,
    decode_step_floor_s,
    inference_defaults,
    max_batch,
    predict_inference,
    serving_max_batch,
    step_cost,
)

__all__ = [
    "LAYERS",
    "InferencePlan",
    "InferencePrediction",
    "InferenceStepCost",
    "check_inference_plan",
    "decode_step_floor_s",
    "inference_defaults",
    "max_batch",
    "predict_inference",
    "serving_max_batch",
    "step_cost",
]
