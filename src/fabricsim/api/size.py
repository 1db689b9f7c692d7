"""`fabricsim.size`: the cheapest (or fastest, or least-energy) cluster and plan to train a model on a token budget
under a deadline, budget and power cap; with ``inference=True``, the cheapest system, serving plan and replica count
meeting TTFT/TPOT SLOs at a request rate. What `fabricsim size` runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fabricsim.api.result import Result, model_import_fields
from fabricsim.api.size_spec import EXECUTORS, MAX_SEQ, MOE_FIXED, TRAINING_ONLY, inference_spec, sizing_spec
from fabricsim.errors import SpecError

if TYPE_CHECKING:
    from fabricsim.api.specs import SizeRun
    from fabricsim.api.specs.sizing import PlanSpaceOptions
    from fabricsim.catalog import Catalog
    from fabricsim.sizing import InferenceSizingResult, InferenceSizingSpec, SizingResult, SizingSpec


@dataclass(frozen=True, repr=False)
class SizeResult(Result):
    """A sizing search: the ranked plans (``rows``; ``to_frame()``), the Pareto front and ties (``data``), and the
    search result behind them: ``sizing`` for training, ``serving`` for ``inference=True``. ``note`` says why
    nothing qualified, when nothing did."""

    command: ClassVar[str] = "size"

    sizing: SizingResult | None = None
    spec: SizingSpec | None = None
    serving: InferenceSizingResult | None = None
    serving_spec: InferenceSizingSpec | None = None

    @property
    def note(self) -> str | None:
        result = self.sizing if self.sizing is not None else self.serving
        return None if result is None else result.note

    @property
    def best(self) -> dict[str, Any] | None:
        """The first-ranked plan (SI keys as in the JSON), or None when nothing qualifies."""
        rows = self.to_dict()["results"]
        return rows[0] if rows else None

    def headline(self) -> dict[str, Any]:
        best = self.best
        keys = ("system", "gpus", "cost_usd", "time_to_train_s", "cost_usd_per_million_tokens", "replicas")
        return {"qualifying": len(self.data.get("results", [])),
                **({k: best[k] for k in keys if best is not None and k in best})}


def _check(message: str) -> None:
    """Bad input: the one-line error the CLI prints."""
    raise SpecError(message)


def run_size(run: SizeRun, inputs: dict[str, Any], progress: Callable[..., None] | None = None) -> SizeResult:
    """`fabricsim.size` (generated in `fabricsim.api.calls` from `SizeRun`): the training search, or with
    ``inference`` the serving search; ``inputs`` the call's keyword arguments as given, the result's echo."""
    o = run
    gpu_hour, inference, disagg, checkpoint, objective, engine = (o.gpu_hour, o.inference, o.disagg, o.checkpoint,
                                                                  o.objective, o.engine)
    resume, top, model = o.resume, o.top, o.model
    out = None if o.out is None else Path(o.out)
    if gpu_hour is not None:
        check_gpu_hour(gpu_hour)
    if inference:
        return _size_inference(inputs, out, progress)
    if disagg:
        _check("--disagg: sizes disaggregated serving pools; add --inference")
    if o.lengths is not None:
        _check("--lengths: sets the request lengths of size --inference's simulated arrivals; add --inference")
    if checkpoint is not None:
        _check("--checkpoint: names the checkpoint of the serving launch commands; add --inference")
    for flag, value in (("--kv-tier", None if o.kv_tier == "none" else o.kv_tier),
                        ("--prefix-network", o.prefix_network or None), ("--kv-server", o.kv_server),
                        ("--kv-servers", o.kv_servers)):
        if value is not None:
            _check(f"{flag}: a networked KV-cache tier serves inference; add --inference")
    if objective not in ("time", "cost", "energy"):
        _check(f"--objective: {objective!r} is not one of time, cost, energy")
    if engine is not None and engine in EXECUTORS:
        _check(f"--engine: names the serving engine of size --inference; the training search's executor is "
               f"--executor {engine} (local, ray or serial)")
    if engine is not None:
        _check(f"--engine: {engine!r} is a serving engine, which only size --inference takes; the training search "
               "runs where --executor says (local, ray or serial)")
    executor = check_space(o)
    if resume and out is None:
        _check("--resume needs --out (the Parquet file of the interrupted search)")
    if top < 1:
        _check(f"--top: must be at least 1, got {top}")
    from fabricsim.model import load_model_import
    from fabricsim.sizing import size as search

    spec = space_spec(inputs)
    check_fabrics(spec.catalog(), spec.fabrics)
    behaviours = congestion_names(spec.catalog(), o.congestion)
    result = search(spec, executor=executor, workers=o.workers, ray_address=o.ray_address,  # type: ignore[arg-type]
                    out=out, resume=resume, progress=progress, exhaustive=o.exhaustive)
    data = {**result.to_json(), **model_import_fields(load_model_import(model))}
    from fabricsim.api.goodput import storage_fallbacks

    catalog = spec.catalog()
    fallbacks = storage_fallbacks([catalog.system(str(e["system"])) for e in data["results"]], spec.goodput)
    if fallbacks:
        data["storage_fallbacks"] = fallbacks
    if behaviours:
        from fabricsim.api.size_congestion import congestion_rows

        data["congestion"] = congestion_rows(o, data["best_by_system_fabric"], behaviours, spec.catalog())
    from fabricsim.api.decision import decision_rows

    data["decision"] = decision_rows(data["best_by_system_fabric"], spec.objective, catalog)
    rows = [dict(e) for e in data["results"]]
    return SizeResult(inputs, data, rows=rows, sizing=result, spec=spec)


def check_gpu_hour(gpu_hour: str) -> None:
    """A rent of 0 would price every plan at $0: refused."""
    from fabricsim.sizing import parse_money

    if not parse_money(gpu_hour, "--gpu-hour") > 0:
        _check(f"--gpu-hour: must be > 0 USD per GPU-hour (at {gpu_hour} every cost would be $0), got {gpu_hour}")


def check_space(o: PlanSpaceOptions) -> str:
    """The checks of a training space's options that its SizingSpec does not make (`size` and `sweep`); the
    executor it runs on."""
    from fabricsim.inputs import finite

    executor = o.executor or "local"
    if executor not in EXECUTORS:
        _check(f"--executor: {executor!r} is not one of local, ray, serial")
    if o.pue is not None:
        finite(o.pue, "--pue", low=1.0, high=10.0)
    if o.kwh is not None:
        finite(o.kwh, "--kwh", low=0.0, high=100.0)
    if o.workers is not None and o.workers < 1:
        _check(f"--workers: must be at least 1, got {o.workers}")
    if not 1 <= o.seq <= MAX_SEQ:
        _check(f"--seq: must be 1..{MAX_SEQ}, got {o.seq}")
    return executor


def space_spec(inputs: dict[str, Any]) -> SizingSpec:
    """The SizingSpec of a training search's inputs (every `size` option, defaults filled): MoE options held in
    every plan are refused on a dense model as `train` refuses them."""
    moe = {k: inputs[k] for k in MOE_FIXED if k != "dropout" and inputs[k] is not None}
    if moe:
        from fabricsim.api.train import check_moe_options
        from fabricsim.model import resolve_model

        check_moe_options(resolve_model(inputs["model"])[0], moe)
    return sizing_spec(**{k: v for k, v in inputs.items() if k not in (
        "engine", "executor", "workers", "disagg", "checkpoint", "congestion", "kv_tier", "prefix_network",
        "kv_server", "kv_servers")})


def congestion_names(catalog: Catalog, names: str | None) -> list[str]:
    """The --congestion behaviours as catalog ids, checked at the edge (an error names --congestion)."""
    if names is None:
        return []
    out = [catalog.congestion_control(n, field="--congestion").id for n in names.split(",") if n.strip()]
    if not out:
        raise SpecError("empty; name fabric behaviours, e.g. ib,spectrum-x (fabricsim catalog congestion)",
                        field="--congestion")
    return out


def check_fabrics(catalog: Catalog, fabrics: Sequence[str] | None) -> None:
    """Each --fabrics name checked at the edge by the one network resolver, so an error names --fabrics (the rows
    keep the name as typed: the search resolves it again for each system)."""
    from fabricsim.catalog import network_id

    for name in fabrics or ():
        network_id(catalog, name, field="--fabrics")


def _size_inference(inputs: dict[str, Any], out: Path | None, progress: Callable[..., None] | None) -> SizeResult:
    """The ``inference=True`` search: options that size training only are refused, not ignored."""
    from fabricsim.model import load_model_import
    from fabricsim.sizing import size_inference

    given = [f"--{k.replace('_', '-')}" for k in TRAINING_ONLY if inputs.get(k) is not None]
    if given:
        _check(f"{', '.join(given)}: size training only; --inference sizes serving at --rate (leave "
               f"{'it' if len(given) == 1 else 'them'} out)")
    engine = inputs.get("engine")
    if engine is not None and engine in EXECUTORS:
        _check(f"--engine: with --inference it names the serving engine (trtllm, vllm or sglang), not {engine!r}; "
               "--executor sets where a training search runs")
    spec = inference_spec({**inputs, "out": out})
    from fabricsim.catalog import limit_systems, load_catalog

    catalog = load_catalog(*inputs.get("calibration") or ())
    catalog = limit_systems(catalog, spec.systems or catalog.priced_system_ids(), inputs.get("gpu_power"),
                            "--gpu-power")
    check_fabrics(catalog, spec.fabrics)
    result = size_inference(spec, out=out, progress=progress, catalog=catalog)
    data = result.to_json()
    imported = load_model_import(inputs["model"])
    payload = {**{k: v for k, v in data.items() if k != "inputs"}, **model_import_fields(imported)}
    return SizeResult(data.get("inputs", inputs), payload, rows=data["results"], serving=result, serving_spec=spec)
