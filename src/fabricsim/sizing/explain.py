"""Why a candidate has no plan: every searched system x fabric gets its best plan or the reasons it has none (the
GPU counts it was searched at, what did not divide, what did not fit in memory, which constraint bound), and the
catalog parts that leave a cluster unpriced."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fabricsim.catalog import Catalog
from fabricsim.sizing.rank import binding_note
from fabricsim.sizing.result import entry
from fabricsim.sizing.space import ClusterChoice, unit_gpus
from fabricsim.sizing.spec import SizingSpec

if TYPE_CHECKING:
    import pandas as pd

GB = 1e9
SHOWN = 12  # GPU counts (or dp values) listed in one reason before "..."


def _counts(values: list[int] | set[int]) -> str:
    ordered = sorted(values)
    text = ", ".join(f"{v:,}" for v in ordered[:SHOWN])
    return text + (f", ... ({len(ordered)} in all)" if len(ordered) > SHOWN else "")


def _searched(spec: SizingSpec, gpus: list[int], unit: int, unit_name: str) -> str:
    where = ""
    if spec.gpus_range is not None:
        lo, hi = spec.gpus_range
        where = f" in {lo:,}..{hi:,}"
        if not any(lo <= g <= hi for g in gpus):
            where += f" (none inside it: the nearest {unit}-GPU {unit_name} each side)"
    listed = ", ".join(f"{g:,} ({g // unit})" for g in gpus[:SHOWN]) + (", ..." if len(gpus) > SHOWN else "")
    return f"GPU counts it can be built at{where}, in whole {unit}-GPU {unit_name}: {listed}"


def _chunk_reasons(spec: SizingSpec, metas: list[tuple[ClusterChoice, dict[str, Any]]]) -> list[str]:
    """The causes behind chunks without a fitting plan, each with the GPU counts it applies to."""
    unbuildable: dict[str, set[int]] = {}
    no_shape: dict[str, set[int]] = {}
    no_batch: set[int] = set()
    dps: set[int] = set()
    plan_errors: dict[str, set[int]] = {}
    memory: set[int] = set()
    stalled: set[int] = set()
    need: float | None = None
    have: float | None = None
    for choice, meta in metas:
        if meta.get("rows"):
            continue
        why = meta.get("why") or {}
        if meta.get("error"):
            unbuildable.setdefault(str(meta["error"]), set()).add(choice.gpus)
        elif why.get("no_shape"):
            no_shape.setdefault(str(why["no_shape"]), set()).add(choice.gpus)
        elif why.get("goodput") == 0.0:
            stalled.add(choice.gpus)
        elif why.get("shapes") and why.get("no_batch") == why.get("shapes"):
            no_batch.add(choice.gpus)
            dps.update(why.get("dp") or ())
        elif why.get("memory_need") is not None:
            memory.add(choice.gpus)
            if need is None or why["memory_need"] < need:
                need, have = why["memory_need"], why["memory_have"]
        elif why.get("plan_error"):
            plan_errors.setdefault(str(why["plan_error"]), set()).add(choice.gpus)
    reasons = [f"cannot be built at {_counts(g)} GPUs: {msg}" for msg, g in unbuildable.items()]
    reasons += [f"at {_counts(g)} GPUs: {msg}" for msg, g in no_shape.items()]
    if no_batch:
        gbs = ",".join(str(b) for b in spec.gbs)
        reasons.append(f"--gbs {gbs} is not a multiple of micro-batch x dp for any plan at {_counts(no_batch)} GPUs "
                       f"(dp there: {_counts(dps)}); try a --gbs that dp divides{_gbs_hint(min(spec.gbs), dps)}")
    if memory and need is not None and have is not None:
        reasons.append(f"no plan fits in GPU memory at {_counts(memory)} GPUs (the least any plan needs: "
                       f"{need / GB:.1f} GB per GPU, has {have / GB:.1f} GB)")
    reasons += [f"plans rejected at {_counts(g)} GPUs: {msg}" for msg, g in plan_errors.items()]
    if stalled:
        reasons.append(f"at {_counts(stalled)} GPUs failures come faster than restarts and checkpoints let the run "
                       "progress (goodput 0; see --mtbf-scale, --restart, --storage)")
    return reasons


def unpriced_note(missing: list[str] | tuple[str, ...]) -> str:
    """``q3400 price, q3400 power`` -> a sentence naming the parts the catalog lacks figures for."""
    parts: dict[str, list[str]] = {}
    for m in missing:
        item, _, figure = m.rpartition(" ")
        parts.setdefault(item or m, []).append(figure)
    named = "; ".join(f"{item} has no {' or '.join(sorted(figures))}" for item, figures in parts.items())
    unknown = "cost" + (" and energy" if any("power" in f for f in parts.values()) else "") + " unknown"
    return f"in the catalog {named} ({unknown}; no figure is assumed)"


def _gbs_hint(gbs: int, dps: set[int]) -> str:
    """A global batch near ``gbs`` that one of the ``dps`` divides (dp x a power of two), as a hint."""
    best: tuple[int, int, int] | None = None  # (distance, batch, dp)
    for dp in sorted(dps):
        k = 1
        while dp * k < 2 * gbs:
            cand = (abs(dp * k - gbs), dp * k, dp)
            best = cand if best is None or cand < best else best
            k *= 2
    return "" if best is None else f" (e.g. --gbs {best[1]} = {best[2]} x {best[1] // best[2]})"


def candidates(spec: SizingSpec, catalog: Catalog, choices: list[ClusterChoice], metas: Mapping[str, dict[str, Any]],
               frame: pd.DataFrame, ranked: pd.DataFrame) -> list[dict[str, Any]]:
    """One entry per searched system x fabric, in search order: its GPU counts, best plan (None if it has none),
    the reasons it has none, and the catalog figures it lacks."""
    pairs: dict[tuple[str, str], list[ClusterChoice]] = {}
    for c in choices:
        pairs.setdefault((c.system, c.fabric), []).append(c)
    out = []
    for (sid, fabric), group in pairs.items():
        system = catalog.system(sid)
        unit = unit_gpus(system)
        unit_name = "NVLink domains" if system.nvlink_domain_gpus == unit else "nodes"
        gpus = sorted({c.gpus for c in group})
        missing = sorted({m for c in group for m in (metas.get(c.chunk_id) or {}).get("missing", ())})
        best = None
        reasons: list[str] = []
        if len(ranked):
            mine = ranked[(ranked["system"] == sid) & (ranked["fabric"] == fabric)]
            if len(mine):
                best = entry(mine.iloc[0].to_dict(), missing)
        searched = _searched(spec, gpus, unit, unit_name)
        if best is None:
            reasons.append(searched)
            reasons += _chunk_reasons(spec, [(c, metas[c.chunk_id]) for c in group if c.chunk_id in metas])
            fitted = frame[(frame["system"] == sid) & (frame["fabric"] == fabric)] if len(frame) else frame
            if len(fitted):  # plans fit, but none meets the constraints
                reasons.append(binding_note(fitted, spec))
            if len(reasons) == 1:
                reasons.append("no plan was evaluated (interrupted search?)")
        out.append({"system": sid, "fabric": fabric, "gpus_searched": gpus, "searched": searched, "best": best,
                    "reasons": reasons, "unpriced": missing})
    return out


def no_plan_note(found: list[dict[str, Any]]) -> str:
    """One line: why no candidate has a plan, candidates with the same reasons grouped."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for c in found:
        groups.setdefault(tuple(c["reasons"][1:]), []).append(f"{c['system']} {c['fabric']}")
    parts = [f"{', '.join(names)}: {'; '.join(reasons) or 'no plan'}" for reasons, names in groups.items()]
    return "no candidate has a plan. " + " | ".join(parts)
