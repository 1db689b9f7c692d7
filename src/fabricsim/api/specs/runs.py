"""The run specs of the commands that run a model or build a cluster: each is its groups of options in `--help`
order (pydantic collects the fields of the bases last-first, so a spec lists its groups in reverse), and
``api`` says how `fabricsim.api.specs.generate` writes its API function."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from fabricsim.api.specs.cluster import ClusterOptions, DegradeOptions, DesignOptions, FlowOptions, TopologyStorage
from fabricsim.api.specs.fields import ApiFunction, OptionGroup, opt
from fabricsim.api.specs.goodput import GoodputOptions, GoodputSwitch
from fabricsim.api.specs.plan import PlanOptions
from fabricsim.api.specs.shared import CALIBRATION_HELP, Calibration


class CalibrationOptions(OptionGroup):
    """Catalog overlays a run reads on top of the shipped catalog."""

    calibration: Calibration


class WhatIfOptions(OptionGroup):
    """How much faster each layer is made, and the cluster swaps to price."""

    factor: float = opt(2.0, "how much faster each layer is made")
    swap: Sequence[str] | None = opt(None, "cluster swap KEY=VALUE, repeatable: system=gb200-nvl72, ib=xdr, "
                                     "scale-up=ualink|sue|nvlink6 (the domain on another technology at equal "
                                     "bandwidth), gpu-power=W, cooling=air|liquid|liquid-hd, "
                                     "oversubscription=1, fabric=rail-only, planes=2; storage=2x (or a tier, or "
                                     "converged|separate|none), spares=2%, checkpoint=async, mtbf=2 change goodput "
                                     "(storage and spares also the bill); sharp=on|off; with --sim flow "
                                     "routing=adaptive, cc=ib (a fabric behaviour), qos=on|off; with --degrade "
                                     "repair=gpu|link|all")


class TopologyCalibration(OptionGroup):
    """Catalog overlays (`topology` takes a sequence, empty by default)."""

    calibration: Sequence[str] = opt((), CALIBRATION_HELP)


class TrainRun(GoodputSwitch, GoodputOptions, DegradeOptions, FlowOptions, CalibrationOptions, DesignOptions,
               PlanOptions):
    """A training run: `fabricsim train` and `fabricsim.train`."""

    api: ClassVar[ApiFunction] = ApiFunction(
        "train", "fabricsim.api.train:run_train", "fabricsim.api.train:TrainResult",
        "fabricsim.api.coerce:fabric_alias",
        "Predict one training step (the options and defaults of `fabricsim train`): knobs left None (mbs, vpp, "
        "recompute, zero) are chosen as the fastest setting that fits. ``ib`` is the network between nodes as --ib "
        "names it (ndr, ib-ndr, 400g, a switch id), as in `topology`; ``fabric=`` for it is a deprecated alias "
        "(``fabric=`` naming a design, e.g. rail-only, sets ``fabric_kind``). Values are taken in their natural "
        "types (``gpus=\"16\"``, ``tp=8.0``); bad input raises ``fabricsim.SpecError``. ``goodput=False`` skips the "
        "goodput add-on (``goodput`` None; the step is the same); a failure of the add-on leaves it None with a "
        "``goodput_note``, unless a goodput option the caller gave is refused.")


class WhatIfRun(CalibrationOptions, GoodputOptions, GoodputSwitch, DegradeOptions, FlowOptions, WhatIfOptions,
                PlanOptions):
    """A what-if analysis of a training run: `fabricsim whatif` and `fabricsim.whatif`."""

    api: ClassVar[ApiFunction] = ApiFunction(
        "whatif", "fabricsim.api.whatif:run_whatif", "fabricsim.api.whatif:WhatIfResult",
        "fabricsim.api.coerce:whatif_fabric_alias",
        "Which layer to make faster and which cluster swap pays (the options and defaults of `fabricsim whatif`; "
        "``swap`` as its --swap KEY=VALUE strings, e.g. ``[\"ib=xdr\", \"system=gb200-nvl72\"]``, or one such "
        "string; ``ib`` the network as `train` takes it, ``fabric=`` a deprecated alias of it).")


class TopologyRun(TopologyCalibration, TopologyStorage, ClusterOptions):
    """A cluster and its bill of materials: `fabricsim topo` and `fabricsim.topology`."""

    api: ClassVar[ApiFunction] = ApiFunction(
        "topology", "fabricsim.api.topology:run_topology", "fabricsim.api.topology:TopologyResult", None,
        "Build a cluster topology and its bill of materials (the options and defaults of `fabricsim topo`).")

