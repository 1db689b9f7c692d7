"""Time one inference prediction after warm-up (target < 1 ms) and one serving step-cost call."""

from __future__ import annotations

import time

from fabricsim.catalog import default_catalog
from fabricsim.comm.cluster import Cluster
from fabricsim.inference.plan import InferencePlan
from fabricsim.inference.predict import predict_inference
from fabricsim.inference.stepcost import step_cost
from fabricsim.model.presets import load_model

REPEATS = 2000


def main() -> None:
    catalog = default_catalog()
    model = load_model("llama3-70b")
    cluster = Cluster(catalog.system("dgx-h100"), catalog=catalog)
    plans = [InferencePlan(tp=tp, batch=b, prompt_tokens=2048, output_tokens=256, weights="fp8")
             for tp in (2, 4, 8) for b in (1, 32, 256)]
    for plan in plans:  # warm-up: prices each plan's collectives once
        predict_inference(model, cluster, plan)
    start = time.perf_counter()
    for i in range(REPEATS):
        predict_inference(model, cluster, plans[i % len(plans)])
    per_prediction = (time.perf_counter() - start) / REPEATS
    print(f"predict_inference: {per_prediction * 1e6:.1f} us per prediction (warm)")
    cost = step_cost(model, cluster, plans[4])
    start = time.perf_counter()
    for i in range(100_000):
        cost.step_s(512 if i % 8 == 0 else 0, 512 * 512 / 2, 32, 32 * 2048)
    print(f"InferenceStepCost.step_s: {(time.perf_counter() - start) / 100_000 * 1e6:.2f} us per call")


if __name__ == "__main__":
    main()
