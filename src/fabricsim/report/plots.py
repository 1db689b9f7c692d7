"""Plots for design reviews (matplotlib, headless Agg backend)."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fabricsim import units
from fabricsim.collectives import CollectiveModel, Prediction, busbw_factor, choices


def _size_axis(ax: Axes, sizes: list[int], title: str, max_ticks: int = 10) -> None:
    """Log-2 message-size x axis with nccl-tests size labels, busbw y axis, grid and legend."""
    ax.set_xscale("log", base=2)
    ticks = sizes[:: max(1, len(sizes) // max_ticks)]
    ax.set_xticks(ticks, [units.format_size(s) for s in ticks])
    ax.set_xlabel("message size (nccl-tests 'size')")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def _save(fig: Figure, path: str | Path) -> Path:
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out


def plot_collective_sweep(model: CollectiveModel, op: str, prediction: Prediction, path: str | Path) -> Path:
    """busbw against message size (log x): one line per algorithm (its best protocol), the chosen one marked."""
    sizes = [r.size_bytes for r in prediction.rows]
    factor = busbw_factor(op, model.shape.nranks)
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=120)
    by_algo: dict[str, list[float]] = {}
    for option in choices(op, model.shape, model.tuning):
        curve = [s / option.cost.time_s(s) / 1e9 * factor for s in sizes]
        prev = by_algo.get(option.algorithm)
        by_algo[option.algorithm] = curve if prev is None else [max(a, b) for a, b in zip(prev, curve, strict=True)]
    for algo, curve in sorted(by_algo.items()):
        ax.plot(sizes, curve, label=algo, linewidth=1.5, alpha=0.8)
    ax.plot(sizes, [r.busbw_GBps for r in prediction.rows], "k.", markersize=7, label="chosen (auto)")
    a = prediction.assumptions
    _size_axis(ax, sizes, f"{op} on {a['ranks']} GPUs of {a['system']} ({a['nodes']} node(s))")
    return _save(fig, path)


def plot_breakdown(prediction: object, title: str, path: str | Path) -> Path:
    """A training step's time by layer: exposed and overlapped seconds as stacked horizontal bars."""
    from fabricsim.training import LAYERS, TrainingPrediction

    assert isinstance(prediction, TrainingPrediction)
    kinds = [k for k in LAYERS if prediction.breakdown.exposed[k] or prediction.breakdown.overlapped[k]]
    exposed = [prediction.breakdown.exposed[k] for k in kinds]
    hidden = [prediction.breakdown.overlapped[k] for k in kinds]
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(kinds) + 1.8), dpi=120)
    ax.barh(kinds, exposed, color="#c0392b", label="exposed")
    ax.barh(kinds, hidden, left=exposed, color="#95a5a6", label="overlapped")
    ax.invert_yaxis()
    ax.set_xlabel("seconds per step")
    ax.set_title(f"{title}\nstep {prediction.step_time_s:.3g} s, bottleneck: {prediction.bottleneck}")
    ax.legend()
    ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, path)


def plot_bars(values: dict[str, float], title: str, xlabel: str, path: str | Path) -> Path:
    """Seconds per layer kind as horizontal bars (the non-zero ones), the largest in red."""
    kinds = [k for k, v in values.items() if v]
    largest = max(kinds, key=lambda k: values[k]) if kinds else ""
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(kinds) + 1.8), dpi=120)
    ax.barh(kinds, [values[k] for k in kinds], color=["#c0392b" if k == largest else "#95a5a6" for k in kinds])
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(f"{title}\nbottleneck: {largest}")
    ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, path)


def plot_compare(rows: list[dict[str, float | int | str]], title: str, path: str | Path) -> Path:
    """Measured and predicted busbw against size on one chart (log x, y from zero), the median and worst |error|
    in the title so the chart carries its own accuracy figure."""
    sizes = [int(r["size_bytes"]) for r in rows]
    errors = [abs(float(r["error"])) for r in rows]
    median = statistics.median(errors)
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=120)
    ax.plot(sizes, [float(r["measured_busbw_GBps"]) for r in rows], "o-", label="measured")
    ax.plot(sizes, [float(r["predicted_busbw_GBps"]) for r in rows], "s--", label="fabricsim")
    _size_axis(ax, sizes, f"{title}\n|busbw error|: median {median:.1%}, worst {max(errors):.1%}")
    ax.set_ylim(bottom=0)
    return _save(fig, path)
