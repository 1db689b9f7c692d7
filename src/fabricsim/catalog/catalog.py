"""The Catalog: every hardware entry by category and id, with lookups that suggest close matches."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from fabricsim.catalog.cooling import CoolingClass
from fabricsim.catalog.fabric_control import CongestionControl
from fabricsim.catalog.models import (
    GPU,
    NIC,
    SCALE_UP_LINK_KINDS,
    SCALE_UP_SWITCH_KINDS,
    Cable,
    LinkTech,
    Switch,
    System,
    Tuning,
)
from fabricsim.catalog.reliability import FailureRate, StorageServer, StorageTier
from fabricsim.errors import SpecError, unknown_name_error


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True)

    gpus: dict[str, GPU]
    links: dict[str, LinkTech]
    switches: dict[str, Switch]
    nics: dict[str, NIC]
    cables: dict[str, Cable]
    systems: dict[str, System]
    tunings: dict[str, Tuning]
    failures: dict[str, FailureRate]
    storage: dict[str, StorageTier]
    storage_servers: dict[str, StorageServer]
    congestion_controls: dict[str, CongestionControl]
    cooling: dict[str, CoolingClass] = {}

    def _get(self, category: str, kind: str, entry_id: str, field: str | None = None) -> Any:
        table: dict[str, Any] = getattr(self, category)
        key = entry_id.strip().lower()
        if key in table:
            return table[key]
        raise unknown_name_error(kind, entry_id, table, field=field)

    def priced_system_ids(self) -> tuple[str, ...]:
        """Systems with a price that ship today (a search's default candidates; a roadmap system when named)."""
        return tuple(sid for sid, s in self.systems.items() if s.price_usd is not None and s.status == "shipping")

    def gpu(self, gpu_id: str) -> GPU:
        result: GPU = self._get("gpus", "gpu", gpu_id)
        return result

    def link(self, link_id: str) -> LinkTech:
        result: LinkTech = self._get("links", "link", link_id)
        return result

    def switch(self, switch_id: str) -> Switch:
        result: Switch = self._get("switches", "switch", switch_id)
        return result

    def nic(self, nic_id: str) -> NIC:
        result: NIC = self._get("nics", "nic", nic_id)
        return result

    def cable(self, cable_id: str) -> Cable:
        result: Cable = self._get("cables", "cable", cable_id)
        return result

    def system(self, system_id: str, *, field: str = "system") -> System:
        """A system by id; ``id@D`` is that rack-scale system's racks joined into NVLink domains of D GPUs
        (`joined_racks`), ``id/N`` that system with N GPUs of each node used (`partly_used`). The one resolver of
        system names: an error names ``field`` (the option the user typed, e.g. ``--system``)."""
        from fabricsim.catalog.nvlink_domain import joined_racks, split_joined_id
        from fabricsim.catalog.partial import partly_used, split_partial_id

        base, used = split_partial_id(system_id.strip().lower())
        base, domain = split_joined_id(base)
        result: System = self._get("systems", "system", base, field)
        if domain is not None:
            gpu = self.gpu(result.gpu)
            result = joined_racks(result, domain, gpu, self.switch(result.nvswitch) if result.nvswitch else None,
                                  self.link(gpu.nvlink) if gpu.nvlink else None, field=field)
        return result if used is None else partly_used(result, used, field=field)

    def why_not_joinable(self, system: System) -> str | None:
        """Why ``system``'s racks cannot be joined into one larger NVLink domain (``id@D``); None when they can."""
        from fabricsim.catalog.nvlink_domain import why_not_joinable

        return why_not_joinable(system, self.gpu(system.gpu), self.switch(system.nvswitch) if system.nvswitch
                                else None)

    def storage_tier(self, storage_id: str) -> StorageTier:
        result: StorageTier = self._get("storage", "storage", storage_id)
        return result

    def storage_server(self, server_id: str) -> StorageServer:
        result: StorageServer = self._get("storage_servers", "storage server", server_id)
        return result

    def congestion_control(self, control_id: str, *, field: str = "--cc") -> CongestionControl:
        """A fabric behaviour by id (`ideal`, `ib`, `roce-dcqcn`, ...): the one resolver of ``--cc`` names."""
        result: CongestionControl = self._get("congestion_controls", "congestion control", control_id, field)
        return result

    def cooling_class(self, cooling_id: str, *, field: str = "--cooling") -> CoolingClass:
        """A cooling class by id (`air`, `liquid`): the one resolver of ``--cooling`` names."""
        result: CoolingClass = self._get("cooling", "cooling class", cooling_id, field)
        return result

    def tuning(self, tuning_id: str = "default") -> Tuning:
        result: Tuning = self._get("tunings", "tuning", tuning_id)
        return result

    def nvlink_bytes_per_s(self, gpu: GPU | str) -> float | None:
        """Per-GPU NVLink bandwidth, both directions summed (1.8e12 on B200, 9e11 on H100); None without NVLink."""
        entry = self.gpu(gpu) if isinstance(gpu, str) else gpu
        return entry.nvlink_bytes_per_s(self.link(entry.nvlink) if entry.nvlink else None)

    def switch_running(self, link_id: str, kinds: tuple[str, ...]) -> Switch | None:
        """The switch of one of ``kinds`` whose ports run ``link_id`` that a network or domain gets by default: the
        largest-radix shipping one, a roadmap one only where none ships (ties by id); None where none runs it."""
        runs = [s for s in self.switches.values() if s.link == link_id and s.kind in kinds]
        return min(runs, key=lambda s: (s.status == "roadmap", -s.radix, s.id)) if runs else None

    def links_of_kind(self, kind: str) -> list[LinkTech]:
        return [link for link in self.links.values() if link.kind == kind]

    def check_references(self) -> None:
        """Every id an entry points to must exist, with the right kind."""

        def need(category: str, ref: str | None, where: str, kind: str | tuple[str, ...] | None = None) -> None:
            if ref is None:
                return
            table: dict[str, Any] = getattr(self, category)
            if ref not in table:
                raise SpecError(
                    f"refers to unknown {category[:-1]} {ref!r}; known: {', '.join(sorted(table))}", field=where
                )
            kinds = (kind,) if isinstance(kind, str) else kind
            if kinds is not None and getattr(table[ref], "kind", None) not in kinds:
                raise SpecError(f"{ref!r} is a {table[ref].kind} {category[:-1]}, expected {' or '.join(kinds)}",
                                field=where)

        for g in self.gpus.values():
            need("links", g.nvlink, f"gpus.{g.id}.nvlink", SCALE_UP_LINK_KINDS)
            need("links", g.pcie, f"gpus.{g.id}.pcie", "pcie")
            if g.nvlink and g.nvlink_links == 0:
                raise SpecError("has an NVLink generation but nvlink_links is 0", field=f"gpus.{g.id}")
        for link in self.links.values():
            need("links", link.tuning_as, f"links.{link.id}.tuning_as")
        for s in self.switches.values():
            need("links", s.link, f"switches.{s.id}.link")
        for n in self.nics.values():
            need("links", n.link, f"nics.{n.id}.link")
            need("links", n.host_pcie, f"nics.{n.id}.host_pcie", "pcie")
        for sysm in self.systems.values():
            where = f"systems.{sysm.id}"
            need("gpus", sysm.gpu, f"{where}.gpu")
            need("switches", sysm.nvswitch, f"{where}.nvswitch", SCALE_UP_SWITCH_KINDS)
            need("nics", sysm.nic, f"{where}.nic")
            need("nics", sysm.storage_nic, f"{where}.storage_nic")
            need("links", sysm.pcie, f"{where}.pcie", "pcie")
            need("switches", sysm.pcie_switch, f"{where}.pcie_switch")
            need("links", sysm.cpu_link, f"{where}.cpu_link", "cpu")
            need("links", sysm.cpu_gpu_link, f"{where}.cpu_gpu_link")
            if sysm.pcie_switches > 0 and sysm.pcie_switch is None:
                raise SpecError("has pcie_switches but no pcie_switch id", field=where)
            if sysm.cpu_links > 0 and sysm.cpu_link is None:
                raise SpecError("has cpu_links but no cpu_link id", field=where)
            rails = sysm.rails or sysm.nics_per_node
            if sysm.nics_per_node % rails:
                raise SpecError(f"nics_per_node {sysm.nics_per_node} is not a multiple of rails {rails}", field=where)
            if sysm.intra == "nvswitch" and (sysm.nvswitch is None or self.gpus[sysm.gpu].nvlink is None):
                raise SpecError("an NVSwitch system needs an nvswitch entry and an NVLink GPU", field=where)
            if sysm.nvlink_domain_gpus > 1 and sysm.intra != "nvswitch":
                raise SpecError("only NVSwitch systems have an NVLink domain above 1 GPU", field=where)
            if sysm.nvlink_bridge_gpus is not None:
                bridge = sysm.nvlink_bridge_gpus
                if sysm.intra != "pcie" or self.gpus[sysm.gpu].nvlink is None:
                    raise SpecError("NVLink bridges need a pcie system and an NVLink GPU",
                                    field=f"{where}.nvlink_bridge_gpus")
                if sysm.gpus_per_node % bridge:
                    raise SpecError(f"gpus_per_node {sysm.gpus_per_node} is not a multiple of {bridge}",
                                    field=f"{where}.nvlink_bridge_gpus")


CATEGORY_MODELS: dict[str, type[BaseModel]] = {
    "gpus": GPU,
    "links": LinkTech,
    "switches": Switch,
    "nics": NIC,
    "cables": Cable,
    "systems": System,
    "tunings": Tuning,
    "failures": FailureRate,
    "storage": StorageTier,
    "storage_servers": StorageServer,
    "congestion_controls": CongestionControl,
    "cooling": CoolingClass,
}
