"""DeepSeek's topology cost comparison (Zhao et al., "Insights into DeepSeek-V3: Scaling Challenges and Reflections
on Hardware for AI Architectures", ISCA 2025, arXiv:2505.09343, sec. 5: 64-port 400G switches): the switch counts
of FT2 (2,048 endpoints, 96 switches, 2,048 links), MPFT (16,384, 768, 16,384), FT3 (65,536, 5,120, 131,072) and
SF (32,928, 1,568, 32,928), and the ordering of cost per endpoint, MPFT = FT2 ($4.39k) < SF ($4.4k) < DF ($5.8k) <
FT3 ($7.5k) (Table 3 of the ISCA paper, read in its proceedings text; "Cost estimates are derived from the
methodology in the Slim Fly (SF) paper"; 64-port 400G IB switches). Their MPFT gives each of a node's 8 NICs a
plane of its own: fabricsim's rail-only network of 2-tier rails. Their dragonfly is the canonical one; fabricsim
builds dragonfly+, compared here at FT3's endpoint count. Prices are fabricsim's catalog's, not the paper's: the
ordering and the counts are what must hold."""

from __future__ import annotations

from fabricsim.topology import BillOfMaterials, build_cluster


def _per_endpoint(bill: BillOfMaterials) -> float:
    """Fabric cost (switches, cables, optics; nodes left out) per NIC."""
    return sum(i.price_usd or 0.0 for i in bill.items if i.category != "node") / bill.nics


def test_deepseek_topology_table() -> None:
    """Endpoints, switches and switch-to-switch links of FT2, MPFT and FT3 as in the table; Slim Fly at the table's
    32,928 endpoints (q = 29, the smallest prime that holds them: the table's 1,568 routers are q = 28, which no
    MMS graph of a prime has) costs within 10% of FT2 per endpoint (the table: 4.4 vs 4.39 k$); cost per endpoint
    orders MPFT = FT2 < SF < DF < FT3."""
    ft2 = build_cluster("dgx-h100", nodes=256).bom()
    mpft = build_cluster("dgx-h100", nodes=2048, fabric="rail-only").bom()
    ft3 = build_cluster("dgx-h100", nodes=8192).bom()
    df = build_cluster("dgx-h100", nodes=8192, fabric="dragonfly").bom()
    sf = build_cluster("dgx-h100", nodes=4116, fabric="slim-fly").bom()

    def fabric_links(bill: BillOfMaterials) -> int:
        return bill.cables_total - bill.nics

    assert (ft2.nics, ft2.switches_total, fabric_links(ft2)) == (2048, 96, 2048)
    assert (mpft.nics, mpft.switches_total, fabric_links(mpft)) == (16384, 768, 16384)
    assert (ft3.nics, ft3.switches_total, fabric_links(ft3)) == (65536, 5120, 131072)
    assert (sf.nics, sf.switches_total, fabric_links(sf)) == (32928, 2 * 29**2, 2 * 29**2 * 43 // 2)
    cost = {name: _per_endpoint(b) for name, b in (("ft2", ft2), ("mpft", mpft), ("ft3", ft3), ("df", df),
                                                   ("sf", sf))}
    assert abs(cost["mpft"] - cost["ft2"]) < 1e-6 * cost["ft2"]
    assert cost["mpft"] < cost["sf"] < cost["df"] < cost["ft3"]
    assert cost["sf"] < 1.10 * cost["ft2"]


def test_rail_only_savings_against_the_rail_only_paper() -> None:
    """Wang et al., "Rail-only: A Low-Cost High-Performance Network for Training LLMs with Trillion Parameters"
    (arXiv:2307.12169, abstract): rail-only cuts network cost by 38-77% and network power by 37-75% against a
    rail-optimized fat tree. fabricsim's catalog gives, at 4k-16k DGX H100 GPUs (HB domain 8, the paper's smallest),
    35.5% of the fabric's cost and 37% of its power (compared, not fitted: the catalog's switch and optics prices);
    the check asks for the paper's neighbourhood, 30-80%."""
    for nodes in (512, 2048):
        fat_tree = build_cluster("dgx-h100", nodes=nodes).bom()
        rail_only = build_cluster("dgx-h100", nodes=nodes, fabric="rail-only").bom()

        def fabric(bill: BillOfMaterials) -> tuple[float, float]:
            parts = [i for i in bill.items if i.category != "node"]
            return sum(i.price_usd or 0.0 for i in parts), sum(i.power_w or 0.0 for i in parts)

        (cost_ft, power_ft), (cost_ro, power_ro) = fabric(fat_tree), fabric(rail_only)
        assert 0.30 <= 1 - cost_ro / cost_ft <= 0.80
        assert 0.30 <= 1 - power_ro / power_ft <= 0.80


def test_multi_plane_all_to_all_matches_the_multi_rail_fat_tree_as_deepseek_measured() -> None:
    """Zhao et al. (ISCA 2025, Figs. 5-6) measured NCCL all_to_all on their multi-plane fat tree (MPFT: each of a
    node's 8 NICs in a 2-tier plane of its own, cross-plane bytes forwarded inside the node) and on a multi-rail fat
    tree (MRFT) at 16-128 GPUs: "very similar", latency "nearly identical" (within about 1.5%). fabricsim's rail-only
    network is their MPFT; with PXN forwarding the flow simulator gives the same all_to_all time on both."""
    import numpy as np

    from fabricsim.collectives import concurrent_groups_time

    for nodes in (2, 8, 16):
        mpft = build_cluster("hgx-h800", nodes=nodes, fabric="rail-only", link="ib-ndr")
        mrft = build_cluster("hgx-h800", nodes=nodes, link="ib-ndr")
        everyone = np.arange(mpft.num_gpus)[None, :]
        t_mpft, _ = concurrent_groups_time(mpft, everyone, "all_to_all", 256 * 2**20)
        t_mrft, _ = concurrent_groups_time(mrft, everyone, "all_to_all", 256 * 2**20)
        assert abs(t_mpft / t_mrft - 1) <= 0.03, (nodes, t_mpft, t_mrft)
