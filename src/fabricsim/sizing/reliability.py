"""Storage and hot spares of a candidate cluster: each goodput option `size` searches (storage tier, spare count)
priced into the cluster's bill and its goodput; the cluster takes the best for the objective.

For every plan on a cluster, a run's cost is its healthy time / goodput x the cluster's cost per hour (amortised
capex, storage and spares included, plus energy), so the cheapest option is the one with the least cost per hour
of kept training, whatever the plan; with the objective "time", the highest goodput (the cheaper on a tie); with
"energy", the least power per kept hour.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricsim.catalog import Catalog
from fabricsim.comm import Cluster
from fabricsim.model import ModelSpec
from fabricsim.sizing.economics import Economics, economics, run_costs
from fabricsim.sizing.space import ClusterChoice
from fabricsim.sizing.spec import SizingSpec
from fabricsim.training import GoodputSpec, parts_of, predict_goodput

HOUR_S = 3600.0


@dataclass(frozen=True)
class Reliability:
    """A cluster's chosen goodput option: its bill (storage and spares in) and the goodput it keeps."""

    econ: Economics
    goodput: float
    option: GoodputSpec | None
    spare_gpus: int = 0


def goodput_options(spec: SizingSpec) -> tuple[GoodputSpec, ...]:
    """The options searched: the spec's variants, else its one goodput spec."""
    if spec.goodput is None:
        return ()
    return spec.goodput_variants or (spec.goodput,)


def cluster_reliability(model: ModelSpec, spec: SizingSpec, choice: ClusterChoice, cluster: Cluster,
                        catalog: Catalog) -> Reliability:
    """The option this cluster runs with (see the module); a healthy cluster without ``spec.goodput``."""
    options = goodput_options(spec)
    if not options:
        return Reliability(economics(choice, spec.rail_optimized, catalog), 1.0, None)
    best: tuple[tuple[float, float], Reliability] | None = None
    for option in options:
        units, unit = option.spares_for(cluster.system, choice.gpus)
        spares = units * unit
        econ = economics(choice, spec.rail_optimized, catalog, option.network_spec(), spares)
        if econ.error is not None:
            return Reliability(econ, 0.0, option, spares)
        parts = parts_of(cluster.system, choice.gpus, econ.nics, econ.cables)
        good = predict_goodput(model, cluster, parts, 0.0, 1.0, option).goodput
        hourly = float(run_costs(np.array([HOUR_S]), econ, choice.gpus, spec)[0][0])
        per_kept_hour = hourly / good if good > 0 else np.inf
        per_kept_hour = np.inf if np.isnan(per_kept_hour) else per_kept_hour
        if spec.objective == "time":
            key = (-good, per_kept_hour)
        elif spec.objective == "energy":
            key = (np.inf if econ.power_w is None or good <= 0 else econ.power_w / good, per_kept_hour)
        else:
            key = (per_kept_hour, -good)
        if best is None or key < best[0]:
            best = (key, Reliability(econ, good, option, spares))
    assert best is not None
    return best[1]
