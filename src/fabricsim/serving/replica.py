"""One serving replica's scheduler state, and the free-block queue a prefix cache keeps: which freed KV blocks
are reused first, so a preempted request finds what was not yet reused."""

from __future__ import annotations

from collections import deque

from fabricsim.serving.config import StepCost


class Replica:
    """One replica's scheduler state: waiting queue, prefilling requests, the closed-form decode set, KV blocks."""

    __slots__ = ("busy", "cap_blocks", "cost", "dec_a", "dec_b", "finish_heap", "free_queue", "index", "kept",
                 "load", "plan_chunks", "plan_decodes", "prefilling", "promised", "res_cnt", "reserved", "role",
                 "sum_a", "tick", "used_blocks", "waiting")

    def __init__(self, index: int, role: int, cost: StepCost, block: int) -> None:
        self.index = index
        self.role = role
        self.cost = cost
        self.cap_blocks = int(cost.kv_capacity_tokens) // block
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []  # running, prefill pending; admission order
        self.tick = 0  # decode iterations run
        self.dec_a: dict[int, int] = {}  # decoding request -> KV tokens - tick
        self.dec_b: dict[int, int] = {}  # decoding request -> generated tokens - tick
        self.res_cnt = [0] * block  # decoding requests by a mod block (who needs a block next tick)
        self.sum_a = 0
        self.finish_heap: list[tuple[int, int, int]] = []  # (finish tick, epoch, request)
        self.used_blocks = 0
        self.load = 0  # requests assigned here and not finished or handed off
        self.busy = False  # an iteration (or a wake-up) is on the event heap
        self.plan_chunks: list[tuple[int, int]] = []  # in-flight iteration: (request, tokens) besides decodes
        self.plan_decodes = 0  # in-flight iteration: decode-set members stepped
        self.reserved = 0  # reserve_full: KV blocks promised to running requests
        self.promised: dict[int, int] = {}  # reserve_full: request -> blocks promised
        # prefix_cache: while a preempted request keeps cached blocks, the free blocks in eviction order as
        # [owner, count] segments (owner -1: nothing anyone will reuse); ``kept`` maps a request to its segment
        self.free_queue: deque[list[int]] = deque()
        self.kept: dict[int, list[int]] = {}


def evict_blocks(rep: Replica, blocks: int) -> None:
    """``blocks`` free blocks were allocated: take them from the head of the free queue, evicting kept ones."""
    queue = rep.free_queue
    while blocks > 0 and queue:
        seg = queue[0]
        if seg[1] > blocks:
            seg[1] -= blocks
            break
        blocks -= seg[1]
        queue.popleft()
        if seg[0] >= 0 and rep.kept.get(seg[0]) is seg:
            del rep.kept[seg[0]]
    if not rep.kept:  # nothing kept: the order of free blocks no longer matters
        queue.clear()

def free_blocks(rep: Replica, blocks: int, owner: int = -1) -> None:
    """``blocks`` blocks went back to the free queue's tail (kept for ``owner`` when it is >= 0)."""
    queue = rep.free_queue
    if owner >= 0:
        seg = [owner, blocks]
        queue.append(seg)
        rep.kept[owner] = seg
    elif queue and queue[-1][0] < 0:
        queue[-1][1] += blocks
    else:
        queue.append([-1, blocks])
