"""Nodes a job uses only in part: NVIDIA runs 64-, 128- or 512-GPU jobs on GB200 NVL72 racks using 64 GPUs of each
rack (or fewer), so the job's GPU count need not be a multiple of 72. The partly used node is a system of its own
(its GPUs, NVLink domain and NICs cut to what the job uses) at the whole node's price and power: the rack is paid
for whether or not every GPU runs."""

from __future__ import annotations

from fabricsim.catalog.models import System
from fabricsim.errors import SpecError


def partial_system_id(system_id: str, used: int | None, field: str = "--gpus-per-node") -> str:
    """The id of ``system_id`` with ``used`` GPUs of each node in use (e.g. gb200-nvl72/64; ``system_id`` itself
    when ``used`` is None or the id already says ``/used``). `Catalog.system` resolves such ids; an id that already
    names another count (gb200-nvl72/64 with 32) is a SpecError naming ``field``."""
    if used is None:
        return system_id
    named = split_partial_id(system_id)[1]
    if named is None:
        return f"{system_id}/{used}"
    if named != used:
        raise SpecError(f"{used} GPUs per node disagrees with system {system_id!r}, which already uses {named} of "
                        f"each node; give the count once (in the id or as {field})", field=field)
    return system_id


def split_suffix(system_id: str, mark: str, meaning: str) -> tuple[str, int | None]:
    """``id<mark>N`` -> (id, N); an id without the mark -> (id, None); a non-number after it says ``meaning``."""
    base, sep, number = system_id.rpartition(mark)
    if not sep:
        return system_id, None
    if not number.strip().isdigit():
        raise SpecError(f"{system_id!r}: after {mark!r} give {meaning}", field="system")
    return base, int(number)


def split_partial_id(system_id: str) -> tuple[str, int | None]:
    """``gb200-nvl72/64`` -> ('gb200-nvl72', 64); an id without ``/N`` -> (id, None)."""
    return split_suffix(system_id, "/", "the GPUs of each node used, e.g. gb200-nvl72/64")


def power_of_two_part(system: System) -> int | None:
    """GPUs per node a power-of-two job uses on a node whose GPU count is not a power of two (64 of an NVL72
    rack, as NVIDIA runs 64- to 512-GPU jobs on them); None where the node already is a power of two."""
    gpn = system.gpus_per_node
    if gpn & (gpn - 1) == 0:
        return None
    return 1 << (gpn.bit_length() - 1)


def partly_used(system: System, used: int, field: str = "--gpus-per-node") -> System:
    """``system`` with ``used`` of its GPUs per node running the job: the NVLink domain is cut to the GPUs used
    (a domain of 72 of which 64 run is a domain of 64), each GPU keeps its share of the NICs, and the price and
    power stay the whole node's."""
    gpn = system.gpus_per_node
    if not 1 <= used <= gpn:
        raise SpecError(f"must be between 1 and the {gpn} GPUs of a {system.id} node, got {used}", field=field)
    if used == gpn:
        return system
    domain = system.nvlink_domain_gpus
    if used > domain and used % domain:
        raise SpecError(f"{used} GPUs per node do not fill whole NVLink domains of {domain} GPUs on {system.id}; "
                        f"use a multiple of {domain} or at most {domain}", field=field)
    nics = max(1, system.nics_per_node * used // gpn)
    return system.model_copy(update={
        "id": partial_system_id(system.id, used),
        "name": f"{system.name}, {used} of {gpn} GPUs per node used",
        "gpus_per_node": used,
        "nvlink_domain_gpus": min(domain, used),
        "nics_per_node": nics,
        "rails": None if system.rails is None else min(system.rails, nics),
    })
