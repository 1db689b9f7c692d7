"""What a cluster's figures rest on: the roadmap parts it uses (announced, not shipping) and the figures of its
parts that are estimates rather than published (each entry's ``estimated`` fields), so a bill of materials or a
decision can say which of its numbers are announced and which estimated."""

from __future__ import annotations

from dataclasses import dataclass

from fabricsim.catalog.catalog import Catalog
from fabricsim.catalog.models import Entry, System


@dataclass(frozen=True)
class FigureBasis:
    """The roadmap entries a cluster uses (``kind:id``) and its estimated figures (``id.field``)."""

    roadmap: tuple[str, ...]
    estimated: tuple[str, ...]

    def note(self) -> str | None:
        """One line for a bill of materials or a table; None where every part ships and no figure is estimated."""
        if not self.roadmap and not self.estimated:
            return None
        parts = []
        if self.roadmap:
            parts.append("roadmap parts (announced figures, press restatements of vendor claims): "
                         + ", ".join(self.roadmap))
        if self.estimated:
            parts.append("estimated figures (method in each entry's notes): " + ", ".join(self.estimated))
        return "; ".join(parts)


def cluster_entries(catalog: Catalog, system: System, fabric_switch: str | None = None,
                    nic: str | None = None) -> list[tuple[str, Entry]]:
    """The catalog entries a cluster of ``system`` on ``fabric_switch`` with ``nic`` is built from, by kind:
    the system, its GPU and scale-up link and switch, its NIC and the fabric's switch and link."""
    gpu = catalog.gpu(system.gpu)
    out: list[tuple[str, Entry]] = [("system", system), ("gpu", gpu)]
    if gpu.nvlink:
        out.append(("link", catalog.link(gpu.nvlink)))
    if system.nvswitch:
        out.append(("switch", catalog.switch(system.nvswitch)))
    out.append(("nic", catalog.nic(nic or system.nic)))
    if fabric_switch is not None:
        switch = catalog.switch(fabric_switch)
        out += [("switch", switch), ("link", catalog.link(switch.link))]
    else:
        out.append(("link", catalog.link(catalog.nic(nic or system.nic).link)))
    seen: set[str] = set()
    unique = []
    for kind, entry in out:
        if f"{kind}:{entry.id}" not in seen:
            seen.add(f"{kind}:{entry.id}")
            unique.append((kind, entry))
    return unique


def figure_basis(catalog: Catalog, system: System, fabric_switch: str | None = None,
                 nic: str | None = None) -> FigureBasis:
    """The roadmap parts and estimated figures of a cluster (see `cluster_entries`)."""
    entries = cluster_entries(catalog, system, fabric_switch, nic)
    roadmap = tuple(f"{kind}:{e.id}" for kind, e in entries if getattr(e, "status", "shipping") == "roadmap")
    estimated = tuple(f"{e.id}.{name}" for _, e in entries for name in e.estimated)
    return FigureBasis(roadmap, estimated)


def roadmap_warning(system: System) -> str | None:
    """The warning a prediction on a roadmap system carries (None on a shipping one): its figures are announced or
    estimated, and its error band is the model's error on shipping hardware only."""
    if system.status != "roadmap":
        return None
    return (f"{system.id} is a roadmap system: its figures are announced or estimated (fabricsim catalog --roadmap), "
            "and the error band covers the model's error on shipping hardware only")
