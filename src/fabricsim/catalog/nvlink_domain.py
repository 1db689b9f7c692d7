"""Multi-rack NVLink domains: rack-scale systems (GB200/GB300 NVL72) joined into one NVLink domain of 144 to 576
GPUs through a second NVLink switch tier. ``gb200-nvl72@144`` is two NVL72 racks whose NVLink switch trays feed a
non-blocking second tier, so every GPU keeps its full NVLink rate to any GPU of the 144; to the scale-out fabric the
joined racks are one node. Such a domain is a roadmap design (NVIDIA names NVL576 for Rubin Ultra, 2027): its
switch count follows a folded Clos, its price and power the NVLink switch entry's ``second_tier`` figures."""

from __future__ import annotations

from fabricsim.catalog.models import GPU, LinkTech, Switch, System
from fabricsim.catalog.partial import split_suffix
from fabricsim.errors import SpecError


def is_switch_system(system: System, gpu: GPU) -> bool:
    """Whether ``system``'s NVLink domain is an NVLink Switch System: each of a GPU's NVLink links on a switch chip
    of its own (an NVL72 rack's trays), so its links can leave the chassis; an HGX board's two or four NVSwitch
    chips are not."""
    return bool(system.intra == "nvswitch" and gpu.nvlink_links and system.nvswitch_chips >= gpu.nvlink_links)


def why_not_joinable(system: System, gpu: GPU, nvswitch: Switch | None) -> str | None:
    """Why ``system``'s racks (of ``gpu``, on NVLink switch chips ``nvswitch``) cannot be joined into a larger
    NVLink domain; None when they can (`Catalog.why_not_joinable` looks the parts up)."""
    if nvswitch is None or gpu.nvlink is None:
        return f"{system.id} has no NVLink switches to join"
    if system.nvlink_domain_gpus != system.gpus_per_node or system.nvlink_rack_gpus is not None \
            or not is_switch_system(system, gpu):
        return (f"{system.id} is not a rack-scale NVLink system (one NVLink domain per node, each GPU link on a "
                "switch chip of its own); joined NVLink domains are built from racks such as gb200-nvl72")
    if nvswitch.second_tier is None:
        return f"{system.id}'s NVLink switch {nvswitch.id} has no second-tier figures in the catalog, so its racks " \
               "cannot be joined"
    return None


def joined_system_id(system_id: str, domain_gpus: int | None) -> str:
    """The id of ``system_id``'s racks joined into NVLink domains of ``domain_gpus`` (``gb200-nvl72@576``)."""
    return system_id if domain_gpus is None else f"{system_id}@{domain_gpus}"


def split_joined_id(system_id: str) -> tuple[str, int | None]:
    """``gb200-nvl72@144`` -> ('gb200-nvl72', 144); an id without ``@N`` -> (id, None)."""
    return split_suffix(system_id, "@", "the GPUs of the joined NVLink domain, e.g. gb200-nvl72@144")


def joined_racks(system: System, domain_gpus: int, gpu: GPU, nvswitch: Switch | None, nvlink: LinkTech | None,
                 field: str = "--nvlink-domain") -> System:
    """``system``'s racks joined ``domain_gpus / gpus_per_node`` at a time into one NVLink domain (see the module
    docstring). Second-tier switch chips: with every tier-1 chip giving half its ports to GPUs and half to the
    second tier, tier 1 needs twice a rack's chips and tier 2 one rack's chips per rack (non-blocking)."""
    reason = why_not_joinable(system, gpu, nvswitch)
    if reason is not None:
        raise SpecError(reason, field=field)
    assert nvswitch is not None and nvswitch.second_tier is not None and nvlink is not None  # checked just above
    tier = nvswitch.second_tier
    rack = system.gpus_per_node
    largest = nvlink.max_domain_gpus or rack
    if domain_gpus % rack or not 2 * rack <= domain_gpus <= largest:
        raise SpecError(f"must be a multiple of the {rack} GPUs of a {system.id} rack, from {2 * rack} to "
                        f"{nvlink.id}'s largest domain of {largest} GPUs, got {domain_gpus}", field=field)
    racks = domain_gpus // rack
    price = None if system.price_usd is None else racks * system.price_usd * (1 + tier.price_fraction.value)
    power = None if system.power_w is None else racks * (system.power_w + tier.power_w_per_rack.value)
    return system.model_copy(update={
        "id": joined_system_id(system.id, domain_gpus),
        "name": f"{racks} x {system.name} in one NVLink domain of {domain_gpus} GPUs (second NVLink switch tier)",
        "gpus_per_node": domain_gpus,
        "nvlink_domain_gpus": domain_gpus,
        "nvlink_rack_gpus": rack,
        "nvswitch_chips": 3 * racks * system.nvswitch_chips,
        "nics_per_node": racks * system.nics_per_node,
        "storage_ports": racks * system.storage_ports,
        "cpus_per_node": racks * system.cpus_per_node,
        "rails": None if system.rails is None else racks * system.rails,
        "rack_units": None if system.rack_units is None else racks * system.rack_units,
        "price_usd": price,
        "power_w": power,
        "rated_power_w": None if system.rated_power_w is None else
        racks * (system.rated_power_w + tier.power_w_per_rack.value),
        "status": "roadmap",
        "verified": False,
        "source": f"{system.id} racks ({system.source}); second tier: {tier.price_fraction.source}",
        "notes": f"A roadmap design: {racks} racks joined by a non-blocking second NVLink switch tier "
                 f"({3 * racks * system.nvswitch_chips} switch chips, folded Clos); price {racks} racks x "
                 f"(1 + {tier.price_fraction.value:g}) and power {racks} x (rack + "
                 f"{tier.power_w_per_rack.value / 1e3:g} kW) for the second tier and its optics, both estimates.",
    })
