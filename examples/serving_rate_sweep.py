"""How many requests a second does one 8-GPU Llama 3 70B FP8 replica serve within a 2 s TTFT and 50 ms TPOT SLO?

Runs the continuous-batching serving simulation (`fabricsim infer --rate`) at rising Poisson request rates and prints
the p99 latencies, the share of requests that met both SLOs and whether the replica is overloaded. Run: `python
examples/serving_rate_sweep.py`; it writes nothing.
"""

from __future__ import annotations

import fabricsim

SERVE = {"model": "llama3-70b", "system": "dgx-h100", "tp": 8, "weights": "fp8", "prompt": 1024, "output": 256,
         "duration": "60s", "slo_ttft": "2s", "slo_tpot": "50ms"}

print(f"{'rate (req/s)':>12} {'TTFT p99 (ms)':>14} {'TPOT p99 (ms)':>14} {'SLO met':>8} {'overloaded':>10}")
for rate in (2, 8, 16, 32):
    served = fabricsim.infer(**SERVE, rate=rate).to_dict()
    print(f"{rate:12} {served['ttft_s_p99'] * 1e3:14.0f} {served['tpot_s_p99'] * 1e3:14.1f} "
          f"{served['slo_attainment']:8.0%} {'yes' if served['overloaded'] else 'no':>10}")
