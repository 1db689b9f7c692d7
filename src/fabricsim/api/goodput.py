"""The goodput options `train`, `whatif` and `size` share, as a checked spec, and the goodput of a predicted run
(failures, checkpoints, restarts) with its JSON."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from fabricsim import units

if TYPE_CHECKING:
    from fabricsim.catalog import System
    from fabricsim.comm import Cluster
    from fabricsim.model import ModelSpec
    from fabricsim.training import Goodput, GoodputSpec, TrainingPrediction

T = TypeVar("T")

# GoodputSpec fields whose option is named otherwise
GOODPUT_OPTIONS = {"storage_write_bytes_per_s": "--storage-bw", "interval_s": "--checkpoint-interval",
                   "mtbf_scale": "--mtbf-scale", "restart_s": "--restart", "checkpoint": "--checkpoint-mode",
                   "storage": "--storage", "storage_network": "--storage-network",
                   "storage_server": "--storage-server", "storage_servers": "--storage-servers",
                   "spares": "--spares", "spare_fraction": "--spares"}


def goodput_spec(storage: str, storage_bw: str | None, checkpoint: str, interval: str | None, mtbf_scale: float,
                 restart: str | None, *, network: str | None = None, server: str | None = None,
                 servers: int | None = None, spares: str | None = None) -> GoodputSpec:
    """The options as a validated spec (bad values are a one-line SpecError naming the option). ``network`` None is
    the default, separate, on which a system without storage ports converges with a note; separate given
    explicitly refuses such a system."""
    from pydantic import ValidationError

    from fabricsim.errors import cli_field, spec_error
    from fabricsim.training import GoodputSpec, spare_fields

    try:  # GoodputSpec's own bounds refuse a zero rate or interval
        return GoodputSpec(
            storage=storage.strip().lower(), checkpoint=checkpoint.strip().lower(), mtbf_scale=mtbf_scale,
            storage_write_bytes_per_s=None if storage_bw is None else
            units.parse_rate(storage_bw, field="--storage-bw"),
            interval_s=None if interval is None else units.parse_duration(interval, field="--checkpoint-interval"),
            restart_s=None if restart is None else units.parse_duration(restart, field="--restart"),
            storage_network=(network or "separate").strip().lower(), storage_network_given=network is not None,
            storage_servers=servers, **spare_fields(spares, "--spares"),
            **({} if server is None else {"storage_server": server.strip().lower()}))
    except ValidationError as exc:
        raise cli_field(spec_error(exc), GOODPUT_OPTIONS) from None


def run_goodput_spec(run: Any) -> GoodputSpec | None:
    """The goodput options of a run spec (`TrainRun`, `WhatIfRun`) as a validated spec, or None with
    ``goodput=False``: the one reading of those options both commands share."""
    if not run.goodput:
        return None
    return goodput_spec(run.storage, run.storage_bw, run.checkpoint_mode, run.checkpoint_interval, run.mtbf_scale,
                        run.restart, network=run.storage_network, server=run.storage_server,
                        servers=run.storage_servers, spares=run.spares)

def run_goodput(spec: ModelSpec, cluster: Cluster, pred: TrainingPrediction, options: GoodputSpec) -> Goodput:
    """Goodput of the predicted run on its cluster (its parts from the bill of materials)."""
    from fabricsim.training import job_parts, predict_goodput

    return predict_goodput(spec, cluster, job_parts(cluster, pred.gpus), pred.step_time_s, pred.tokens_per_s,
                           options)


def goodput_given(run: Any) -> bool:
    """True when a run spec (`TrainRun`, `WhatIfRun`) gave any goodput option a value other than its default: then
    a SpecError of the add-on answers what the user asked and fails the command (`guarded_goodput`)."""
    from fabricsim.api.specs import GoodputOptions

    return any(getattr(run, name) != field.default for name, field in GoodputOptions.model_fields.items())


def guarded_goodput(compute: Callable[[], T], given: bool) -> tuple[T | None, str | None]:
    """Run the goodput add-on so that it never refuses the main answer: its result and None, or None and the one
    line ``goodput: not computed: <reason>`` when it fails. A SpecError still fails the command when the user gave a
    goodput option (``given``): it answers what they asked, e.g. ``--storage-network separate`` on a system
    without storage ports."""
    from fabricsim.errors import SpecError

    try:
        return compute(), None
    except SpecError as exc:
        if given:
            raise
        return None, f"goodput: not computed: {exc}"
    except Exception as exc:  # a defect of the add-on must not cost the step time it adds to
        return None, f"goodput: not computed: {type(exc).__name__}: {exc}"


def goodput_json(g: Goodput) -> dict[str, Any]:
    """The goodput figures as JSON (SI; an interval that is never needed is null)."""
    from dataclasses import asdict

    data = asdict(g)
    data["storage_bill"] = None if g.storage_bill is None else g.storage_bill.model_dump(mode="json")
    if data["checkpoint_interval_s"] == float("inf"):
        data["checkpoint_interval_s"] = None
    return data


def storage_fallbacks(systems: Iterable[System], options: GoodputSpec | None) -> list[str]:
    """The notes of the systems on which the default separate storage network converges for want of storage ports
    (a catalog entry written before them), once each; the CLI prints them on stderr."""
    from fabricsim.topology import converges_without_ports, no_storage_ports_note

    spec = None if options is None else options.network_spec()
    notes = [no_storage_ports_note(s) for s in systems if converges_without_ports(s, spec)]
    return list(dict.fromkeys(notes))
