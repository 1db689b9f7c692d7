"""Jobs files for `fabricsim traffic`: a YAML list of jobs and background transfers, checked field by field.

    storage_nodes: 2            # last nodes of the cluster serve storage (needed by background traffic)
    classes: {training: 4, storage: 1}   # optional traffic classes and their arbitration weights (QoS)
    own_class: training         # optional: the class of the job `train`/`collective` runs beside these
    jobs:
      - {name: train-a, gpus: 512, placement: packed, pattern: all_to_all, bytes: 1G, class: training}
      - {name: train-b, gpus: 512, placement: scattered, pattern: all_reduce, bytes: 4G, start: 0.01}
      - {name: serve, gpus: 64, pattern: kv_tier, bytes: 64M, every: 10ms, loads: 50}  # KV loads from the tier
    background:
      - {kind: checkpoint_write, job: train-a, bytes: 2G, start: 0, class: storage}

A job or transfer without `class` is in the `default` class (weight 1 unless `classes` gives it one). A `kv_tier`
job is serving GPUs loading KV from a networked KV tier (the storage nodes stand for its servers): each GPU receives
`bytes` a load, `loads` times, `every` seconds apart (`infer --kv-tier network --json`: kv_tier's
load_bytes_per_request_per_gpu, and 1 / the rate per GPU of a replica).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricsim import units
from fabricsim.errors import SpecError
from fabricsim.inputs import load_yaml, parse_buffer_size, read_text
from fabricsim.traffic.jobs import DEFAULT_CLASS, KV_TIER, BackgroundSpec, JobSpec, check_seed, traffic_classes

_JOB_KEYS = {"name", "gpus", "pattern", "bytes", "placement", "start", "seed", "class", "every", "loads"}
MAX_LOADS = 10_000
_BG_KEYS = {"kind", "job", "bytes", "start", "class"}


@dataclass(frozen=True)
class JobsFile:
    """A parsed jobs file: jobs, background transfers, storage nodes, traffic classes and the class of the job a
    `train` or `collective` run puts beside them."""

    jobs: list[JobSpec]
    background: list[BackgroundSpec]
    storage_nodes: int
    classes: dict[str, float] = field(default_factory=dict)
    own_class: str = DEFAULT_CLASS


def _keys(entry: Any, allowed: set[str], required: set[str], where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise SpecError("must be a mapping", field=where)
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise SpecError(f"unknown key {unknown[0]!r}; allowed {', '.join(sorted(allowed))}", field=where)
    missing = sorted(required - set(entry))
    if missing:
        raise SpecError(f"missing {missing[0]!r}", field=where)
    return entry


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"must be an integer, got {value!r}", field=where)
    return value


def _seed(value: Any, where: str) -> int:
    """A random seed: an integer, not negative (numpy's generators take 0 and up)."""
    return check_seed(_int(value, where), where)


def _count(value: Any, where: str) -> int:
    """A GPU count: an integer, at least 1."""
    number = _int(value, where)
    if not 1 <= number <= 2**24:
        raise SpecError(f"must be 1..{2**24}, got {number}", field=where)
    return number


def _start(value: Any, where: str) -> float:
    """A start time: a duration string or seconds, finite and not negative."""
    return units.parse_duration(value, field=where)


def _bytes(value: Any, where: str, max_bytes: int = 2**40) -> float:
    """Bytes to send: at least one byte, at most 1 TiB per GPU (1 PiB for background transfers)."""
    return float(parse_buffer_size(value, where, max_bytes=max_bytes))


def load_jobs(path: str | Path, base: Path | None = None) -> tuple[list[JobSpec], list[BackgroundSpec], int]:
    """(jobs, background, storage_nodes) from a jobs YAML file; matrix paths are relative to the file."""
    parsed = load_jobs_file(path, base)
    return parsed.jobs, parsed.background, parsed.storage_nodes


def load_jobs_file(path: str | Path, base: Path | None = None) -> JobsFile:
    """A jobs YAML file with its traffic classes; matrix paths are relative to the file."""
    p = Path(path)
    data = load_yaml(read_text(p, "jobs file"), str(p))
    try:
        return _parse_jobs(data, base or p.parent)
    except SpecError as exc:
        if exc.source:
            raise
        raise SpecError(str(exc), source=str(p)) from None


def _class(value: Any, classes: dict[str, float], where: str) -> str:
    """A traffic class name the file declares (or the default class)."""
    name = str(value)
    if name not in classes:
        raise SpecError(f"unknown traffic class {name!r}; declared: {', '.join(classes)}", field=where)
    return name


def _loads(e: dict[str, Any], pattern: str, where: str) -> tuple[float, int]:
    """(every, loads) of a kv_tier job: loads a GPU receives ``bytes`` in, ``every`` seconds apart; refused on the
    other patterns (they send once)."""
    if pattern.strip().lower().replace("-", "_") != KV_TIER:
        for key in ("every", "loads"):
            if key in e:
                raise SpecError(f"sets how often a kv_tier job loads; pattern {pattern!r} sends once",
                                field=f"{where}.{key}")
        return 0.0, 1
    loads = _int(e.get("loads", 1), f"{where}.loads")
    if not 1 <= loads <= MAX_LOADS:
        raise SpecError(f"must be 1..{MAX_LOADS}, got {loads}", field=f"{where}.loads")
    every = _start(e.get("every", 0.0), f"{where}.every")
    if loads > 1 and every <= 0:
        raise SpecError("several loads need the time between them, e.g. every: 10ms", field=f"{where}.every")
    return every, loads


def _parse_jobs(data: Any, root: Path) -> JobsFile:
    doc = _keys(data, {"jobs", "background", "storage_nodes", "classes", "own_class"}, {"jobs"}, "jobs file")
    raw_classes = doc.get("classes") or {}
    if not isinstance(raw_classes, dict):
        raise SpecError("must be a mapping of class name to weight, e.g. {training: 4, storage: 1}",
                        field="classes")
    classes = traffic_classes({str(k): v for k, v in raw_classes.items()})
    raw_jobs = doc["jobs"]
    if not isinstance(raw_jobs, list) or not raw_jobs:
        raise SpecError("must be a non-empty list", field="jobs")
    jobs = []
    for i, raw in enumerate(raw_jobs):
        where = f"jobs[{i}]"
        e = _keys(raw, _JOB_KEYS, {"gpus", "pattern", "bytes"}, where)
        pattern = str(e["pattern"])
        if pattern.lower().endswith(".csv") and not Path(pattern).is_absolute():
            pattern = str(root / pattern)
        every, loads = _loads(e, pattern, where)
        jobs.append(JobSpec(name=str(e.get("name", f"job{i}")), gpus=_count(e["gpus"], f"{where}.gpus"),
                            pattern=pattern, bytes=_bytes(e["bytes"], f"{where}.bytes"),
                            placement=str(e.get("placement", "packed")),
                            start=_start(e.get("start", 0.0), f"{where}.start"),
                            seed=_seed(e.get("seed", i), f"{where}.seed"),
                            traffic_class=_class(e.get("class", DEFAULT_CLASS), classes, f"{where}.class"),
                            every=every, loads=loads))
    background = []
    for i, raw in enumerate(doc.get("background") or []):
        where = f"background[{i}]"
        e = _keys(raw, _BG_KEYS, {"kind", "job", "bytes"}, where)
        background.append(BackgroundSpec(kind=str(e["kind"]), job=str(e["job"]),
                                         bytes=_bytes(e["bytes"], f"{where}.bytes", 2**50),
                                         start=_start(e.get("start", 0.0), f"{where}.start"),
                                         traffic_class=_class(e.get("class", DEFAULT_CLASS), classes,
                                                              f"{where}.class")))
    storage = _int(doc.get("storage_nodes", 1 if background else 0), "storage_nodes")
    if storage < 0:
        raise SpecError("storage_nodes must be >= 0", field="storage_nodes")
    own = _class(doc.get("own_class", DEFAULT_CLASS), classes, "own_class")
    return JobsFile(jobs, background, storage, classes, own)
