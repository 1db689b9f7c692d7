"""Refuse measurements faster than the hardware allows: a collective whose bus bandwidth exceeds what one GPU's
intra-node links carry per direction is not a run of that system (another GPU, a mislabelled size or group).

The bound is physical, not the model's: every collective moves at least (n-1)/n of its nccl-tests size through
each GPU's links, so busbw <= the per-GPU link rate; an all_reduce (or reduce) reduced inside the switch (NVLS,
SHARP) sends and receives each byte once, so its busbw <= 2(n-1)/n times the rate. Network links are never
faster per GPU than the NVLink or PCIe under them, so the intra-node rate bounds multi-node runs too. The same
check guards nccl-tests logs, fabricsim bench results and profiler traces, in calibrate and compare."""

from __future__ import annotations

from collections.abc import Sequence

from fabricsim import units
from fabricsim.calibration.fit import Measurement
from fabricsim.catalog import Catalog, System
from fabricsim.collectives import busbw_factor
from fabricsim.errors import SpecError

PLAUSIBLE_MARGIN = 1.1
"""a measured bus bandwidth up to this factor above the bound is let through (nominal link rates, timers)"""
IN_NETWORK_REDUCTION = ("all_reduce", "reduce")


def gpu_link_bytes_per_s(catalog: Catalog, system: System) -> float:
    """Bytes/s one GPU's intra-node links carry per direction: all its NVLinks behind an NVSwitch, else its PCIe."""
    gpu = catalog.gpu(system.gpu)
    if system.intra == "nvswitch" and gpu.nvlink:
        return gpu.nvlink_links * catalog.link(gpu.nvlink).bytes_per_s
    return catalog.link(system.pcie).bytes_per_s


def busbw_bound(op: str, nranks: int, link_bytes_per_s: float) -> float:
    """The largest bus bandwidth (bytes/s) a collective can reach on links of that per-GPU rate."""
    if op in IN_NETWORK_REDUCTION:
        return link_bytes_per_s * busbw_factor("all_reduce", nranks)
    return link_bytes_per_s


def check_bandwidths(measurements: Sequence[Measurement], system: System, catalog: Catalog, *, source: str) -> None:
    """SpecError on the first measurement whose bus bandwidth exceeds ``busbw_bound`` by more than the margin."""
    rate = gpu_link_bytes_per_s(catalog, system)
    for m in measurements:
        if m.nranks < 2 or m.size_bytes <= 0 or m.time_s <= 0:
            continue
        bound = busbw_bound(m.op, m.nranks, rate)
        if m.busbw_GBps * 1e9 > bound * PLAUSIBLE_MARGIN:
            gpu = catalog.gpu(system.gpu)
            raise SpecError(f"{m.op} of {units.format_size(m.size_bytes)} on {m.nranks} ranks reaches a bus bandwidth "
                            f"of {m.busbw_GBps:.1f} GB/s, above the {bound / 1e9:.0f} GB/s that a {gpu.name}'s links "
                            f"carry: it cannot belong to {system.id}", source=source)
