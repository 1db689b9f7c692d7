"""The self-contained HTML design-review report: the page, its shared and per-command sections, its plotly charts,
and the renderer (``render``)."""
