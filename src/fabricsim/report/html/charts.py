"""The HTML report's interactive charts (plotly, imported on first use): error bands, time by layer, memory,
what-if, swaps, the Pareto front and its ties, bills of materials. Each builder takes plain values from a JSON
document and returns a plotly figure; labels are HTML-escaped (plotly renders a subset of HTML in text)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from fabricsim.report.html.page import fmt

HOT, GREY, BLUE, ORANGE, GREEN = "#c0392b", "#9aa5b1", "#1f5fa8", "#e67e22", "#2e7d32"
PALETTE = ["#1f5fa8", "#e67e22", "#2e7d32", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#d4ac0d"]


def label(text: object) -> str:
    """Text for a chart label or hover: escaped so plotly shows it literally."""
    return html.escape(str(text), quote=False)


def _go() -> Any:
    import plotly.graph_objects as go

    return go


def band_chart(rows: Sequence[tuple[str, str, float, Mapping[str, Any]]]) -> Any:
    """Each banded figure as its band relative to the prediction (x: percent), hover with absolute values.
    ``rows``: (label, key, value, band)."""
    go = _go()
    names, lows, highs, est, hover = [], [], [], [], []
    for name, key, value, band in rows:
        low, high = float(band.get("low", value)), float(band.get("high", value))
        estimate = band.get("estimate")
        names.append(label(name))
        lows.append(100 * (low / value - 1))
        highs.append(100 * (high / value - 1))
        est.append(None if estimate is None else 100 * (float(estimate) / value - 1))
        level = band.get("level")
        hover.append("<br>".join(label(t) for t in (
            f"{name}: {fmt(key, value)}",
            f"{fmt('level', level) if level is not None else ''} band {fmt(key, low)} – {fmt(key, high)}",
            f"{band.get('cases', '?')} published cases: {band.get('comparable', '')}")))
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[0.0] * len(names), y=names, mode="markers", name="prediction", marker={"color": BLUE, "size": 11},
        error_x={"type": "data", "symmetric": False, "array": highs, "arrayminus": [-v for v in lows],
                 "color": BLUE, "thickness": 2, "width": 8},
        hovertext=hover, hoverinfo="text"))
    if any(e is not None for e in est):
        fig.add_trace(go.Scatter(x=est, y=names, mode="markers", name="bias-corrected estimate",
                                 marker={"color": ORANGE, "symbol": "diamond", "size": 9}, hoverinfo="x+y"))
    fig.update_layout(title="Error bands relative to the prediction", xaxis_title="% of the predicted value",
                      legend={"orientation": "h", "y": -0.25})
    fig.update_yaxes(autorange="reversed")
    fig.add_vline(x=0, line_color=GREY, line_dash="dot")
    return fig


def layer_chart(layers: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str,
                bottleneck: str | None = None, unit_key: str = "time_s",
                colors: Mapping[str, str] | None = None) -> Any:
    """Seconds by layer as stacked horizontal bars (one trace per series, e.g. exposed and overlapped)."""
    go = _go()
    fig = go.Figure()
    names = [label(f"{k} ◀ bottleneck" if k == bottleneck else k) for k in layers]
    for i, (name, values) in enumerate(series.items()):
        colour = (colors or {}).get(name, PALETTE[i % len(PALETTE)])
        fig.add_trace(go.Bar(y=names, x=list(values), name=label(name), orientation="h", marker_color=colour,
                             hovertext=[label(f"{k} {name}: {fmt(unit_key, v)}") for k, v in zip(layers, values,
                                                                                                  strict=True)],
                             hoverinfo="text"))
    fig.update_layout(barmode="stack", title=label(title), xaxis_title="seconds",
                      legend={"orientation": "h", "y": -0.2, "traceorder": "normal"})
    fig.update_yaxes(autorange="reversed")
    return fig


def memory_chart(parts: Mapping[str, float], capacity: float | None, *, title: str) -> Any:
    """Memory per GPU as one stacked bar of its parts, the capacity as a line."""
    go = _go()
    fig = go.Figure()
    for i, (name, value) in enumerate(parts.items()):
        fig.add_trace(go.Bar(y=["per GPU"], x=[value / 2**30], name=label(name), orientation="h",
                             marker_color=PALETTE[i % len(PALETTE)], hoverinfo="text",
                             hovertext=[label(f"{name}: {fmt('_bytes', value)}")]))
    if capacity:
        fig.add_vline(x=capacity / 2**30, line_color=HOT, line_dash="dash",
                      annotation_text=label(f"capacity {fmt('_bytes', capacity)}"), annotation_position="top")
    fig.update_layout(barmode="stack", title=label(title), xaxis_title="GiB",
                      legend={"orientation": "h", "y": -0.5, "traceorder": "normal"})
    return fig


def whatif_chart(layers: Sequence[Mapping[str, Any]], base_step: float | None, factor: object) -> Any:
    """Step time with each layer made ``factor`` times faster: bars with the band as error bars, the base as a
    line, the speed-up as text."""
    go = _go()
    names = [label(str(r.get("layer", "?"))) for r in layers]
    steps = [float(r.get("step_time_s") or 0.0) for r in layers]
    bands = [r.get("step_time_s_band") or {} for r in layers]
    plus = [float(b.get("high", s)) - s for b, s in zip(bands, steps, strict=True)]
    minus = [s - float(b.get("low", s)) for b, s in zip(bands, steps, strict=True)]
    speed = [float(r.get("speedup") or 1.0) for r in layers]
    best = max(range(len(speed)), key=lambda i: speed[i]) if speed else -1
    fig = go.Figure(go.Bar(
        x=names, y=steps, marker_color=[HOT if i == best else BLUE for i in range(len(steps))],
        text=[f"{s:.3g}x" for s in speed], textposition="outside",
        error_y={"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "color": GREY},
        hovertext=[label(f"{n} {factor}x faster: step {fmt('step_time_s', s)} ({sp:.3g}x)")
                   for n, s, sp in zip(names, steps, speed, strict=True)], hoverinfo="text", name="step"))
    if base_step:
        fig.add_hline(y=base_step, line_color=GREY, line_dash="dash",
                      annotation_text=label(f"base {fmt('step_time_s', base_step)}"))
    fig.update_layout(title=label(f"Step time with one layer {factor}x faster"), yaxis_title="seconds per step",
                      showlegend=False)
    return fig


def swaps_chart(swaps: Sequence[Mapping[str, Any]]) -> Any:
    """Each cluster swap: capital cost added (x) against wall-clock speed-up (y), the speed-up band as error bars."""
    go = _go()
    xs = [float(s.get("cost_delta_usd") or 0.0) / 1e6 for s in swaps]
    ys = [float(s.get("speedup") or 1.0) for s in swaps]
    up, down = [], []
    for s, y in zip(swaps, ys, strict=True):
        band = s.get("speedup_band") or {}
        up.append(float(band.get("high", y)) - y)
        down.append(y - float(band.get("low", y)))
    colours = [GREEN if s.get("worth_it") else (ORANGE if s.get("kind") == "downgrade" else BLUE) for s in swaps]
    fig = go.Figure(go.Scatter(
        x=xs, y=ys, mode="markers+text", text=[label(s.get("swap", "?")) for s in swaps], textposition="top center",
        marker={"size": 12, "color": colours},
        error_y={"type": "data", "symmetric": False, "array": up, "arrayminus": down, "color": GREY},
        hovertext=[label(f"{s.get('swap')}: {y:.3g}x, capex {fmt('cost_delta_usd', s.get('cost_delta_usd'))}")
                   for s, y in zip(swaps, ys, strict=True)], hoverinfo="text"))
    fig.add_hline(y=1.0, line_color=GREY, line_dash="dot")
    fig.update_layout(title="Cluster swaps: speed-up against capital cost added", xaxis_title="capital cost added ($M)",
                      yaxis_title="wall-clock speed-up (x)", showlegend=False)
    return fig


def _describe(row: Mapping[str, Any]) -> str:
    plan = row.get("plan") or {}
    plan_text = " ".join(f"{k}={plan[k]}" for k in ("tp", "pp", "dp", "ep", "weights", "precision") if k in plan)
    where = f"{row.get('gpus', '?')} x {row.get('system', '?')} / {row.get('fabric', '?')}"
    return f"{label(where)}<br>{label(plan_text)}"


def pareto_chart(results: Sequence[Mapping[str, Any]], pareto: Sequence[Mapping[str, Any]],
                 recommended: Mapping[str, Any] | None, *, x_key: str, y_key: str, x_scale: float = 1.0,
                 x_title: str, y_title: str, title: str = "Clusters searched: time against cost") -> Any:
    """Time against cost of the ranked clusters: ties marked, the Pareto front as a line, the recommended one as a
    star; bands as error bars where the rows carry them."""
    go = _go()

    def points(rows: Sequence[Mapping[str, Any]]) -> tuple[list[float], list[float], list[str]]:
        keep = [r for r in rows if isinstance(r.get(x_key), int | float) and isinstance(r.get(y_key), int | float)]
        return ([float(r[x_key]) / x_scale for r in keep], [float(r[y_key]) for r in keep],
                [_describe(r) + f"<br>{label(fmt(x_key, r[x_key]))}, {label(fmt(y_key, r[y_key]))}"
                 for r in keep])

    def errors(rows: Sequence[Mapping[str, Any]], key: str, scale: float) -> dict[str, Any] | None:
        keep = [r for r in rows if isinstance(r.get(x_key), int | float) and isinstance(r.get(y_key), int | float)]
        bands: list[Mapping[str, Any]] = []
        for r in keep:
            band = r.get(f"{key}_band")
            if not (isinstance(band, Mapping) and isinstance(band.get("low"), int | float)
                    and isinstance(band.get("high"), int | float)):
                return None
            bands.append(band)
        if not keep:
            return None
        values = [float(r[key]) for r in keep]
        return {"type": "data", "symmetric": False, "color": "rgba(120,130,140,0.45)", "thickness": 1,
                "array": [(float(b["high"]) - v) / scale for b, v in zip(bands, values, strict=True)],
                "arrayminus": [(v - float(b["low"])) / scale for b, v in zip(bands, values, strict=True)]}

    fig = go.Figure()
    others = [r for r in results if not r.get("tie")]
    ties = [r for r in results if r.get("tie")]
    for rows, name, colour in ((others, "ranked", GREY), (ties, "tie (within the model's error)", ORANGE)):
        x, y, text = points(rows)
        if x:
            fig.add_trace(go.Scatter(x=x, y=y, mode="markers", name=name, marker={"size": 10, "color": colour},
                                     error_x=errors(rows, x_key, x_scale), error_y=errors(rows, y_key, 1.0),
                                     hovertext=text, hoverinfo="text"))
    front = sorted(pareto, key=lambda r: float(r.get(x_key) or 0.0))
    x, y, text = points(front)
    if x:
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name="Pareto front", hovertext=text,
                                 hoverinfo="text", line={"color": BLUE, "width": 2},
                                 marker={"size": 8, "color": BLUE}))
    if recommended:
        x, y, text = points([recommended])
        if x:
            fig.add_trace(go.Scatter(x=x, y=y, mode="markers", name="recommended", hovertext=text, hoverinfo="text",
                                     marker={"size": 20, "color": HOT, "symbol": "star",
                                             "line": {"color": "#fff", "width": 1}}))
    fig.update_layout(title=label(title), xaxis_title=label(x_title),
                      yaxis_title=label(y_title), legend={"orientation": "h", "y": -0.22})
    return fig


def bom_chart(items: Sequence[Mapping[str, Any]], *, title: str) -> Any:
    """A bill of materials: cost (count x unit price) per line item, coloured by category; power in the hover."""
    go = _go()
    names, costs, colours, hover = [], [], [], []
    categories = list(dict.fromkeys(str(i.get("category", "?")) for i in items))
    for item in items:
        count = float(item.get("count") or 0)
        price = item.get("unit_price_usd")
        power = item.get("unit_power_w")
        name = f"{item.get('item', '?')} ({item.get('role', '')})"
        names.append(label(name))
        costs.append(count * float(price) / 1e6 if isinstance(price, int | float) else 0.0)
        colours.append(PALETTE[categories.index(str(item.get("category", "?"))) % len(PALETTE)])
        hover.append(label(f"{name}: {count:g} x {fmt('unit_price_usd', price)}"
                           + (f", {fmt('power_w', count * float(power))}" if isinstance(power, int | float) else "")
                           + f" [{item.get('category', '?')}]"))
    fig = go.Figure(go.Bar(y=names, x=costs, orientation="h", marker_color=colours, hovertext=hover,
                           hoverinfo="text"))
    fig.update_layout(title=label(title), xaxis_title="capital cost ($M)", showlegend=False)
    fig.update_yaxes(autorange="reversed")
    return fig


def bars_chart(values: Mapping[str, float], *, title: str, axis_title: str, unit_key: str = "") -> Any:
    """Plain horizontal bars of named values (the largest in red)."""
    go = _go()
    names = list(values)
    nums = [float(values[n]) for n in names]
    top = max(range(len(nums)), key=lambda i: nums[i]) if nums else -1
    fig = go.Figure(go.Bar(y=[label(n) for n in names], x=nums, orientation="h",
                           marker_color=[HOT if i == top else BLUE for i in range(len(nums))],
                           hovertext=[label(f"{n}: {fmt(unit_key, v) if unit_key else f'{v:.4g}'}")
                                      for n, v in zip(names, nums, strict=True)], hoverinfo="text"))
    fig.update_layout(title=label(title), xaxis_title=label(axis_title), showlegend=False)
    fig.update_yaxes(autorange="reversed")
    return fig


def percentile_chart(groups: Mapping[str, Mapping[str, tuple[float, Mapping[str, Any] | None]]]) -> Any:
    """Serving latencies by percentile: one panel per metric (TTFT, TPOT, end to end), bars p50/p90/p99 with bands."""
    from plotly.subplots import make_subplots

    go = _go()
    fig = make_subplots(rows=1, cols=len(groups), subplot_titles=[label(g) for g in groups])
    for col, (metric, points) in enumerate(groups.items(), start=1):
        names = list(points)
        values = [points[n][0] for n in names]
        bands = [points[n][1] or {} for n in names]
        fig.add_trace(go.Bar(
            x=names, y=[v * 1e3 for v in values], marker_color=BLUE, showlegend=False,
            error_y={"type": "data", "symmetric": False, "color": GREY,
                     "array": [(float(b.get("high", v)) - v) * 1e3 for b, v in zip(bands, values, strict=True)],
                     "arrayminus": [(v - float(b.get("low", v))) * 1e3 for b, v in zip(bands, values, strict=True)]},
            hovertext=[label(f"{metric} {n}: {fmt('s', v)}") for n, v in zip(names, values, strict=True)],
            hoverinfo="text"), row=1, col=col)
        fig.update_yaxes(title_text="ms" if col == 1 else None, row=1, col=col)
    fig.update_layout(title="Served latency by percentile (simulated arrivals)")
    return fig


def busbw_chart(rows: Sequence[Mapping[str, Any]], *, title: str) -> Any:
    """Bus bandwidth against message size (log x), each point with its band and its algorithm and bound."""
    go = _go()
    sizes = [float(r["size_bytes"]) for r in rows]
    busbw = [float(r["busbw_bytes_per_s"]) / 1e9 for r in rows]
    def edge(row: Mapping[str, Any], side: str, value: float) -> float:
        """One side of the row's busbw band in GB/s (the value itself without a band)."""
        band = row.get("busbw_bytes_per_s_band")
        bound = band.get(side) if isinstance(band, Mapping) else None
        return float(bound) / 1e9 if isinstance(bound, int | float) else value

    high = [edge(r, "high", v) - v for r, v in zip(rows, busbw, strict=True)]
    low = [v - edge(r, "low", v) for r, v in zip(rows, busbw, strict=True)]
    hover = [label(f"{fmt('size_bytes', s)}: busbw {v:.1f} GB/s, {fmt('time_s', float(r.get('time_s', 0.0)))} "
                   f"({r.get('algorithm', '?')} {r.get('protocol', '')}, {r.get('bound', '?')}-bound)")
             for s, v, r in zip(sizes, busbw, rows, strict=True)]
    fig = go.Figure(go.Scatter(x=sizes, y=busbw, mode="lines+markers", name="busbw", marker_color=BLUE,
                               error_y={"type": "data", "symmetric": False, "array": high, "arrayminus": low,
                                        "color": GREY},
                               hovertext=hover, hoverinfo="text"))
    fig.update_layout(title=label(title), xaxis_title="message size (bytes, nccl-tests' size column)",
                      yaxis_title="bus bandwidth (GB/s)", showlegend=False)
    fig.update_xaxes(type="log")
    return fig
