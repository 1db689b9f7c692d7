"""Bad input raises SpecError naming the field and the limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabricsim.errors import SpecError
from fabricsim.topology import ClusterSpec, build_cluster


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"nodes": 0}, r"^nodes: must be at least 1 \(got 0\)"),
    ({"oversubscription": 0.5}, r"^oversubscription: must be a finite ratio >= 1"),
    ({"oversubscription": float("nan")}, r"^oversubscription: "),
    ({"link": "qm9800"}, r"^link: unknown fabric link or switch 'qm9800'; did you mean 'qm9700'"),
    ({"link": "nvswitch-gen3"}, r"not a fabric switch"),
    ({"link": "ib-edr"}, r"^link: no catalog switch runs 'ib-edr'; links with a switch: .*ib-ndr"),
    ({"system": "dgx-h10"}, r"^system: unknown system 'dgx-h10'; did you mean 'dgx-h100'"),
    ({"nodes": 257, "tiers": 2}, r"^nodes: a 2-tier fat tree of qm9700 \(radix 64\) holds at most 256 dgx-h100 "
                                 r"nodes \(2048 GPUs\); asked for 257; use tiers 3"),
    ({"nodes": 8193}, r"a 3-tier fat tree of qm9700 \(radix 64\) holds at most 8192 dgx-h100 nodes \(65536 GPUs\)"),
    ({"nodes": 600, "link": "ib-hdr", "system": "dgx-a100", "tiers": 2},
     r"2-tier fat tree of qm8700 \(radix 40\) holds at most 100 dgx-a100 nodes"),
    ({"nodes": 9, "rail_optimized": False, "tiers": 1}, r"1-tier fat tree of qm9700 \(radix 64\) holds at most 8"),
    ({"nodes": 9, "tiers": 1}, r"^nodes: a 1-tier fat tree of qm9700 \(radix 64\) holds at most 8 dgx-h100"),
    ({"tiers": 4}, r"^tiers: must be 1, 2 or 3"),
    ({"fabric": "mesh", "nodes": 10}, r"full mesh of dgx-h100 nodes \(8 NICs each\) holds at most 9 nodes"),
    ({"fabric": "hypercube"}, r"^fabric: "),
    ({"fabric": "torus", "nodes": 8, "torus_dims": (2, 2, 3)}, r"^torus_dims: 2x2x3 holds 12 switches"),
    ({"fabric": "torus", "nodes": 9, "nodes_per_switch": 9}, r"cannot host 9 node\(s\) of 8 NICs \(at most 8 per"),
    ({"fabric": "torus", "nodes": 16, "nodes_per_switch": 8}, r"has 0 ports left after 64 node ports, fewer than"),
    ({"fabric": "torus", "nodes": 4, "tiers": 2}, r"apply to fat trees only"),
    ({"nic": "cx7-eth"}, r"^nic: NIC 'cx7-eth' runs eth-400g, not infiniband"),
])
def test_spec_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(SpecError, match=match):
        build_cluster(**kwargs)


def test_spec_from_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("system: dgx-h100\nnodes: 64\nlink: ib-ndr\noversubscription: 2\n")
    spec = ClusterSpec.from_file(path)
    assert spec.nodes == 64 and spec.oversubscription == 2
    path.write_text("system: dgx-h100\nnodez: 64\n")
    with pytest.raises(SpecError, match=r"cluster.yaml: nodez: unknown field"):
        ClusterSpec.from_file(path)
