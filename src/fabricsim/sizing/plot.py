"""The time-vs-cost picture of a search: every qualifying plan and the Pareto frontier (matplotlib, to a file)."""

from __future__ import annotations

from pathlib import Path

from fabricsim.sizing.result import SizingResult

DAY_S = 86400.0


def plot_pareto(result: SizingResult, path: Path) -> None:
    """Scatter of cost against days to train, by system, with the frontier drawn on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ranked = result.ranked[result.ranked["cost_usd"].notna()]
    for system, group in ranked.groupby("system", sort=True):
        ax.scatter(group["time_to_train_s"] / DAY_S, group["cost_usd"] / 1e6, s=4, alpha=0.4, label=str(system))
    front = result.pareto
    if len(front):
        ax.plot(front["time_to_train_s"] / DAY_S, front["cost_usd"] / 1e6, "k.-", label="Pareto frontier")
    ax.set_xlabel("time to train (days)")
    ax.set_ylabel("cost (M USD)")
    ax.set_title(f"{result.to_json()['model']}: {result.spec.tokens / 1e12:g}T tokens")
    ax.legend(fontsize=7, markerscale=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
