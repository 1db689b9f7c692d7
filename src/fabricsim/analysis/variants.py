"""Catalog variants with one layer's rates multiplied: what a faster compute, HBM, NVLink, PCIe or network gives.

Only rates change (GPU BF16/FP8 peaks, HBM bandwidth, the link technologies' per-direction data rates, NIC and
fabric switch port rates); every latency term, efficiency and protocol cap stays as the catalog has it, so the
variant answers "what if this layer moved bytes (or FLOPs) ``factor`` times faster".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fabricsim.catalog import Catalog
from fabricsim.errors import SpecError

VARIED_LAYERS = ("compute", "hbm", "nvlink", "pcie", "infiniband", "ethernet")


def _scaled(entries: dict[str, Any], factor: float, fields: tuple[str, ...],
            keep: Callable[[Any], bool] | None = None) -> dict[str, Any]:
    """Entries with ``fields`` multiplied by ``factor`` where ``keep(entry)`` holds (all entries when None)."""
    out: dict[str, Any] = {}
    for key, entry in entries.items():
        if keep is None or keep(entry):
            update = {f: getattr(entry, f) * factor for f in fields if getattr(entry, f) is not None}
            entry = entry.model_copy(update=update)
        out[key] = entry
    return out


def faster_catalog(catalog: Catalog, layer: str, factor: float) -> Catalog:
    """A copy of ``catalog`` in which ``layer`` runs ``factor`` times faster (rates only, latencies unchanged)."""
    if layer not in VARIED_LAYERS:
        raise SpecError(f"unknown layer {layer!r}; allowed: {', '.join(VARIED_LAYERS)}", field="layer")
    if not factor > 0:
        raise SpecError(f"must be positive, got {factor}", field="--factor")
    if layer == "compute":
        return catalog.model_copy(update={"gpus": _scaled(catalog.gpus, factor,
                                                           ("bf16_flops_per_s", "fp8_flops_per_s"))})
    if layer == "hbm":
        return catalog.model_copy(update={"gpus": _scaled(catalog.gpus, factor, ("hbm_bytes_per_s",))})
    links = _scaled(catalog.links, factor, ("bytes_per_s",), lambda link: link.kind == layer)
    update: dict[str, Any] = {"links": links}
    if layer in ("infiniband", "ethernet"):
        update["nics"] = _scaled(catalog.nics, factor, ("port_bytes_per_s",),
                                 lambda nic: catalog.links[nic.link].kind == layer)
        update["switches"] = _scaled(catalog.switches, factor, ("port_bytes_per_s",),
                                     lambda switch: switch.kind == layer)
    return catalog.model_copy(update=update)
