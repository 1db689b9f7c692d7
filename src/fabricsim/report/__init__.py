"""Reports: matplotlib plots and rich tables of model results."""

from fabricsim.report.plots import plot_collective_sweep

__all__ = ["plot_collective_sweep"]
