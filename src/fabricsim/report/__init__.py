"""Reports: matplotlib plots and rich tables of model results."""

from fabricsim.report.plots import plot_bars, plot_breakdown, plot_collective_sweep, plot_compare

__all__ = [
    "plot_bars",
    "plot_breakdown",
    "plot_collective_sweep",
    "plot_compare",
]
