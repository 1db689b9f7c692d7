"""The residuals of every counted validation case, computed once and kept on disk under a fingerprint of the code,
the catalog and the cases (any change recomputes them), and their leave-one-source-out coverage.

The cache lives in ``$FABRICSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/fabricsim``, else ``~/.cache/fabricsim``; a
folder that cannot be written only costs the recomputation (about a second)."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricsim.catalog import Catalog
from fabricsim.diskcache import cache_dir, cached_data, store
from fabricsim.errors import SpecError
from fabricsim.validation.error_model import (
    LEVEL,
    Residual,
    campaign_interval,
    comparable,
    log_ratio,
    source_key,
)
from fabricsim.validation.regimes import Regime, collective_regime

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
TABLE_VERSION = 1
SAME_PREDICTION = 0.01
"""A case's prediction still counts as its first one (the ledger's) while within this fraction of it."""


def regime_from_json(data: dict[str, Any]) -> Regime:
    """A regime as ``Regime.to_json`` wrote it."""
    features = tuple((str(k), str(v)) for k, v in dict(data["features"]).items())
    return Regime(str(data["kind"]), str(data["family"]), features, essential=len(data.get("essential", [])))


def residuals_of(results: Sequence[Any], blind: Mapping[str, float] | None = None) -> list[Residual]:
    """The residual of every counted case that carries a regime (validation's ``CaseResult``s): its blind error
    (``blind``: case id -> error as first predicted, the ledger's) while the model still makes that prediction (within
    1%), else the model's own. A blind residual is the out-of-sample error of the prediction as first made; once a
    mechanism changes the prediction it describes a model that no longer exists, and centring a band on it would
    correct a bias the model has shed (issue 45: the MoE inference campaigns, first predicted 30-60% optimistic)."""
    out: list[Residual] = []
    for r in results:
        regime = getattr(r, "regime", None)
        if not regime or r.measured <= 0 or r.predicted <= 0:
            continue
        first = (blind or {}).get(r.id)
        error = first if first is not None and abs((1.0 + r.error) / (1.0 + first) - 1.0) <= SAME_PREDICTION \
            else r.error
        out.append(Residual(id=r.id, source=source_key(r.source), regime=regime_from_json(regime),
                            log_ratio=log_ratio(error, r.time_like), model_log_ratio=log_ratio(r.error, r.time_like)))
    return out


def package_files() -> list[Path]:
    """fabricsim's code and packaged data, in path order: what the residual table's fingerprint covers."""
    return [p for p in sorted(PACKAGE_ROOT.rglob("*"))
            if p.suffix in (".py", ".yaml", ".yml", ".json") and "__pycache__" not in p.parts]


def fingerprint(extra: Sequence[str] = ()) -> str:
    """A hash of fabricsim's code and packaged data, the validation files in use and ``extra`` texts (overlays): of
    their content, so a checkout that only touches files keeps its table."""
    from fabricsim.validation.cases import validation_sources

    digest = hashlib.sha256(f"v{TABLE_VERSION}".encode())
    for path in package_files():
        digest.update(str(path.relative_to(PACKAGE_ROOT)).encode())
        digest.update(path.read_bytes())
    for name, (text, _) in validation_sources().items():
        digest.update(name.encode())
        digest.update(text.encode())
    for text in extra:
        digest.update(text.encode())
    return digest.hexdigest()[:24]


def known_fingerprint(extra: Sequence[str] = ()) -> str:
    """`fingerprint`, looked up by what a stat of the same files gives (path, size, modification time) when an
    earlier process computed it: a command's start-up stats the package instead of reading it, and a checkout that
    only touches files computes the same content fingerprint once more."""
    from fabricsim.validation.cases import shared_validation_dir

    digest = hashlib.sha256(f"v{TABLE_VERSION}".encode())
    shared = shared_validation_dir()
    shared_files = sorted(shared.glob("*.yaml")) if shared is not None and shared.is_dir() else []
    for path in [*package_files(), *shared_files]:
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    for text in extra:
        digest.update(text.encode())
    return str(cached_data("fingerprint", digest.hexdigest()[:32], lambda: fingerprint(extra)))


KEPT_TABLES = 16
"""residual tables kept in the cache folder (the newest; one per version of the code and data)"""


def _to_json(residuals: Sequence[Residual]) -> list[dict[str, object]]:
    return [{"id": r.id, "source": r.source, "regime": r.regime.to_json(), "log_ratio": r.log_ratio, "own": r.own,
             "model_log_ratio": r.model_log_ratio} for r in residuals]


def _from_json(rows: list[dict[str, Any]]) -> list[Residual]:
    return [Residual(id=str(r["id"]), source=str(r["source"]), regime=regime_from_json(r["regime"]),
                     log_ratio=float(r["log_ratio"]), own=bool(r.get("own", False)),
                     model_log_ratio=None if r.get("model_log_ratio") is None else float(r["model_log_ratio"]))
            for r in rows]


def _read(path: Path) -> list[Residual] | None:
    try:
        return _from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, residuals: Sequence[Residual]) -> None:
    """The table in the cache folder; every code change writes one, so only the newest are kept."""
    store(path, json.dumps(_to_json(residuals)).encode(), pattern="residuals-*.json", keep=KEPT_TABLES)


def _compute(overlays: tuple[str, ...]) -> list[Residual]:
    from fabricsim.catalog import load_catalog
    from fabricsim.validation.ledger import blind_errors
    from fabricsim.validation.runner import run_validation

    catalog = load_catalog(*overlays)
    own = [r for path in overlays for r in calibration_residuals(path, catalog)]
    return residuals_of(run_validation(catalog), blind_errors()) + own


def calibration_residuals(path: str, catalog: Catalog) -> list[Residual]:
    """The residuals left on the measurements a calibration overlay keeps (``measurements``: nccl-tests points of
    the user's cluster), predicted with the calibrated catalog."""
    from fabricsim.collectives import CollectiveModel, group_shape
    from fabricsim.inputs import load_yaml, read_text

    doc = load_yaml(read_text(path), path)
    records = doc.get("measurements") if isinstance(doc, dict) else None
    if not records:
        return []
    if not isinstance(records, list) or not all(isinstance(m, dict) for m in records):
        raise SpecError("expected a list of measurements", field="measurements", source=path)
    out: list[Residual] = []
    for i, m in enumerate(records):
        try:
            system = catalog.system(str(m["system"]))
            nranks, nnodes, op = int(m["nranks"]), int(m["nnodes"]), str(m["op"])
            size, measured = int(m["size_bytes"]), float(m["time_s"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"measurement {i}: {exc}", field="measurements", source=path) from None
        shape = group_shape(system, nranks, ranks_per_node=-(-nranks // nnodes), catalog=catalog)
        row = CollectiveModel(shape, catalog=catalog).predict(op, [size]).rows[0]
        if measured <= 0 or row.time_s <= 0:
            continue
        regime = collective_regime(shape.nnodes, row.bound, op, catalog.gpu(system.gpu))
        out.append(Residual(id=f"{path}#{i}", source=f"calibration {path}", regime=regime,
                            log_ratio=math.log(measured / row.time_s), own=True))
    return out


@functools.lru_cache(maxsize=8)
def published_residuals(overlays: tuple[str, ...] = ()) -> tuple[Residual, ...]:
    """Every counted case's residual under the packaged catalog with ``overlays`` applied (calibration files), from
    the disk cache when the fingerprint matches."""
    texts = [Path(p).read_text(encoding="utf-8") for p in overlays]
    path = cache_dir() / f"residuals-{known_fingerprint(texts)}.json"
    cached = _read(path) if path.is_file() else None
    if cached is not None:
        return tuple(cached)
    residuals = _compute(overlays)
    _write(path, residuals)
    return tuple(residuals)


@dataclass(frozen=True)
class Coverage:
    """Leave-one-source-out coverage of one kind's bands: how many of its cases fell inside the band fitted on the
    other documents, how many got a band at all, the median band width (high / low - 1), and the coverage by
    document (each left-out document's share of its cases inside, averaged with every document weighing one: how
    a new campaign fares, not how many cases a big one has)."""

    kind: str
    cases: int
    banded: int
    covered: int
    median_width: float | None
    documents: int = 0
    document_coverage: float | None = None

    @property
    def rate(self) -> float | None:
        return self.covered / self.banded if self.banded else None

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "cases": self.cases, "banded": self.banded, "covered": self.covered,
                "coverage": self.rate, "median_width": self.median_width, "documents": self.documents,
                "document_coverage": self.document_coverage}


def held_out_fit(target: Residual, residuals: Sequence[Residual], level: float = LEVEL
                 ) -> tuple[tuple[float, float], float] | None:
    """The band of ``target`` fitted without any case from its document (log ratios) and the centre of the same
    residuals (the bias the shown figure takes out), or None."""
    pool = [r for r in residuals if r.source != target.source]
    found = comparable(target.regime, pool, level)
    if not isinstance(found, tuple):
        return None
    return campaign_interval(found[0], pool, target.regime, level)


@dataclass(frozen=True)
class HeldOut:
    """One case's band fitted without its document: its width (high / low - 1), whether it held the case, and the
    error of the figure shown with that band's bias taken out (``centred_error``, rate orientation: the
    leave-one-document-out residual of what the tool prints)."""

    width: float
    covered: bool
    centred_error: float = 0.0
    source: str = ""


def held_out(residuals: Sequence[Residual], level: float = LEVEL) -> dict[str, HeldOut | None]:
    """Every case's leave-one-source-out band, by case id (None: too few comparable cases in other documents)."""
    out: dict[str, HeldOut | None] = {}
    for r in residuals:
        fit = held_out_fit(r, residuals, level)
        if fit is None:
            out[r.id] = None
            continue
        (low, high), centre = fit
        out[r.id] = HeldOut(width=math.expm1(high - low), covered=low <= r.log_ratio <= high,
                            centred_error=math.expm1(r.current - centre), source=r.source)
    return out


def summarise_held_out(name: str, ids: Sequence[str], found: dict[str, HeldOut | None]) -> Coverage:
    """Coverage and median width over the cases ``ids`` (a kind or a validate group)."""
    banded = [h for i in ids if (h := found.get(i)) is not None]
    widths = sorted(h.width for h in banded)
    by_doc: dict[str, list[bool]] = {}
    for h in banded:
        by_doc.setdefault(h.source, []).append(h.covered)
    shares = [statistics.fmean(v) for v in by_doc.values()]
    return Coverage(kind=name, cases=len(ids), banded=len(banded), covered=sum(h.covered for h in banded),
                    median_width=statistics.median(widths) if widths else None, documents=len(by_doc),
                    document_coverage=statistics.fmean(shares) if shares else None)


def coverage(residuals: Sequence[Residual], level: float = LEVEL) -> list[Coverage]:
    """Leave-one-source-out coverage per kind (collective, training, inference)."""
    found = held_out(residuals, level)
    return [summarise_held_out(kind, [r.id for r in residuals if r.regime.kind == kind], found)
            for kind in sorted({r.regime.kind for r in residuals})]
