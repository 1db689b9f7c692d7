"""Placement: Megatron-style rank order, group structure, and NVLink-domain spans."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.errors import SpecError
from fabricsim.training.placement import (
    GROUP_KINDS,
    domains_spanned,
    leaves_nvlink,
    node_of,
    place,
    placement_warnings,
    rank_groups,
)
from fabricsim.training.plan import ParallelPlan


def plan(**kw: Any) -> ParallelPlan:
    base: dict[str, Any] = {"seq": 4096, "sequence_parallel": False}
    base.update(kw)
    base.setdefault("gbs", base.get("dp", 1) * 4)
    return ParallelPlan.build(**base)


def test_tp_innermost_groups_are_contiguous() -> None:
    pl = place(plan(tp=8, pp=4, dp=4))
    tp = pl.groups("tp")
    assert tp.shape == (16, 8)
    for row in tp:
        assert np.array_equal(row, np.arange(row[0], row[0] + 8))
        assert row[0] % 8 == 0


def test_group_counts_and_sizes() -> None:
    p = plan(tp=4, cp=2, pp=2, dp=4, ep=4)
    pl = place(p)
    assert p.world_size == 64
    expected = {"tp": (16, 4), "cp": (32, 2), "dp": (16, 4), "dp_cp": (8, 8), "pp": (32, 2),
                "ep": (16, 4), "edp": (32, 2)}
    for kind, shape in expected.items():
        assert pl.groups(kind).shape == shape, kind


@settings(max_examples=60, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    cp=st.sampled_from([1, 2]),
    dp=st.sampled_from([1, 2, 3, 4, 8]),
    pp=st.sampled_from([1, 2, 3]),
    ep_div=st.sampled_from([1, 2, 4]),
    order=st.sampled_from(["tp-cp-ep-dp-pp", "tp-dp-cp-ep-pp", "cp-tp-ep-dp-pp", "tp-pp-ep-dp-cp"]),
)
def test_every_gpu_in_exactly_one_group_per_kind(tp: int, cp: int, dp: int, pp: int, ep_div: int, order: str) -> None:
    ep = ep_div if (dp * cp) % ep_div == 0 else 1
    p = plan(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep, order=order)
    pl = place(p)
    for kind in GROUP_KINDS:
        groups = pl.groups(kind)
        assert np.array_equal(np.sort(groups.ravel()), np.arange(p.world_size)), kind
    # a TP group and a DP group share at most one GPU (orthogonal dimensions)
    tp_of = {int(g): i for i, row in enumerate(pl.groups("tp")) for g in row}
    for row in pl.groups("dp"):
        assert len({tp_of[int(g)] for g in row}) == len(row)


def test_megatron_expert_groups_example() -> None:
    # tp=2, dp=4, ep=2 on 8 GPUs with order tp-cp-ep-dp-pp: Megatron-Core's RankGenerator gives
    # EP groups [0,2],[1,3],[4,6],[5,7] and expert-DP groups [0,4],[1,5],[2,6],[3,7].
    pl = place(plan(tp=2, dp=4, ep=2))
    ep = sorted(map(list, pl.groups("ep").tolist()))
    assert ep == [[0, 2], [1, 3], [4, 6], [5, 7]]
    edp = sorted(map(list, pl.groups("edp").tolist()))
    assert edp == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert sorted(map(list, pl.groups("dp").tolist())) == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_pp_outermost_by_default() -> None:
    pl = place(plan(tp=8, pp=2, dp=2))
    assert sorted(map(list, pl.groups("pp").tolist()))[0] == [0, 16]


def test_custom_order_puts_dp_innermost() -> None:
    pl = place(plan(tp=2, dp=4), order="dp-tp-cp-pp")
    assert pl.groups("dp")[0].tolist() == [0, 1, 2, 3]
    assert pl.groups("tp")[0].tolist() == [0, 4]


def test_order_needs_ep_when_ep_is_used() -> None:
    with pytest.raises(SpecError, match="must name ep"):
        place(plan(dp=4, ep=2), order="tp-cp-dp-pp")


def test_rank_groups_unknown_dimension() -> None:
    with pytest.raises(SpecError, match="not in the order"):
        rank_groups({"tp": 2}, ("tp", "dp"), ("pp",))


def test_nvlink_domain_spans_and_warnings() -> None:
    pl = place(plan(tp=16, dp=2))
    tp = pl.groups("tp")
    assert domains_spanned(tp, 8).tolist() == [2, 2]
    assert leaves_nvlink(tp, 72).tolist() == [False, False]
    warnings = placement_warnings(pl, 8)
    assert warnings == ["TP group of 16 GPUs spans 2 NVLink domains (domain = 8 GPUs): its traffic crosses the "
                        "scale-out network"]
    assert placement_warnings(place(plan(tp=8, dp=4)), 8) == []


def test_ep_group_outside_domain_is_flagged() -> None:
    pl = place(plan(tp=8, dp=4, ep=4))
    assert domains_spanned(pl.groups("ep"), 8).max() == 4
    assert any(w.startswith("EP group of 4 GPUs spans 4 NVLink domains") for w in placement_warnings(pl, 8))


def test_node_of() -> None:
    assert node_of(np.array([0, 7, 8, 71, 72]), 8).tolist() == [0, 0, 1, 8, 9]


@settings(max_examples=80, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    cp=st.sampled_from([1, 2]),
    dp=st.sampled_from([1, 2, 4]),
    pp=st.sampled_from([1, 2]),
    domain=st.sampled_from([1, 2, 4, 8, 16, 72]),
    order=st.sampled_from(["tp-cp-ep-dp-pp", "dp-tp-cp-ep-pp", "cp-tp-dp-pp", "tp-pp-dp-cp"]),
)
def test_fast_domain_check_agrees_with_full_groups(tp: int, cp: int, dp: int, pp: int, domain: int,
                                                   order: str) -> None:
    from fabricsim.training.placement import groups_aligned

    plan = ParallelPlan.build(tp=tp, cp=cp, dp=dp, pp=pp, seq=64, gbs=dp, order=order)
    placement = place(plan)
    for kind in ("tp", "cp"):
        if groups_aligned(placement, kind, domain):
            assert int(domains_spanned(placement.groups(kind), domain).max()) == 1
