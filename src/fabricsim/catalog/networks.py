"""The one resolver of network names (the `--ib` option, `fabric=`, `--fabrics`, swaps): every command and API
function turns a user's name into a catalog id here, so `ndr`, `NDR`, `ib-ndr` and `qm9700` are the same network
everywhere."""

from __future__ import annotations

from fabricsim.catalog.catalog import Catalog
from fabricsim.errors import SpecError, unknown_name_error

NETWORK_KINDS = ("infiniband", "ethernet")
"""Link and switch kinds that connect nodes (a scale-out network)."""


def network_names(catalog: Catalog) -> list[str]:
    """Every catalog id a network name may be: scale-out link ids (ib-ndr, eth-400g) and switch ids (qm9700)."""
    links = [k for k, link in catalog.links.items() if link.kind in NETWORK_KINDS]
    switches = [k for k, s in catalog.switches.items() if s.kind in NETWORK_KINDS]
    return sorted(links + switches)


def network_id(catalog: Catalog, name: str, *, field: str = "--ib", kind: str = "network") -> str:
    """The catalog id (a scale-out link or switch) a network name means, case-insensitively: a link id (ib-ndr,
    eth-400g), an InfiniBand generation (hdr, ndr, xdr, gdr), an Ethernet rate (400g, 800g, 400) or a switch id
    (qm9700). Anything else is a SpecError naming ``field`` and the allowed names."""
    key = name.strip().lower()
    if not key:
        raise SpecError("empty; name a network (e.g. ndr, 400g) or leave the option out", field=field)
    known = network_names(catalog)
    if key in known:
        return key
    rate = key.removeprefix("eth-")
    for candidate in (f"ib-{key}", f"eth-{key}", f"eth-{rate}g" if rate.isdigit() else ""):
        if candidate in known:
            return candidate
    if key in catalog.switches:
        raise SpecError(f"{key!r} is a {catalog.switches[key].kind} switch, not a fabric switch; fabric switches: "
                        f"{', '.join(k for k in known if k in catalog.switches)}", field=field)
    if key in catalog.links:
        raise SpecError(f"{key!r} is a {catalog.links[key].kind} link, not a fabric link; fabric links: "
                        f"{', '.join(k for k in known if k in catalog.links)}", field=field)
    raise unknown_name_error(kind, name, known, field=field)


def network_link_id(catalog: Catalog, name: str, *, field: str = "--ib") -> str:
    """The scale-out link id a network name means (a switch id means the link it runs)."""
    key = network_id(catalog, name, field=field)
    return catalog.switches[key].link if key in catalog.switches else key
