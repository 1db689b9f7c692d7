"""Which InfiniBand generation pays for a Llama 3 70B training job on 64 DGX H100 nodes?

Each generation's step time and tokens/s (`fabricsim train`) beside the capital cost and power of the cluster that
carries it (`fabricsim topology`: switches, cables and optics sized from the NICs). Run: `python
examples/network_generations.py`; it writes nothing.
"""

from __future__ import annotations

import fabricsim

PLAN = {"model": "llama3-70b", "system": "dgx-h100", "gpus": 512, "tp": 8, "pp": 4, "seq": 8192, "gbs": 512}

print(f"{'network':8} {'step (s)':>9} {'tokens/s':>10} {'bound':>8} {'capex ($M)':>11} {'power (kW)':>11} "
      f"{'tokens/s per $M':>16}")
for ib in ("hdr", "ndr", "xdr"):
    step = fabricsim.train(**PLAN, ib=ib)
    cluster = fabricsim.topology(system=PLAN["system"], nodes=PLAN["gpus"] // 8, ib=ib).to_dict()
    capex_musd = cluster["capex_usd"] / 1e6
    print(f"{ib:8} {step.step_time_s:9.3f} {step.tokens_per_s:10,.0f} {step.bottleneck:>8} {capex_musd:11.2f} "
          f"{cluster['power_w'] / 1e3:11.0f} {step.tokens_per_s / capex_musd:16,.0f}")
