"""`fabricsim.sweep`: every plan of a training space that fits, timed and priced, as one table (pandas, or Arrow):
`size`'s evaluation without its bound, constraints or ranking, for a study of the whole grid. What `fabricsim
sweep` runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fabricsim.api.result import Result
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    import pandas as pd

    from fabricsim.api.specs import SweepRun
    from fabricsim.sizing import Sweep

SUMMARY_KEYS = ("system", "fabric", "fabric_kind", "oversubscription", "gpus", "tp", "pp", "dp", "cp", "ep", "vpp",
                "mbs", "recompute", "zero", "precision", "gbs", "step_time_s", "time_to_train_s", "cost_usd", "mfu")
"""The columns of the fastest and cheapest plan in the summary (the table has every column)."""


@dataclass(frozen=True, repr=False)
class SweepResult(Result):
    """A sweep: ``to_frame()`` the table (a row per plan that fits: the columns of `size`'s rows), ``to_arrow()``
    the same as an Arrow table; ``data`` the summary (plans, clusters, the fastest and cheapest plan)."""

    command: ClassVar[str] = "sweep"
    headline_keys: ClassVar[tuple[str, ...]] = ("plans", "clusters", "wall_s")

    swept: Sweep | None = None

    def to_frame(self) -> pd.DataFrame:
        """Every plan that fits, a row each, in cluster order (SI units, as `size`'s rows)."""
        import pandas as pd

        return pd.DataFrame() if self.swept is None else self.swept.frame

    def to_arrow(self) -> Any:
        """The table as an Arrow table (columnar, zero-copy to Polars or DuckDB)."""
        import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

        return pa.Table.from_pandas(self.to_frame(), preserve_index=False)


def run_sweep(run: SweepRun, inputs: dict[str, Any], progress: Callable[..., None] | None = None) -> SweepResult:
    """`fabricsim.sweep` (generated in `fabricsim.api.calls` from `SweepRun`): the space's options read as
    `size` reads them, every plan that fits timed and priced; ``inputs`` the call's keyword arguments as given."""
    from fabricsim.api.size import check_fabrics, check_gpu_hour, check_space, space_spec
    from fabricsim.api.specs.sizing import SizeRun
    from fabricsim.sizing import sweep

    if run.gpus is None and run.nodes is None:  # size's default space is 58M candidates: a sweep names its sizes
        raise SpecError("a sweep times every plan of its space: name the cluster sizes (e.g. --gpus 1024..4096); "
                        "`fabricsim size` searches the default 1k-64k space", field="--gpus")
    if run.gpu_hour is not None:
        check_gpu_hour(run.gpu_hour)
    executor = check_space(run)
    spec = space_spec(SizeRun.model_validate(run.model_dump()).model_dump())
    check_fabrics(spec.catalog(), spec.fabrics)
    swept = sweep(spec, executor=executor, workers=run.workers, ray_address=run.ray_address,  # type: ignore[arg-type]
                  progress=progress)
    if run.out is not None:
        path = Path(run.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        swept.frame.to_parquet(path, index=False)
    return SweepResult(inputs, summary(swept, run.out), swept=swept)


def summary(swept: Sweep, out: str | Path | None) -> dict[str, Any]:
    """The sweep's JSON document: counts, where the table went, the fastest and the cheapest plan."""
    import numpy as np

    frame = swept.frame
    data: dict[str, Any] = {"plans": len(frame), "clusters": swept.clusters, "candidates": swept.candidates,
                            "wall_s": swept.wall_s, "out": None if out is None else str(out),
                            "columns": list(frame.columns), "errors": swept.errors}
    for name, column in (("fastest", "time_to_train_s"), ("cheapest", "cost_usd")):
        values = frame[column].to_numpy(dtype=float) if column in frame.columns else np.empty(0)
        data[name] = None
        if not np.isnan(values).all():  # an empty table, or no price: no row
            row = frame.iloc[int(np.nanargmin(values))]
            data[name] = {k: row[k].item() if hasattr(row[k], "item") else row[k] for k in SUMMARY_KEYS
                          if k in frame.columns}
    return data
