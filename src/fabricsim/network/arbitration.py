"""Traffic classes on a link: InfiniBand service levels on virtual lanes with weighted arbitration, Ethernet
priorities with ETS weights.

Each class has its own queue (its own buffers and credits, so back-pressure in one class never pauses another)
and a weight. A link serves its busy classes in proportion to their weights and hands a class's unused share to
the others (work-conserving weighted round robin, as the VL arbitration table and ETS do). In the fluid model each
(link, class) pair is a virtual link whose capacity is the class's allotment: start from the weighted split among
the classes present on the link, fill the rates, then give each link's slack (what classes bound elsewhere left
unused) to its saturated classes by weight, and fill again, for a few rounds. Within a class flows share max-min
fairly as on a physical link.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fabricsim.network.maxmin import FloatArray, IntArray

ROUNDS = 8
"""refills that hand out unused class shares at most"""
SLACK_RTOL = 1e-6
"""slack below this share of a link's capacity is not handed out"""


def class_rates(capacity: FloatArray, num_classes: int, class_weights: FloatArray, virtual_link: IntArray,
                entry_load: Callable[[FloatArray], FloatArray],
                fill: Callable[[FloatArray], FloatArray]) -> FloatArray:
    """Rates of the flows when each physical link l serves class c through virtual link ``l * num_classes + c``.

    `entry_load(rate)` is every entry's bytes/s at those rates, `fill(virtual capacity)` the flows' rates with the
    virtual links at those capacities (max-min, or held by back-pressure)."""
    links, k = len(capacity), num_classes
    present = np.bincount(virtual_link, minlength=links * k).reshape(links, k) > 0
    w = np.where(present, class_weights[None, :], 0.0)
    total = w.sum(axis=1, keepdims=True)
    allot = np.divide(capacity[:, None] * w, total, out=np.zeros_like(w), where=total > 0)
    rate = fill(allot.ravel())
    for _ in range(ROUNDS):
        used = np.bincount(virtual_link, weights=entry_load(rate), minlength=links * k).reshape(links, k)
        saturated = present & (used >= allot * (1.0 - SLACK_RTOL))
        slack = capacity - used.sum(axis=1)
        share = np.where(saturated, w, 0.0)
        share_total = share.sum(axis=1)
        give = (slack > SLACK_RTOL * capacity) & (share_total > 0)
        if not give.any():
            break
        extra = np.divide(slack[:, None] * share, share_total[:, None], out=np.zeros_like(share),
                          where=give[:, None])
        allot = np.where(give[:, None], np.where(saturated, used + extra, used), allot)
        rate = fill(allot.ravel())
    return rate
