"""The storage network and hot spares (issue 26, items 3 and 4): storage servers sized to a tier and billed with
the cluster (separate fabric or converged), the rates a job reaches through it, and the wait for a repaired node
that hot spares remove."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.catalog import default_catalog
from fabricsim.comm import Cluster
from fabricsim.errors import SpecError
from fabricsim.model import load_model
from fabricsim.topology import ClusterSpec, StorageNetworkSpec, build_topology, storage_bill
from fabricsim.training import GoodputSpec, job_parts, predict_goodput, spare_wait_s

CATALOG = default_catalog()
H100 = CATALOG.system("dgx-h100")
QM9700 = CATALOG.switch("qm9700")
CX7 = CATALOG.nic("cx7")


def _bom(nodes: int, storage: StorageNetworkSpec | None, system: str = "dgx-h100", fabric: str = "fat-tree"):  # type: ignore[no-untyped-def]
    return build_topology(ClusterSpec(system=system, nodes=nodes, fabric=fabric, storage=storage), CATALOG).bom()


def test_1024_gpu_bill_with_a_separate_storage_fabric() -> None:
    """Must hold: storage servers, storage switches, NICs and cables, each with a price and a power, added to the
    compute fabric's lines, which stay as they were."""
    plain = _bom(128, None)
    bill = _bom(128, StorageNetworkSpec(network="separate"))
    assert bill.gpus == 1024
    added = bill.items[len(plain.items):]
    assert bill.items[:len(plain.items)] == plain.items
    kinds = {(i.category, i.role) for i in added}
    assert ("storage", "storage server") in kinds
    assert ("nic", "storage NIC") in kinds
    assert {"storage leaf", "storage spine"} <= {role for cat, role in kinds if cat == "switch"}
    assert {"storage node-leaf", "storage server-leaf", "storage leaf-spine"} <= \
        {role for cat, role in kinds if cat == "cable"}
    assert all(i.unit_price_usd is not None and i.unit_power_w is not None and i.count > 0 for i in added)
    assert plain.capex_usd is not None and bill.capex_usd is not None and bill.power_w is not None
    assert bill.capex_usd == pytest.approx(plain.capex_usd + sum(i.price_usd or 0 for i in added))
    assert bill.power_w > (plain.power_w or 0)
    st_ = bill.storage
    assert st_ is not None and st_.nics == 128 and st_.compute_ports == 0
    # every node's storage ports and every server port on a leaf, and as many uplinks (non-blocking)
    ports = 128 * H100.storage_ports + st_.servers * CATALOG.storage_server(st_.server).ports
    assert st_.switches["storage leaf"] * QM9700.radix // 2 >= ports
    assert st_.switches["storage spine"] * QM9700.radix >= ports
    # the compute fabric's own counts are untouched (what fails is counted from them)
    assert (bill.switches, bill.cables_total, bill.nics) == (plain.switches, plain.cables_total, plain.nics)


def test_1024_gpu_bill_converged_adds_only_servers_and_ports() -> None:
    plain = _bom(128, None)
    bill = _bom(128, StorageNetworkSpec(network="converged"))
    added = bill.items[len(plain.items):]
    assert bill.items[:len(plain.items)] == plain.items
    assert {i.category for i in added} == {"storage", "switch port", "cable"}
    assert all(i.role.startswith("storage") for i in added)
    st_ = bill.storage
    assert st_ is not None and st_.switches == {} and st_.nics == 0
    server = CATALOG.storage_server(st_.server)
    assert st_.compute_ports == st_.servers * server.ports == st_.cables
    port = next(i for i in added if i.category == "switch port")
    assert port.unit_price_usd == pytest.approx((QM9700.price_usd or 0) / QM9700.radix)
    separate = _bom(128, StorageNetworkSpec(network="separate"))
    assert bill.capex_usd is not None and separate.capex_usd is not None
    assert plain.capex_usd < bill.capex_usd < separate.capex_usd


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(1, 600), tier=st.sampled_from(sorted(CATALOG.storage)),
       server=st.sampled_from(sorted(CATALOG.storage_servers)), scale=st.floats(0.25, 4.0))
def test_servers_are_the_fewest_that_meet_the_tier(nodes: int, tier: str, server: str, scale: float) -> None:
    spec = StorageNetworkSpec(tier=tier, server=server, scale=scale)
    bill = storage_bill(CATALOG, H100, nodes, nodes * 8, QM9700, CX7, spec)
    box = CATALOG.storage_server(server)
    reach = (bill.servers * box.read_bytes_per_s, bill.servers * box.write_bytes_per_s)
    assert reach[0] >= bill.target_read_bytes_per_s * (1 - 1e-9)
    assert reach[1] >= bill.target_write_bytes_per_s * (1 - 1e-9)
    fewer = bill.servers - 1
    assert fewer < box.min_servers or fewer * box.read_bytes_per_s < bill.target_read_bytes_per_s or \
        fewer * box.write_bytes_per_s < bill.target_write_bytes_per_s
    # the rates the job reaches never exceed what the servers or the nodes can move
    assert bill.write_bytes_per_s <= min(reach[1], bill.node_bytes_per_s) * (1 + 1e-12)
    # a bigger cluster never buys fewer servers
    bigger = storage_bill(CATALOG, H100, nodes + 64, (nodes + 64) * 8, QM9700, CX7, spec)
    assert bigger.servers >= bill.servers


def test_storage_errors_are_one_line() -> None:
    with pytest.raises(SpecError, match="sold from 8"):
        storage_bill(CATALOG, H100, 16, 128, QM9700, CX7, StorageNetworkSpec(server="wekapod-nitro", servers=4))
    with pytest.raises(SpecError, match="storage ports"):
        storage_bill(CATALOG, H100, 2, 16, QM9700, CX7, StorageNetworkSpec(write_bytes_per_s=1e13))
    with pytest.raises(SpecError, match="mesh"):
        _bom(4, StorageNetworkSpec(network="converged"), fabric="mesh")
    with pytest.raises(SpecError, match="storage server"):
        _bom(4, StorageNetworkSpec(server="floppy"))


MODEL = load_model("llama3-70b")


def _goodput(gpus: int, **options: object) -> float:
    cluster = Cluster(H100, catalog=CATALOG)
    return predict_goodput(MODEL, cluster, job_parts(cluster, gpus), 2.0, 1e6,
                           GoodputSpec.model_validate(options)).goodput


@settings(max_examples=25, deadline=None)
@given(gpus=st.sampled_from([64, 256, 1024, 4096]), network=st.sampled_from(["separate", "converged"]),
       scale=st.floats(0.5, 2.0))
def test_more_storage_never_lowers_goodput(gpus: int, network: str, scale: float) -> None:
    slow = _goodput(gpus, storage_network=network, storage_scale=scale)
    assert _goodput(gpus, storage_network=network, storage_scale=scale * 1.5) >= slow - 1e-12


@pytest.mark.parametrize("gpus", [512, 4096, 16384])
def test_more_spares_never_lower_goodput(gpus: int) -> None:
    values = [_goodput(gpus, spares=s) for s in (0, 1, 2, 4, 8, 32, 128)]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(values)), values
    assert values[0] < values[-1]  # with no spare every node lost waits for its repair


def test_spare_wait_matches_a_simulated_repair_pool() -> None:
    """`spare_wait_s` against a seeded event simulation of its own assumptions: node losses as a Poisson stream,
    exponential repairs in parallel, a spare taken when one is free, else a wait for the first repair to end."""
    rng = np.random.default_rng(7)
    rate, repair = 1 / 3600.0, 8 * 3600.0  # one node lost an hour, 8 h repairs: 8 in repair on average
    for spares in (0, 4, 8, 12):
        t, ends, waits = 0.0, np.empty(0), []
        for _ in range(40_000):
            t += rng.exponential(1 / rate)
            ends = ends[ends > t]
            k = len(ends)
            ends = np.append(ends, t + rng.exponential(repair))
            waits.append(0.0 if k < spares else float(np.min(ends)) - t)
        simulated = float(np.mean(waits))
        assert spare_wait_s(rate, spares, repair) == pytest.approx(simulated, rel=0.04, abs=10.0), spares


def test_spare_wait_limits() -> None:
    assert spare_wait_s(0.0, 0, 100.0) == 100.0  # no spare: the failed node's own repair
    assert spare_wait_s(0.0, 3, 100.0) == 0.0
    assert spare_wait_s(1e-3, 0, 1e-3) == pytest.approx(1e-3, rel=1e-3)
    waits = [spare_wait_s(1 / 3600, s, 8 * 3600) for s in range(0, 30)]
    assert all(b <= a for a, b in itertools.pairwise(waits))
    assert waits[-1] < 1e-3 * waits[0]


def test_spares_are_priced_in_size_and_whatif() -> None:
    """Spares cost their share of a node in `size` economics: 4 DGX H100 servers (32 GPUs), or 8 GB200 compute
    trays of 4 GPUs (32 GPUs: 32/72 of a rack), not 8 whole racks."""
    from fabricsim.sizing.economics import economics
    from fabricsim.sizing.space import ClusterChoice

    choice = ClusterChoice("dgx-h100", "ndr", "ib-ndr", 1.0, 128, 1024)
    base = economics(choice, True, CATALOG)
    spared = economics(choice, True, CATALOG, None, 32)
    assert base.capex_usd is not None and spared.capex_usd is not None
    assert spared.capex_usd - base.capex_usd == pytest.approx(4 * (H100.price_usd or math.nan))
    rack = CATALOG.system("gb200-nvl72")
    nvl = ClusterChoice("gb200-nvl72", "ndr", "ib-ndr", 1.0, 16, 1152)
    rack_base, rack_spared = economics(nvl, True, CATALOG), economics(nvl, True, CATALOG, None, 32)
    assert rack_base.capex_usd is not None and rack_spared.capex_usd is not None
    assert rack_spared.capex_usd - rack_base.capex_usd == pytest.approx(32 / 72 * (rack.price_usd or math.nan))
    good = predict_goodput(MODEL, Cluster(rack, catalog=CATALOG), job_parts(Cluster(rack, catalog=CATALOG), 1152),
                           2.0, 1e6, GoodputSpec())
    assert good.spare_unit_gpus == 4 and good.spare_units == 15  # 5% of 288 trays
    stored = economics(choice, True, CATALOG, StorageNetworkSpec(), 0)
    assert stored.capex_usd is not None and stored.capex_usd > base.capex_usd and stored.storage_servers >= 1


def test_converged_checkpoint_at_flow_level_matches_the_goodput_model(tmp_path: object) -> None:
    """`traffic --checkpoint`: on a non-blocking fabric the simulated write of one checkpoint to converged storage
    takes what the goodput model says (the servers' write rate bounds both); the job's own traffic runs beside it."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "fabricsim", "traffic", "--nodes", "8", "--pattern", "all_to_all",
                           "--bytes", "256M", "--checkpoint", "llama3-8b", "--storage-servers", "2", "--json"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    ck = data["checkpoint"]
    assert ck["storage"]["servers"] == 2 and ck["storage_nodes"] == 1
    assert ck["simulated_write_s"] == pytest.approx(ck["analytical_write_s"], rel=0.05)
    names = {j["name"] for j in data["jobs"]}
    assert "traffic" in names and any(n.startswith("checkpoint_write") for n in names)


@pytest.mark.parametrize("link", ["ib-hdr", "ib-ndr", "ib-xdr", "ib-gdr", "eth-400g", "eth-800g"])
def test_every_fabric_generation_is_priced(link: str) -> None:
    """Issue 27 item 3: XDR, GDR (roadmap) and Ethernet fabrics get a capital cost and a power, never null; a
    roadmap link says its parts are assumptions."""
    bill = build_topology(ClusterSpec(system="dgx-h100", nodes=64, link=link), CATALOG).bom()
    assert bill.capex_usd is not None and bill.power_w is not None, bill.missing
    assert bill.missing == []
    roadmap = CATALOG.link(link).status == "roadmap"
    assert any("roadmap" in n for n in bill.notes) == roadmap
    fabric_switches = [s for s in CATALOG.switches.values() if s.kind in ("infiniband", "ethernet")]
    assert all(s.price_usd is not None and s.power_w is not None for s in fabric_switches)


def test_size_picks_the_cheapest_storage_and_spares_per_cluster() -> None:
    """`size` with several storage write rates and spare counts: each cluster runs with the option whose run costs
    least, so the searched best costs no more than the best of any single option."""
    from fabricsim.sizing import SizingSpec, size

    base = {"model": "llama3-70b", "tokens": 1e12, "gpus": (1024,), "systems": ("dgx-h100",), "fabrics": ("ndr",),
            "oversubscription": (1.0,), "knobs": {"tp": (8,), "pp": (4,)}}
    options = [GoodputSpec(storage_write_bytes_per_s=w, spares=s) for w in (5e10, 4e11) for s in (0, 8)]
    best = {}
    for option in options:
        frame = size(SizingSpec(**base, goodput=option), executor="serial").frame
        best[(option.storage_write_bytes_per_s, option.spares)] = float(frame["cost_usd"].min())
    searched = size(SizingSpec(**base, goodput=options[0], goodput_variants=tuple(options)), executor="serial").frame
    assert float(searched["cost_usd"].min()) == pytest.approx(min(best.values()), rel=1e-9)
    assert best[(5e10, 0)] > best[(5e10, 8)]  # no spare: every lost node waits for its repair
