"""A system with its scale-up domain on another technology at the same per-GPU bandwidth: a GB200 NVL72 rack whose
GPUs talk over UALink or scale-up Ethernet instead of NVLink (`whatif --swap scale-up=ualink-200g`). No such system
ships; the variant answers "what would the domain's own latency and in-switch reduction change", priced as the
original (no price for the swap is published)."""

from __future__ import annotations

import math

from fabricsim.catalog.catalog import Catalog
from fabricsim.catalog.models import SCALE_UP_LINK_KINDS, SCALE_UP_SWITCH_KINDS, LinkTech, Switch
from fabricsim.errors import SpecError

SCALE_UP_ALIASES = {"nvlink": "nvlink5", "ualink": "ualink-200g", "sue": "sue-800g"}
"""short names of the scale-up technologies a swap takes beside link ids"""


def domain_switch(catalog: Catalog, link: LinkTech) -> Switch:
    """The catalog scale-up switch whose ports run ``link``: the largest-radix shipping one, a roadmap one where
    none ships."""
    found = catalog.switch_running(link.id, SCALE_UP_SWITCH_KINDS)
    if found is None:
        raise SpecError(f"no catalog scale-up switch runs {link.id}", field="--swap")
    return found


def scale_up_variant(catalog: Catalog, system_id: str, name: str, field: str = "--swap") -> tuple[Catalog, str]:
    """The catalog with ``system_id``'s GPUs on scale-up link ``name`` (an id, or ualink / sue / nvlink) at their
    per-GPU bandwidth rounded up to whole ports, on the switch that runs it; and the variant system's id."""
    if "@" in system_id or "/" in system_id:
        raise SpecError(f"swap the scale-up domain of {system_id.split('@')[0].split('/')[0]} itself, not of a joined "
                        "or partly used variant", field=field)
    system = catalog.system(system_id, field=field)
    gpu = catalog.gpu(system.gpu)
    if system.intra != "nvswitch" or gpu.nvlink is None or system.nvswitch is None:
        raise SpecError(f"{system.id} has no switched scale-up domain to move to another technology", field=field)
    link = catalog.link(SCALE_UP_ALIASES.get(name.strip().lower(), name.strip().lower()))
    if link.kind not in SCALE_UP_LINK_KINDS:
        raise SpecError(f"{link.id} is a {link.kind} link, not a scale-up one ({', '.join(SCALE_UP_LINK_KINDS)})",
                        field=field)
    switch = domain_switch(catalog, link)
    if link.max_domain_gpus is not None and system.nvlink_domain_gpus > link.max_domain_gpus:
        raise SpecError(f"{link.id} domains hold at most {link.max_domain_gpus} GPUs; {system.id}'s has "
                        f"{system.nvlink_domain_gpus}", field=field)
    own = catalog.link(gpu.nvlink)
    per_gpu = gpu.nvlink_links * own.bytes_per_s
    ports = math.ceil(per_gpu / link.bytes_per_s - 1e-9)
    chips = math.ceil(system.nvswitch_chips * ports / gpu.nvlink_links)
    new_gpu = gpu.model_copy(update={"id": f"{gpu.id}+{link.id}", "nvlink": link.id, "nvlink_links": ports,
                                     "name": f"{gpu.name} on {link.name}"})
    variant = system.model_copy(update={
        "id": f"{system.id}+{link.id}", "gpu": new_gpu.id, "nvswitch": switch.id, "nvswitch_chips": chips,
        "name": f"{system.name}, scale-up domain on {link.name}",
        "status": "roadmap" if "roadmap" in (link.status, switch.status, system.status) else system.status,
        "verified": False,
        "notes": f"{system.id} with its {system.nvlink_domain_gpus}-GPU domain on {ports} x {link.id} per GPU "
                 f"({ports * link.bytes_per_s / 1e9:g} GB/s each way, {own.id} gave {per_gpu / 1e9:g}) through "
                 f"{switch.id}; priced and powered as {system.id} (no price for the swap is published)",
    })
    return catalog.model_copy(update={"gpus": {**catalog.gpus, new_gpu.id: new_gpu},
                                      "systems": {**catalog.systems, variant.id: variant}}), variant.id
