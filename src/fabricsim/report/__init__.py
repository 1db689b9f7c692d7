"""Reports: matplotlib plots, and the self-contained HTML design-review report (plotly charts)."""

from fabricsim.report.html.render import COMMANDS as REPORT_COMMANDS
from fabricsim.report.html.render import render_report, topology_svg, write_report
from fabricsim.report.plots import plot_bars, plot_breakdown, plot_collective_sweep, plot_compare

__all__ = [
    "REPORT_COMMANDS",
    "plot_bars",
    "plot_breakdown",
    "plot_collective_sweep",
    "plot_compare",
    "render_report",
    "topology_svg",
    "write_report",
]
