"""`fabricsim.whatif`: the step time with each layer made faster and on named cluster swaps priced from the bill of
materials, and the verdict of where the next dollar goes; the engine of `fabricsim whatif`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from fabricsim.api.coerce import api_call, whatif_fabric_alias
from fabricsim.api.goodput import goodput_given, goodput_spec, guarded_goodput, storage_fallbacks
from fabricsim.api.result import Result, model_import_fields
from fabricsim.api.train import Run, plan_json, prepare_run, training_bands

if TYPE_CHECKING:
    from fabricsim.analysis import WhatIf
    from fabricsim.training import GoodputSpec
    from fabricsim.validation import BandResult


@dataclass(frozen=True, repr=False)
class WhatIfResult(Result):
    """Each layer sped up and each swap: ``analysis`` (``layers``, ``swaps``, ``verdict``), the base ``run`` and the
    base step's bands."""

    command: ClassVar[str] = "whatif"

    run: Run | None = None
    analysis: WhatIf | None = None
    bands: dict[str, BandResult] | None = None

    @property
    def verdict(self) -> str:
        """Where the next dollar goes, in one sentence."""
        assert self.analysis is not None
        return self.analysis.verdict.sentence

    def headline(self) -> dict[str, object]:
        assert self.analysis is not None
        return {"base_step_s": self.analysis.base.step_time_s, "verdict": self.analysis.verdict.layer}


@api_call(whatif_fabric_alias)
def whatif(*, model: str = "llama3-70b", system: str = "dgx-h100", gpus: int | None = None, tp: int = 1,
           pp: int = 1, dp: int | None = None, cp: int = 1, ep: int = 1, etp: int | None = None,
           gpus_per_node: int | None = None, seq: int = 4096, gbs: int = 512, mbs: int | None = None,
           vpp: int | None = None, recompute: str | None = None, zero: int | None = None, precision: str = "bf16",
           kernels: str = "fused", grad_dtype: str = "fp32", pp_layout: str | None = None, flash_attn: bool = True,
           sequence_parallel: bool | None = None, overlap_grad_reduce: bool = True,
           overlap_param_gather: bool = True, tp_comm_overlap: bool = False, ep_comm_overlap: bool = False,
           shared_expert_overlap: bool = False, dropout: bool = True, moe_balance: str = "random",
           capacity_factor: float | None = None, moe_dispatcher: str = "alltoall", ib: str | None = None,
           oversubscription: float = 1.0, factor: float = 2.0, swap: Sequence[str] | None = None,
           goodput: bool = True, storage: str = "superpod-better", storage_bw: str | None = None,
           storage_network: str | None = None, storage_server: str | None = None, storage_servers: int | None = None,
           spares: str | None = None, checkpoint_mode: str = "sync", checkpoint_interval: str | None = None,
           mtbf_scale: float = 1.0, restart: str | None = None,
           calibration: Sequence[str] | None = None) -> WhatIfResult:
    """Which layer to make faster and which cluster swap pays (the options and defaults of `fabricsim whatif`;
    ``swap`` as its --swap KEY=VALUE strings, e.g. ``["ib=xdr", "system=gb200-nvl72"]``, or one such string;
    ``ib`` the network as `train` takes it, ``fabric=`` a deprecated alias of it)."""
    inputs = dict(locals())
    from fabricsim.analysis import Scenario, parse_swap, what_if
    from fabricsim.inputs import finite
    from fabricsim.validation import band_fields

    calibration = list(calibration or [])
    factor = finite(factor, "--factor", low=1.0, high=1e6, low_open=True)
    options = goodput_spec(storage, storage_bw, checkpoint_mode, checkpoint_interval, mtbf_scale, restart,
                           network=storage_network, server=storage_server, servers=storage_servers, spares=spares) \
        if goodput else None
    swaps = tuple(parse_swap(s) for s in swap or [])
    run = prepare_run(model=model, system=system, gpus=gpus, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, seq=seq, gbs=gbs,
                      mbs=mbs, vpp=vpp, recompute=recompute, zero=zero, precision=precision, kernels=kernels,
                      pp_layout=pp_layout, flash_attn=flash_attn, sequence_parallel=sequence_parallel,
                      overlap_grad_reduce=overlap_grad_reduce, overlap_param_gather=overlap_param_gather,
                      tp_comm_overlap=tp_comm_overlap, ep_comm_overlap=ep_comm_overlap,
                      shared_expert_overlap=shared_expert_overlap, dropout=dropout, moe_balance=moe_balance,
                      capacity_factor=capacity_factor, moe_dispatcher=moe_dispatcher, fabric=ib,
                      oversubscription=oversubscription, calibration=calibration, grad_dtype=grad_dtype, etp=etp,
                      gpus_per_node=gpus_per_node)

    def analyse(good: GoodputSpec | None) -> WhatIf:
        scenario = Scenario(run.system, run.plan.world_size, run.fabric, oversubscription, run.cluster.catalog,
                            goodput=good)
        return what_if(run.spec, run.plan, scenario, factor, swaps, tuple(calibration))

    # the goodput add-on never refuses the answer: failed, the swaps are priced on a healthy cluster, with a note
    # (its SpecErrors still fail where the user gave a goodput option; a goodput swap makes it the answer asked for)
    note: str | None = None
    if options is None or any(s.changes_goodput_only for s in swaps):
        result = analyse(options)
    else:
        found_result, note = guarded_goodput(lambda: analyse(options), goodput_given(whatif, inputs))
        result = analyse(None) if found_result is None else found_result
    found = training_bands(run, calibration)
    data = {**result.to_json(), **band_fields({"base_step_s": found["step_time_s"]}), "plan": plan_json(run.plan),
            "chosen": run.choice.to_json(), **model_import_fields(run.imported)}
    catalog = run.cluster.catalog
    fallbacks = storage_fallbacks([run.cluster.system, *(catalog.system(s.value) for s in swaps if s.key == "system")],
                                  options)
    if fallbacks:
        data["storage_fallbacks"] = fallbacks
    if note is not None:
        data["goodput_note"] = note
    rows = [{"kind": "layer", **d} for d in data.get("layers", [])] + \
        [{"kind": "swap", **d} for d in data.get("swaps", [])]
    return WhatIfResult(inputs, data, rows=rows, run=run, analysis=result, bands=found)
