"""Switch and cable counts reproduce NVIDIA's published DGX SuperPOD compute fabrics (rail-optimized NDR, QM9700).

Sources (also recorded in /work/shared/reference/hardware.yaml and superpod-h100.md):
- H100: NVIDIA DGX SuperPOD Reference Architecture, DGX H100 (RA-11333-001), Table 4 "compute fabric",
  https://docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-h100/latest/network-fabrics.html
  Scalable units (SU) of 32 node slots; the RA's builds have 31/63/95/127 compute nodes because the first SU's
  32nd slot holds the UFM fabric-manager appliance (4 cables). fabricsim sizes uplinks from the NICs present and
  spreads them evenly over the spines (same cables from every leaf to every spine, for balanced ECMP): 31 nodes need
  31 uplinks a leaf, 4 spines x 8 = 32, so the RA's leaves, spines and leaf-spine cables come out unchanged;
  node-leaf cables count the NICs present.
- B200 (3-tier rows): https://docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-b200/latest/dgx-superpod-architecture.html
"""

from __future__ import annotations

import pytest

from fabricsim.topology import build_cluster

H100_RA_URL = "https://docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-h100/latest/network-fabrics.html"
B200_RA_URL = "https://docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-b200/latest/dgx-superpod-architecture.html"
UFM_CABLES = 4  # the UFM appliance in the 32nd slot of the first SU: cables_compute_ufm - nodes * 8 in Table 4

# (SUs, compute nodes, GPUs, leaf, spine, compute+UFM cables, leaf-spine cables): H100 RA Table 4 (H100_RA_URL)
H100_TABLE_4 = [
    (1, 31, 248, 8, 4, 252, 256),
    (2, 63, 504, 16, 8, 508, 512),
    (3, 95, 760, 24, 16, 764, 768),
    (4, 127, 1016, 32, 16, 1020, 1024),
]

# (SUs, nodes, GPUs, leaf, spine, core, node-leaf, leaf-spine, spine-core): B200 RA table (B200_RA_URL)
B200_TABLE = [
    (2, 64, 512, 16, 8, 0, 512, 512, 0),
    (4, 128, 1024, 32, 16, 0, 1024, 1024, 0),
    (8, 256, 2048, 64, 32, 0, 2048, 2048, 0),
    (16, 512, 4096, 128, 128, 64, 4096, 4096, 4096),
    (32, 1024, 8192, 256, 256, 128, 8192, 8192, 8192),
    (64, 2048, 16384, 512, 512, 256, 16384, 16384, 16384),
]


@pytest.mark.parametrize(("su", "nodes", "gpus", "leaf", "spine", "compute_ufm", "leaf_spine"), H100_TABLE_4)
def test_h100_superpod_table_4_with_ufm_slot(su: int, nodes: int, gpus: int, leaf: int, spine: int,
                                            compute_ufm: int, leaf_spine: int) -> None:
    """31/63/95/127 compute nodes: same leaves, spines and leaf-spine cables as the RA; node-leaf = RA - UFM."""
    topo = build_cluster("dgx-h100", nodes=nodes, link="ib-ndr")
    bom = topo.bom()
    assert bom.gpus == gpus
    assert bom.switches == {"leaf": leaf, "spine": spine, "core": 0}
    assert bom.cables["node-leaf"] == compute_ufm - UFM_CABLES
    assert bom.cables["leaf-spine"] == leaf_spine
    assert bom.switch == "qm9700" and bom.tiers == 2


@pytest.mark.parametrize(("su", "leaf", "spine", "cables"), [(1, 8, 4, 256), (2, 16, 8, 512), (4, 32, 16, 1024)])
def test_h100_superpod_full_scalable_units(su: int, leaf: int, spine: int, cables: int) -> None:
    """Full SUs of 32 nodes (superpod-h100.md, from H100_RA_URL's design rules): 8 leaves per SU, one per rail."""
    bom = build_cluster("dgx-h100", nodes=32 * su, link="ib-ndr").bom()
    assert bom.switches == {"leaf": leaf, "spine": spine, "core": 0}
    assert bom.cables == {"node-leaf": cables, "leaf-spine": cables}
    assert bom.bisection_bytes_per_s == pytest.approx(256 * su / 2 * 50e9)


@pytest.mark.parametrize(("su", "nodes", "gpus", "leaf", "spine", "core", "node_leaf", "leaf_spine", "spine_core"),
                         B200_TABLE)
def test_b200_superpod_table_two_and_three_tiers(su: int, nodes: int, gpus: int, leaf: int, spine: int, core: int,
                                                node_leaf: int, leaf_spine: int, spine_core: int) -> None:
    """B200 SuperPOD (B200_RA_URL): 2 tiers up to 8 SU (2,048 GPUs), a core tier from 16 SU."""
    topo = build_cluster("dgx-b200", nodes=nodes, link="ib-ndr")
    bom = topo.bom()
    assert bom.gpus == gpus
    assert bom.switches == {"leaf": leaf, "spine": spine, "core": core}
    expected = {"node-leaf": node_leaf, "leaf-spine": leaf_spine}
    if spine_core:
        expected["spine-core"] = spine_core
    assert bom.cables == expected
    assert topo.tiers == (3 if core else 2)


def test_two_tier_limit_is_radix_squared_over_two_endpoints() -> None:
    """64-port QM9700: 64 leaves x 32 node ports = 2,048 NDR endpoints (superpod-h100.md)."""
    assert build_cluster("dgx-h100", nodes=256).tiers == 2
    assert build_cluster("dgx-h100", nodes=257).tiers == 3
