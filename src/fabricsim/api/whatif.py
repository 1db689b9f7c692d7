"""`fabricsim.whatif`: the step time with each layer made faster and on named cluster swaps priced from the bill of
materials, and the verdict of where the next dollar goes; the engine of `fabricsim whatif`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from fabricsim.api.goodput import goodput_given, guarded_goodput, run_goodput_spec, storage_fallbacks
from fabricsim.api.result import Result, model_import_fields
from fabricsim.api.train import Run, degraded_parts, plan_json, prepare_run, training_bands

if TYPE_CHECKING:
    from fabricsim.analysis import WhatIf
    from fabricsim.api.specs import WhatIfRun
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


def run_whatif(run: WhatIfRun, inputs: dict[str, Any]) -> WhatIfResult:
    """`fabricsim.whatif` (generated in `fabricsim.api.calls` from `WhatIfRun`): each layer made faster and each
    swap priced; ``inputs`` the call's keyword arguments as given, the result's ``inputs`` echo."""
    from fabricsim.analysis import Scenario, parse_swap, what_if
    from fabricsim.inputs import finite
    from fabricsim.validation import band_fields

    o = run
    calibration = list(o.calibration or [])
    factor = finite(o.factor, "--factor", low=1.0, high=1e6, low_open=True)
    options = run_goodput_spec(o)
    swaps = tuple(parse_swap(s) for s in o.swap or [])
    prepared = prepare_run(o, calibration, flow=o, parts=o)

    def analyse(good: GoodputSpec | None) -> WhatIf:
        scenario = Scenario(prepared.system, prepared.plan.world_size, prepared.fabric, prepared.oversubscription,
                            prepared.cluster.catalog, goodput=good,
                            network_fraction=prepared.cluster.network_fraction,
                            healthy_catalog=prepared.healthy_catalog, template=prepared.cluster)
        return what_if(prepared.spec, prepared.plan, scenario, factor, swaps, tuple(calibration))

    # the goodput add-on never refuses the answer: failed, the swaps are priced on a healthy cluster, with a note
    # (its SpecErrors still fail where the user gave a goodput option; a goodput swap makes it the answer asked for)
    note: str | None = None
    if options is None or any(s.changes_goodput_only for s in swaps):
        result = analyse(options)
    else:
        found_result, note = guarded_goodput(lambda: analyse(options), goodput_given(o))
        result = analyse(None) if found_result is None else found_result
    found = training_bands(prepared, calibration)
    data = {**result.to_json(), **band_fields({"base_step_s": found["step_time_s"]}),
            "plan": plan_json(prepared.plan), "chosen": prepared.choice.to_json(),
            "framework": prepared.framework_json(), **model_import_fields(prepared.imported),
            "degraded": degraded_parts(prepared)}
    catalog = prepared.cluster.catalog
    systems = [prepared.cluster.system, *(catalog.system(s.value) for s in swaps if s.key == "system")]
    fallbacks = storage_fallbacks(systems, options)
    if fallbacks:
        data["storage_fallbacks"] = fallbacks
    if note is not None:
        data["goodput_note"] = note
    rows = [{"kind": "layer", **d} for d in data.get("layers", [])] + \
        [{"kind": "swap", **d} for d in data.get("swaps", [])]
    return WhatIfResult(inputs, data, rows=rows, run=prepared, analysis=result, bands=found)
