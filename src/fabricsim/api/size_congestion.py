"""`size --congestion`: the best plan of each system x network re-timed on the flow simulator under the fabric
behaviours of its kind (InfiniBand's credits and congestion control, RoCE's PFC with DCQCN, Spectrum-X's), so the
networks are compared as they behave under congestion, priced: the time and cost to train scale with the step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fabricsim.api.specs import SizeRun
    from fabricsim.catalog import Catalog

PLAN_KEYS = ("tp", "pp", "cp", "ep", "etp", "vpp", "mbs", "recompute", "zero", "precision", "flash_attn", "gbs",
             "seq")


def congestion_rows(run: SizeRun, best: Sequence[dict[str, Any]], behaviours: Sequence[str],
                    catalog: Catalog) -> list[dict[str, Any]]:
    """Per best plan of a system x network and per behaviour of that network's kind: the analytical step (what the
    search ranked by), the flow-simulated step with ideal sharing and under the behaviour, and the time and cost to
    train at that step."""
    from fabricsim.api.calls.train import train
    from fabricsim.catalog import network_link_id

    out = []
    for row in best:
        network, _, design = str(row["fabric"]).partition(" ")  # "ndr", or "ndr rail-only" / "ndr 2-plane"
        kind = catalog.link(network_link_id(catalog, network)).kind
        mine = [b for b in behaviours if catalog.congestion_control(b).runs_on(kind)]
        if not mine:
            continue
        common = {"model": run.model, "system": row["system"], "ib": network, "gpus": int(row["gpus"]),
                  "fabric_kind": "rail-only" if design == "rail-only" else "fat-tree",
                  "planes": 2 if design == "2-plane" else 1,
                  "oversubscription": float(row["oversubscription"]), "goodput": False,
                  "calibration": run.calibration, "framework": run.framework or "megatron",
                  "gpu_power": row.get("gpu_power_w"),  # the row's GPU power (--gpu-power, --gpu-power-points)
                  **{k: row["plan"][k] for k in PLAN_KEYS if k in row["plan"]}}
        analytical = float(train(**common).data["step_time_s"])
        ideal = float(train(**common, sim="flow").data["step_time_s"])
        for name in mine:
            step = float(train(**common, sim="flow", cc=name).data["step_time_s"])
            scale = step / analytical if analytical > 0 else 1.0
            out.append({"system": row["system"], "fabric": row["fabric"], "oversubscription": row["oversubscription"],
                        "gpus": row["gpus"], "congestion_control": name, "analytical_step_s": analytical,
                        "flow_ideal_step_s": ideal, "flow_step_s": step, "slowdown": scale,
                        "time_to_train_s": float(row["time_to_train_s"]) * scale,
                        "cost_usd": None if row.get("cost_usd") is None else float(row["cost_usd"]) * scale})
    return out
