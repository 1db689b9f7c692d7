"""Issue 43, items 3 and 18 (collective): the launch floor is per host (a server, or an NVL72 compute tray), never
one thread launching a whole rack; every `collective` row without an error band says why (table and JSON)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from fabricsim.api import collective
from fabricsim.catalog import default_catalog
from fabricsim.cli import app
from fabricsim.collectives import CollectiveModel, group_shape, group_shape_on, host_gpus
from fabricsim.collectives.algorithms import gpus_per_launch_thread, launch_floor
from fabricsim.topology import build_cluster


def _times(system: str, nodes: int, op: str, lo: str = "8", hi: str = "1G") -> np.ndarray:
    result = collective(system=system, nodes=nodes, op=op, min_size=lo, max_size=hi)
    assert result.prediction is not None
    return np.array([r.time_s for r in result.prediction.rows])


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"])
def test_one_nvlink_domain_never_slower_than_the_same_gpus_over_infiniband(op: str) -> None:
    """144 GPUs in one NVLink domain (two racks joined by a second NVLink tier) against the same 144 GPUs as two
    racks joined over InfiniBand: NVLink is the faster network, so no size is slower (it was 553 us vs 68 us at
    1 MiB all_reduce, one thread launching all 144 GPUs)."""
    joined, split = _times("gb200-nvl72@144", 1, op), _times("gb200-nvl72", 2, op)
    assert np.all(joined <= split * (1 + 1e-9))


def test_one_rack_not_slower_than_two_at_one_mib() -> None:
    """One NVL72 rack's 1 MiB all_reduce (per-rank buffer) is not slower than two racks' (it was 4x: 276 us)."""
    one, two = _times("gb200-nvl72", 1, "all_reduce", "1M", "1M"), _times("gb200-nvl72", 2, "all_reduce", "1M", "1M")
    assert one[0] <= two[0]
    assert one[0] < 100e-6


def test_hosts_are_trays_on_rack_scale_systems() -> None:
    """A rack-scale node's host is its compute tray (4 GPUs, the unit `spare_unit_gpus` names); a server is one."""
    cat = default_catalog()
    assert host_gpus(cat.system("gb200-nvl72")) == 4
    assert host_gpus(cat.system("gb200-nvl72@576")) == 4
    assert host_gpus(cat.system("dgx-h100")) == 8
    assert group_shape("gb200-nvl72", 72, catalog=cat).hosts == 18
    assert group_shape("gb200-nvl72@144", 144, catalog=cat).hosts == 36
    assert group_shape("gb200-nvl72", 6, catalog=cat).hosts == 2  # GPUs in order: a tray of 4, then 2
    assert group_shape("gb200-nvl72", 12, ranks_per_node=4, catalog=cat).hosts == 3
    assert group_shape("dgx-h100", 16, catalog=cat).hosts == 2
    assert group_shape("dgx-h100", 8, catalog=cat).on_one_host


def test_launch_floor_counts_gpus_of_one_host_only() -> None:
    """One thread launches every GPU of a group on one host (-g N); a group over several hosts, whether nodes or the
    trays of one rack, runs one process per GPU, so one launch per iteration."""
    cat = default_catalog()
    tuning = cat.tuning("default")
    grace = tuning.launch_s * tuning.launch_scale_by_host_link["nvlink-c2c"]
    tray = group_shape("gb200-nvl72", 4, catalog=cat)  # Azure ND GB200 v6: one tray, -g 4
    assert gpus_per_launch_thread(tray, tuning) == 4
    assert launch_floor(tray, tuning) == pytest.approx(4 * grace)
    for system, gpus in (("gb200-nvl72", 8), ("gb200-nvl72", 72), ("gb200-nvl72@144", 144), ("gb200-nvl72@576", 576)):
        shape = group_shape(system, gpus, catalog=cat)
        assert gpus_per_launch_thread(shape, tuning) == 1, (system, gpus)
        assert launch_floor(shape, tuning) == pytest.approx(grace)
    # servers: unchanged (one host per node)
    assert launch_floor(group_shape("dgx-h100", 8, catalog=cat), tuning) == pytest.approx(8 * tuning.launch_s)
    assert launch_floor(group_shape("dgx-h100", 4, catalog=cat), tuning) == pytest.approx(4 * tuning.launch_s)
    assert launch_floor(group_shape("dgx-h100", 16, catalog=cat), tuning) == pytest.approx(tuning.launch_s)
    # never more GPUs per launching thread than a host holds
    for system in ("gb200-nvl72", "gb300-nvl72", "dgx-h100", "dgx-b200"):
        sysm = cat.system(system)
        for gpus in range(2, sysm.gpus_per_node + 1):
            shape = group_shape(sysm, gpus, catalog=cat)
            assert gpus_per_launch_thread(shape, tuning) <= host_gpus(sysm)


def test_assumptions_say_how_many_gpus_a_thread_launches() -> None:
    cat = default_catalog()
    rack = CollectiveModel(group_shape("gb200-nvl72", 72, catalog=cat), catalog=cat).assumptions("all_reduce",
                                                                                                  "auto", "auto")
    assert rack["hosts"] == 18 and rack["gpus_per_launch_thread"] == 1
    server = CollectiveModel(group_shape("dgx-h100", 8, catalog=cat), catalog=cat).assumptions("all_reduce",
                                                                                                "auto", "auto")
    assert server["hosts"] == 1 and server["gpus_per_launch_thread"] == 8


def test_placed_group_counts_the_trays_it_touches() -> None:
    """On a built rack the hosts are counted from the GPUs' places: 4 GPUs of one tray are one host, one GPU on
    each of 4 trays are four (so one launch each, not 4 from one thread)."""
    topo = build_cluster("gb200-nvl72", nodes=1)
    tray = group_shape_on(topo, [0, 1, 2, 3])
    spread = group_shape_on(topo, [0, 4, 8, 12])
    assert tray.hosts == 1 and tray.on_one_host
    assert spread.hosts == 4 and not spread.on_one_host
    tuning = default_catalog().tuning("default")
    assert launch_floor(spread, tuning) == pytest.approx(launch_floor(tray, tuning) / 4)


@pytest.mark.parametrize("system", ["dgx-h100", "gb200-nvl72"])
def test_every_row_without_a_band_says_why(system: str) -> None:
    """`collective --nodes 2`: each row whose busbw has no band carries the reason in JSON (``*_band.reason``,
    low/high null, as train and infer do) and the table prints that reason under it."""
    args = ["collective", "--system", system, "--nodes", "2", "--op", "all_reduce", "--min", "1M", "--max", "1G"]
    runner = CliRunner()
    out = runner.invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["rows"]
    table = runner.invoke(app, args, env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    unbanded = 0
    for row in rows:
        for key in ("time_s_band", "algbw_bytes_per_s_band", "busbw_bytes_per_s_band"):
            band = row[key]
            if band["low"] is None:
                assert band["high"] is None and band["cases"] == 0
                assert band["reason"].startswith("no comparable published measurement: ")
                assert "are needed for an 80% band" in band["reason"]
        busbw = row["busbw_bytes_per_s_band"]
        if busbw["low"] is None:
            unbanded += 1
            assert f"error band: {busbw['reason']}" in table.output
    assert unbanded > 0  # the sweep's small sizes are latency-bound across nodes, where too few cases exist
