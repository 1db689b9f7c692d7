"""Rank evaluated plans: constraints (deadline, budget, power cap), the objective, the time-cost Pareto frontier,
the best plan per system x fabric, and, when nothing qualifies, which constraint bound."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fabricsim import units
from fabricsim.sizing.spec import RECOMPUTE, SizingSpec

if TYPE_CHECKING:
    import pandas as pd

OBJECTIVE_COLUMN = {"time": "time_to_train_s", "cost": "cost_usd", "energy": "energy_mwh"}
# Ties go to the simpler, smaller plan, then to a fixed order of the remaining fields (deterministic output).
TIE_COLUMNS = ("time_to_train_s", "cost_usd", "gpus", "tp", "pp", "cp", "ep", "etp", "vpp", "recompute_rank", "zero",
               "mbs", "precision", "gbs", "system", "fabric", "oversubscription")


def constraint_masks(frame: pd.DataFrame, spec: SizingSpec) -> dict[str, np.ndarray]:
    """Rows meeting each constraint the spec sets (an unknown cost or power fails its constraint)."""
    return meets_constraints(spec, frame["time_to_train_s"].to_numpy(), frame["cost_usd"].to_numpy(),
                             frame["power_w"].to_numpy())


def meets_constraints(spec: SizingSpec, time_s: np.ndarray, cost_usd: np.ndarray,
                      power_w: np.ndarray | float) -> dict[str, np.ndarray]:
    """Per constraint the spec sets, which runs of these times, costs and powers meet it (NaN fails)."""
    masks: dict[str, np.ndarray] = {}
    if spec.deadline_s is not None:
        masks["deadline"] = time_s <= spec.deadline_s
    if spec.budget_usd is not None:
        masks["budget"] = cost_usd <= spec.budget_usd
    if spec.power_cap_w is not None:
        masks["power cap"] = np.broadcast_to(np.asarray(power_w) * spec.pue <= spec.power_cap_w, time_s.shape)
    return masks


def rank(frame: pd.DataFrame, spec: SizingSpec) -> pd.DataFrame:
    """Rows meeting every constraint, best first by the objective (unknown values last), ties as TIE_COLUMNS."""
    masks = constraint_masks(frame, spec)
    keep = np.ones(len(frame), dtype=bool)
    for mask in masks.values():
        keep &= mask
    return order(frame[keep], spec.objective)


def order(frame: pd.DataFrame, objective: str) -> pd.DataFrame:
    """Sort by the objective column, NaN last, then the tie columns."""
    keyed = frame.assign(recompute_rank=frame["recompute"].map(RECOMPUTE.index))
    columns = [OBJECTIVE_COLUMN[objective], *TIE_COLUMNS]
    ranked = keyed.sort_values(columns, kind="mergesort", na_position="last")
    return ranked.drop(columns="recompute_rank").reset_index(drop=True)


def pareto(frame: pd.DataFrame) -> pd.DataFrame:
    """Plans no other plan beats on both time to train and cost (known cost only), fastest first."""
    known = order(frame[frame["cost_usd"].notna()], "time")
    costs = known["cost_usd"].to_numpy()
    keep = np.zeros(len(known), dtype=bool)
    best = np.inf
    for i in range(len(known)):
        if costs[i] < best:  # sorted by time then cost: cheaper than every faster plan
            keep[i] = True
            best = costs[i]
    return known[keep].reset_index(drop=True)


def best_by_system_fabric(ranked: pd.DataFrame) -> pd.DataFrame:
    """The first (best) ranked plan of each system x fabric, in rank order."""
    return ranked.groupby(["system", "fabric"], sort=False).head(1).reset_index(drop=True)


def binding_note(frame: pd.DataFrame, spec: SizingSpec) -> str:
    """Why nothing qualified: no plan fits, or which constraint bound and how close the best plan came."""
    if frame.empty:
        return "no plan was evaluated (the search's candidates say why: SizingResult.candidates)"
    masks = constraint_masks(frame, spec)
    parts = []
    for name, mask in masks.items():
        if mask.any():
            continue
        if name == "deadline":
            best = frame["time_to_train_s"].min()
            parts.append(f"no plan meets the deadline of {units.format_duration(spec.deadline_s or 0.0)} "
                         f"(fastest: {units.format_duration(best)})")
        elif name == "budget":
            best = frame["cost_usd"].min()
            shown = "unknown (no prices)" if np.isnan(best) else f"${best:,.0f}"
            parts.append(f"no plan meets the budget of ${spec.budget_usd:,.0f} (cheapest: {shown})")
        else:
            best = (frame["power_w"] * spec.pue).min()
            parts.append(f"no cluster meets the facility power cap of {(spec.power_cap_w or 0) / 1e6:g} MW "
                         f"(--facility; lowest facility power: {best / 1e6:.2f} MW at PUE {spec.pue:g})")
    if parts:
        return "; ".join(parts)
    return "no plan meets all of " + ", ".join(masks) + " at once (each alone is met)"


SECONDARY = ("cost_usd", "gpus", "tp_outside_nvlink", "pp")
SECONDARY_WORDS = {"cost_usd": "cost", "gpus": "fewer GPUs", "tp_outside_nvlink": "tensor parallelism inside one "
                   "NVLink domain", "pp": "fewer pipeline stages"}


def secondary(objective: str) -> tuple[str, ...]:
    """The tie-break columns for an objective: ``SECONDARY`` without the objective itself."""
    return tuple(c for c in SECONDARY if c != OBJECTIVE_COLUMN.get(objective))


def secondary_text(objective: str) -> str:
    """The tie-break in words: 'cost, then fewer GPUs, then ...' (the objective itself left out)."""
    return ", then ".join(SECONDARY_WORDS[c] for c in secondary(objective))


def tie_mask(ranked: pd.DataFrame, objective: str, spread_log: float | None) -> np.ndarray:
    """Plans whose objective is within the model's error on a comparison of the best (``spread_log``: the high end
    of the paired-residual band, a log ratio) and so cannot be told apart from it; the best is always one. No
    spread (no comparable published pairs): only the best."""
    mask = np.zeros(len(ranked), dtype=bool)
    if ranked.empty:
        return mask
    values = ranked[OBJECTIVE_COLUMN[objective]].to_numpy(dtype=float)
    if spread_log is None or not np.isfinite(values[0]):
        mask[0] = True
        return mask
    within: np.ndarray = np.isfinite(values) & (values <= values[0] * np.exp(spread_log))
    return within


def tie_winner(ranked: pd.DataFrame, mask: np.ndarray, nvlink_gpus: dict[str, int], objective: str) -> int:
    """The position in ``ranked`` of the tie set's pick by the secondary objective (``secondary_text``), the
    primary objective and the fixed order breaking what remains."""
    ties = ranked[mask]
    outside = (ties["tp"].to_numpy() > np.array([nvlink_gpus.get(s, 1) for s in ties["system"]])).astype(int)
    keyed = ties.assign(tp_outside_nvlink=outside, position=np.flatnonzero(mask))
    columns = [*secondary(objective), OBJECTIVE_COLUMN[objective], "position"]
    return int(keyed.sort_values(columns, kind="mergesort", na_position="last")["position"].iloc[0])
