"""A readable picture of a small cluster: nodes along the bottom, fabric switches in tiers above, cables as lines
(coloured by rail on rail-optimized fabrics, thicker where a switch pair has more cables). Tori are drawn as their
switch grid (wrap-around cables omitted), meshes as a circle of nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.topology.kinds import NIC
from fabricsim.topology.routes import IntArray
from fabricsim.topology.topology import Topology

if TYPE_CHECKING:
    import numpy.typing as npt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from fabricsim.topology.storage import StorageBill

MAX_NODES = 256
MAX_SWITCHES = 600
MIN_WIDTH_IN = 7.0  # room for the title and the tier labels on a cluster of one or two nodes
DPI = 110
MAX_WIDTH_IN = 14.0  # with dpi 110: at most ~1540 px wide whatever the node count


def _positions(topo: Topology) -> tuple[dict[int, tuple[float, float]], list[tuple[float, float]]]:
    """(x, y) of every NIC and fabric switch endpoint, and of every node box's centre."""
    n, node = topo.num_nodes, topo.node
    pos: dict[int, tuple[float, float]] = {}
    if topo.fabric.kind == "mesh":
        angle = 2 * np.pi * np.arange(n) / max(n, 1)
        centres = [(float(6 * np.cos(a)), float(6 * np.sin(a))) for a in angle]
    else:
        centres = [(float(i), 0.0) for i in range(n)]
    nic_ep = np.flatnonzero(topo.endpoint_kind == NIC)
    for ep in nic_ep:
        i = int(topo.endpoint_node[ep])
        j = int(ep) - i * node.num_endpoints - node.gpus
        cx, cy = centres[i]
        dx = 0.0 if topo.fabric.kind == "mesh" else (j + 0.5) / node.nics * 0.8 - 0.4
        pos[int(ep)] = (cx + dx, cy + (0.0 if topo.fabric.kind == "mesh" else 0.35))
    switches = np.flatnonzero(topo.endpoint_tier >= 0)
    width = max(n - 1, 1)
    if topo.fabric.kind == "torus":
        dims = _torus_dims(topo)
        for k, ep in enumerate(switches):
            c0, c1, c2 = k % dims[0], (k // dims[0]) % dims[1], k // (dims[0] * dims[1])
            gx = c0 + c2 * (dims[0] + 1)
            span = max(dims[0] * dims[2] + dims[2] - 2, 1)
            pos[int(ep)] = (gx * width / span, 2.0 + 1.2 * c1)
    else:
        for tier in range(len(topo.fabric.tier_names)):
            eps = switches[topo.endpoint_tier[switches] == tier]
            for k, ep in enumerate(eps):
                x = (k + 0.5) * (width + 1) / len(eps) - 0.5 if len(eps) > 1 else width / 2
                pos[int(ep)] = (x, 2.0 + 2.0 * tier)
    return pos, centres


def _wrap_around(topo: Topology, src: IntArray, dst: IntArray) -> npt.NDArray[np.bool_]:
    """Which cables of a torus close a ring (switch coordinates more than one step apart)."""
    if topo.fabric.kind != "torus":
        return np.zeros(len(src), dtype=bool)
    dims = np.array(_torus_dims(topo))
    strides = np.array([1, dims[0], dims[0] * dims[1]])
    first = topo.num_nodes * topo.node.num_endpoints
    both = (topo.endpoint_tier[src] >= 0) & (topo.endpoint_tier[dst] >= 0)
    cs = ((np.maximum(src - first, 0))[:, None] // strides) % dims
    cd = ((np.maximum(dst - first, 0))[:, None] // strides) % dims
    wrap: npt.NDArray[np.bool_] = both & (np.abs(cs - cd).sum(axis=1) > 1)
    return wrap


def _torus_dims(topo: Topology) -> tuple[int, int, int]:
    from fabricsim.topology.torus import near_cube

    return topo.spec.torus_dims or near_cube(topo.fabric.num_switches)


def _draw_storage(ax: Axes, topo: Topology, pos: dict[int, tuple[float, float]], centres: list[tuple[float, float]],
                  store: StorageBill) -> None:
    """The storage servers as one box right of the nodes: wired through a storage fabric of their own below the
    nodes (separate), or to the compute fabric's first tier (converged)."""
    from matplotlib.patches import Rectangle

    xs = [c[0] for c in centres]
    right = max(xs) + 3.0
    box_y = -2.6 if store.network == "separate" else 0.0
    ax.add_patch(Rectangle((right - 1.3, box_y - 0.35), 2.6, 0.7, facecolor="#f5e6c8", edgecolor="0.2", zorder=2))
    ax.text(right, box_y, f"{store.servers} x {store.server}", ha="center", va="center", fontsize=8, zorder=3)
    style: dict[str, Any] = {"color": "#b07d2b", "lw": 0.8, "alpha": 0.7, "zorder": 1, "ls": "--"}
    if store.network == "separate":
        hub = (float(np.mean(xs)), -1.4)
        ax.scatter([hub[0]], [hub[1]], s=60, marker="s", color="#b07d2b", zorder=3,
                   label=f"storage fabric ({sum(store.switches.values())} x {store.switch})")
        for cx, cy in centres:
            ax.plot([cx, hub[0]], [cy - 0.3, hub[1]], **style)
        ax.plot([hub[0], right - 1.3], [hub[1], box_y], **style)
        ax.text(-1.0, hub[1], "storage", ha="right", va="center", fontsize=10)
        return
    leaves = np.flatnonzero(topo.endpoint_tier == 0)
    targets = [pos[int(e)] for e in leaves[:8]] or [(float(np.mean(xs)), 0.0)]
    for x, y in targets:
        ax.plot([right, x], [box_y + 0.35, y], **style)
    ax.plot([], [], **style, label=f"storage on the compute fabric ({store.compute_ports} ports)")


def sketch(topo: Topology, path: str | Path) -> None:
    """Draw the cluster to an image file (format from the suffix: .png, .svg, .pdf)."""
    sketch_figure(topo).savefig(str(path), dpi=DPI)


def sketch_figure(topo: Topology) -> Figure:
    """The cluster as a matplotlib figure (title, tiers, nodes and cables; legend below)."""
    from matplotlib.figure import Figure  # matplotlib only when a picture is drawn
    from matplotlib.patches import Rectangle

    if topo.num_nodes > MAX_NODES or topo.fabric.num_switches > MAX_SWITCHES:
        raise SpecError(f"a sketch draws at most {MAX_NODES} nodes and {MAX_SWITCHES} switches "
                        f"(this cluster: {topo.num_nodes} nodes, {topo.fabric.num_switches} switches);"
                        " plot a smaller cluster", field="plot")
    pos, centres = _positions(topo)
    fig = Figure(figsize=(min(max(MIN_WIDTH_IN, 4 + 0.18 * topo.num_nodes), MAX_WIDTH_IN),
                          5 + 0.8 * len(topo.fabric.tier_names)), layout="constrained")
    ax = fig.add_subplot()
    first = topo.num_nodes * topo.node.num_links
    src, dst = topo.link_src[first::2], topo.link_dst[first::2]
    cap = topo.link_capacity[first::2]
    rails = np.maximum(topo.endpoint_rail[src], topo.endpoint_rail[dst])
    colours = [f"C{r % 10}" for r in range(max(topo.fabric.rails, 1))]
    top = cap.max(initial=1.0)
    wrap = _wrap_around(topo, src, dst)
    for a, b, c, r, skip in zip(src, dst, cap, rails, wrap, strict=True):
        if skip:
            continue
        (x0, y0), (x1, y1) = pos[int(a)], pos[int(b)]
        colour = colours[r] if r >= 0 else "0.45"
        ax.plot([x0, x1], [y0, y1], color=colour, lw=0.4 + 1.6 * c / top, alpha=0.6, zorder=1)
    for i, (cx, cy) in enumerate(centres):
        ax.add_patch(Rectangle((cx - 0.45, cy - 0.3), 0.9, 0.6, facecolor="#dde8f5", edgecolor="0.2", zorder=2))
        if topo.num_nodes <= 32:
            ax.text(cx, cy - 0.05, f"n{i}", ha="center", va="center", fontsize=9, zorder=3)
    for tier, name in enumerate(topo.fabric.tier_names):
        eps = np.flatnonzero(topo.endpoint_tier == tier)
        if not len(eps):
            continue
        xs = [pos[int(e)][0] for e in eps]
        ys = [pos[int(e)][1] for e in eps]
        ax.scatter(xs, ys, s=40 if len(eps) > 64 else 60, marker="s", color="0.15", zorder=3,
                   label="switch" if tier == 0 else None)
        if topo.fabric.kind != "torus":
            ax.text(-1.0, ys[0], f"{name} ({len(eps)})", ha="right", va="center", fontsize=10)
    if topo.num_nodes > 32:
        ax.text(-1.0, 0.0, f"{topo.num_nodes} nodes", ha="right", va="center", fontsize=10)
    if topo.fabric.rails > 1:
        ax.plot([], [], color=colours[0], label=f"cables, coloured by rail ({topo.fabric.rails} rails)")
    elif topo.fabric.rails == 1:
        ax.plot([], [], color=colours[0], label="cables")
    bom = topo.bom()
    if bom.storage is not None:
        _draw_storage(ax, topo, pos, centres, bom.storage)
    # A figure title (not the axes'): constrained layout keeps it inside the image whatever the cluster's width.
    fig.suptitle(f"{topo.num_nodes} x {topo.system.id} ({topo.num_gpus} GPUs)\n{bom.fabric}\n"
                 f"switches {bom.switches_total}, cables {bom.cables_total}, "
                 f"bisection {bom.bisection_bytes_per_s / 1e12:.2f} TB/s", fontsize=12)
    if topo.fabric.num_switches or topo.fabric.rails:
        fig.legend(loc="outside lower center", ncols=2, fontsize=10, frameon=False)
    if topo.fabric.kind == "torus":
        ax.text(0.0, -0.9, "wrap-around torus cables not drawn", fontsize=9, color="0.4")
    ax.set_axis_off()
    ax.autoscale()
    return fig
