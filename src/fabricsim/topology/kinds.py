"""Integer codes for link and endpoint kinds, so topologies hold them in small numpy arrays."""

from __future__ import annotations

from fabricsim.errors import unknown_name_error

# Link kinds, by the layer a byte crosses: NVLink between GPUs (or GPU and CPU over NVLink-C2C), NVLink between a
# GPU and an NVSwitch, the host path (PCIe, and the CPU socket-to-socket link), and the scale-out fabric.
LINK_KINDS: tuple[str, ...] = ("nvlink", "nvswitch", "pcie", "infiniband", "ethernet")
NVLINK, NVSWITCH, PCIE, INFINIBAND, ETHERNET = range(len(LINK_KINDS))

# Endpoint kinds. Fabric switches (leaf/spine/core, torus routers) are all "switch"; their tier is a separate array.
ENDPOINT_KINDS: tuple[str, ...] = ("gpu", "nic", "nvswitch", "pcie_switch", "cpu", "switch")
GPU, NIC, NVSWITCH_CHIP, PCIE_SWITCH, CPU, SWITCH = range(len(ENDPOINT_KINDS))


def link_kind_name(code: int) -> str:
    """The name of a link kind code (an index into LINK_KINDS)."""
    return LINK_KINDS[int(code)]


def link_kind_code(name: str) -> int:
    """The code of a link kind name; a SpecError lists the names."""
    if name not in LINK_KINDS:
        raise unknown_name_error("link kind", name, LINK_KINDS)
    return LINK_KINDS.index(name)


def endpoint_kind_name(code: int) -> str:
    """The name of an endpoint kind code (an index into ENDPOINT_KINDS)."""
    return ENDPOINT_KINDS[int(code)]
