"""Discrete-event simulation of continuous-batching LLM serving with a vLLM-style iteration scheduler.

Each replica runs scheduler iterations back to back on its own clock (a global heap of next-iteration times and
KV-transfer arrivals keeps replicas in order). One iteration, as vLLM V1's ``Scheduler.schedule``:
1. every running request past its prefill decodes one token (decodes first; ``max_num_batched_tokens >=
   max_num_seqs`` so they always fit the budget); when KV blocks run out the newest running request is preempted
   by recompute: its KV is freed and it goes back to the front of the waiting queue, to re-prefill its prompt and
   the tokens it had generated;
2. running requests still in prefill take chunks of the remaining token budget (admission order);
3. waiting requests are admitted first come first served while the budget, ``max_num_seqs`` and free KV blocks
   allow (none when this iteration preempted, as vLLM); with ``chunked_prefill`` off a prompt is admitted whole
   or not at all.
The iteration takes ``StepCost.step_s(...)``. A request's token appears at the end of the iteration that processes
the last of its pending tokens: the first token (TTFT) ends its prefill, then one token per decode iteration.

Decoding requests are kept in closed form: with a per-replica decode tick ``t``, a request's KV length is
``t + a`` and its generated count ``t + b``; the sum of KV lengths, the KV blocks needed at the next tick (a count
per residue of ``a`` modulo the block size) and the finish tick (a heap) are O(1) to O(log n) per iteration, so
an iteration costs O(prefill chunks + finishes), not O(running requests). Runs of decode-only iterations between
events are advanced in a tight loop without the event heap.

Two other policies (``SchedulerConfig``): ``prefill_first`` (vLLM V0, SGLang) runs steps 2-3 alone whenever they
schedule a prompt token and step 1 alone otherwise; ``reserve_full`` admission (TensorRT-LLM's GUARANTEED_NO_EVICT)
admits a request only when the KV blocks of its prompt and whole output fit beside those promised to the running
ones, so nothing is ever preempted. With ``prefix_cache`` a preempted request's full KV blocks stay cached in the
free-block queue: allocations take free blocks oldest freed first (a request's last blocks before its first, as
vLLM frees them in reverse), and on readmission the request recomputes only what was evicted. Prompt tokens in the
prefix cache (``RequestTrace.cached_tokens``) are not computed: a request starts with them as its KV (held,
conservatively, as its own blocks: sharing is not counted), and keeps them through a preemption.

Disaggregated serving (``ServingLayout.disagg = (P, D)``): P prefill replicas run steps 2-3 only; when a prompt's
prefill ends the first token is out (TTFT counts there, as vLLM and DistServe do), the prefill replica frees the
KV, and the request moves to the decode replica with the fewest assigned requests (ties: lowest index), arriving
``StepCost.kv_transfer_s(prompt tokens, same_node)`` later; the wait for the transfer shows in TPOT and e2e. A
decode replica admits transferred requests FCFS when KV blocks allow; a request preempted there re-prefills there.
Data-parallel serving (``replicas = N``): requests go round robin or to the replica with the fewest unfinished
requests (``routing``); the prefill pool of a disaggregated layout is routed the same way.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np

from fabricsim.errors import SpecError
from fabricsim.serving.config import SchedulerConfig, ServingLayout, StepCost
from fabricsim.serving.replica import Replica, evict_blocks, free_blocks
from fabricsim.serving.requests import RequestTrace

PROGRESS_EVERY = 4096  # events between progress reports (a report costs a callback; a run pops millions)

_MIXED, _PREFILL, _DECODE = 0, 1, 2
_EVENT_TRANSFER, _EVENT_REPLICA = 0, 1  # same-time order: KV arrivals are enqueued before a replica schedules


class _Sim:
    """The whole run: request state (flat lists), replicas, the event heap and counters."""

    def __init__(self, trace: RequestTrace, cost: StepCost, decode_cost: StepCost, cfg: SchedulerConfig,
                 layout: ServingLayout, cap_s: float, max_iterations: int,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.progress = progress  # (requests completed, requests in all), every PROGRESS_EVERY events
        self.cfg = cfg
        self.layout = layout
        self.block = cfg.block_size_tokens
        self.budget = cfg.max_num_batched_tokens
        self.max_seqs = cfg.max_num_seqs
        self.chunked = cfg.chunked_prefill
        self.prefill_first = cfg.policy == "prefill_first"
        self.reserve = cfg.admission == "reserve_full"
        self.keep = cfg.prefix_cache
        self.cap_s = cap_s
        self.max_iterations = max_iterations
        n = trace.requests
        ready = trace.ready_s  # a request waiting on its host-tier prefix joins the queue when it has it
        self.order: list[int] = np.argsort(ready, kind="stable").tolist()
        self.arrival = ready[self.order].tolist()
        self.prompt: list[int] = trace.prompt_tokens.tolist()
        self.output: list[int] = trace.output_tokens.tolist()
        self.cached: list[int] = trace.cached.tolist()  # prompt tokens found in the prefix cache
        self.computed = list(self.cached)  # KV tokens held (valid outside the decode set)
        self.generated = [0] * n  # output tokens produced (valid outside the decode set)
        self.first_s = [math.nan] * n
        self.admitted_s = [math.nan] * n  # first scheduled (a client's closed loop sends a request then)
        self.finish_s = [math.nan] * n
        self.epoch = [0] * n  # bumped on preemption: stale finish-heap entries are skipped
        self.admitted = [0] * n  # admission sequence number (newest = largest)
        self.owner = [-1] * n  # replica the request was routed to (prefill pool under disagg)
        self.admit_seq = 0
        self.event_seq = 0
        self.events: list[tuple[float, int, int, int, int]] = []  # (time, kind, seq, replica, request)
        self.preemptions = 0
        self.iterations = 0
        self.batch_seqs = 0
        self.completed = 0
        self.end_s = 0.0
        self.rr = 0
        if layout.disagg is None:
            self.front = [Replica(i, _MIXED, cost, self.block) for i in range(layout.replicas)]
            self.back: list[Replica] = []
        else:
            p, d = layout.disagg
            self.front = [Replica(i, _PREFILL, cost, self.block) for i in range(p)]
            self.back = [Replica(p + i, _DECODE, decode_cost, self.block) for i in range(d)]
        self.replicas = self.front + self.back

    # -- events -------------------------------------------------------------------------------------------------

    def _push(self, time_s: float, kind: int, replica: int, request: int) -> None:
        self.event_seq += 1
        heapq.heappush(self.events, (time_s, kind, self.event_seq, replica, request))

    def _enqueue(self, rep: Replica, rid: int, now: float) -> None:
        """A request joins a replica's waiting queue; an idle replica wakes up now."""
        rep.waiting.append(rid)
        if not rep.busy:
            rep.busy = True
            self._push(now, _EVENT_REPLICA, rep.index, -1)

    def _route(self, rid: int) -> Replica:
        """The front replica for a new request: round robin or fewest unfinished requests (lowest index on ties)."""
        if len(self.front) == 1:
            return self.front[0]
        if self.layout.routing == "round_robin":
            rep = self.front[self.rr % len(self.front)]
            self.rr += 1
            return rep
        return min(self.front, key=lambda r: r.load)

    def run(self) -> None:
        """Process arrivals and events in time order until everything is done or the drain limit is reached."""
        arrival = self.arrival  # ready times, sorted; the request at position ptr is order[ptr]
        order = self.order
        n = len(arrival)
        ptr = 0
        events = self.events
        replicas = self.replicas
        cap_s = self.cap_s
        inf = math.inf
        popped = 0
        while True:
            t_evt = events[0][0] if events else inf
            t_arr = arrival[ptr] if ptr < n else inf
            if t_arr <= t_evt:
                if t_arr > cap_s:
                    break
                rid = order[ptr]
                rep = self._route(rid)
                rep.load += 1
                self.owner[rid] = rep.index
                self._enqueue(rep, rid, t_arr)
                ptr += 1
                continue
            if t_evt > cap_s or self.iterations >= self.max_iterations:
                break
            now, kind, _, index, rid = heapq.heappop(events)
            self.end_s = now
            popped += 1
            if self.progress is not None and not popped % PROGRESS_EVERY:
                self.progress(self.completed, n)
            rep = replicas[index]
            if kind == _EVENT_TRANSFER:
                self._enqueue(rep, rid, now)
                continue
            self._complete(rep, now)
            next_s = arrival[ptr] if ptr < n else inf
            if events and events[0][0] < next_s:
                next_s = events[0][0]
            end = self._schedule(rep, now, min(next_s, cap_s))
            if end is None:
                rep.busy = False
            else:
                self._push(end, _EVENT_REPLICA, index, -1)

    # -- one replica --------------------------------------------------------------------------------------------

    def _finish(self, rep: Replica, rid: int, now: float) -> None:
        """A request's last token is out: record it and release its replica slot."""
        self.finish_s[rid] = now
        self.completed += 1
        rep.load -= 1
        rep.reserved -= rep.promised.pop(rid, 0)

    def _complete(self, rep: Replica, now: float) -> None:
        """End the in-flight iteration at now: decode ticks, finished requests, prefill chunks' tokens."""
        block = self.block
        if rep.plan_decodes:
            rep.plan_decodes = 0
            rep.tick += 1
            tick = rep.tick
            heap = rep.finish_heap
            epoch = self.epoch
            while heap and heap[0][0] <= tick:
                _, ep, rid = heapq.heappop(heap)
                if ep != epoch[rid] or rid not in rep.dec_a:
                    continue
                a = rep.dec_a.pop(rid)
                del rep.dec_b[rid]
                rep.sum_a -= a
                rep.res_cnt[a % block] -= 1
                rep.used_blocks -= -(-(tick + a) // block)
                if rep.kept:
                    free_blocks(rep, -(-(tick + a) // block))
                self.generated[rid] = self.output[rid]
                self.computed[rid] = tick + a
                self._finish(rep, rid, now)
        if not rep.plan_chunks:
            return
        computed = self.computed
        generated = self.generated
        prompt = self.prompt
        output = self.output
        for rid, chunk in rep.plan_chunks:
            c = computed[rid] + chunk
            computed[rid] = c
            g = generated[rid]
            if c < prompt[rid] + g:
                continue  # partial prefill: stays in rep.prefilling
            if rid in rep.prefilling:
                rep.prefilling.remove(rid)
            g += 1
            generated[rid] = g
            if g == 1:
                self.first_s[rid] = now
            if g >= output[rid]:
                rep.used_blocks -= -(-c // block)
                if rep.kept:
                    free_blocks(rep, -(-c // block))
                self._finish(rep, rid, now)
            elif rep.role == _PREFILL:
                rep.used_blocks -= -(-c // block)
                if rep.kept:
                    free_blocks(rep, -(-c // block))
                rep.load -= 1
                rep.reserved -= rep.promised.pop(rid, 0)
                dest = min(self.back, key=lambda r: r.load)
                dest.load += 1
                self._push(now + dest.cost.kv_transfer_s(c, self.layout.kv_same_node), _EVENT_TRANSFER,
                           dest.index, rid)
            else:
                tick = rep.tick
                a = c - tick
                b = g - tick
                rep.dec_a[rid] = a
                rep.dec_b[rid] = b
                rep.sum_a += a
                rep.res_cnt[a % block] += 1
                heapq.heappush(rep.finish_heap, (output[rid] - b, self.epoch[rid], rid))
        rep.plan_chunks = []

    def _preempt(self, rep: Replica, rid: int) -> None:
        """Preempt by recompute: free the request's KV (with a prefix cache its full blocks stay cached until
        evicted), send it to the front of the waiting queue."""
        block = self.block
        if rid in rep.dec_a:
            a = rep.dec_a.pop(rid)
            b = rep.dec_b.pop(rid)
            rep.sum_a -= a
            rep.res_cnt[a % block] -= 1
            held = rep.tick + a
            self.generated[rid] = rep.tick + b
        else:
            rep.prefilling.remove(rid)
            held = self.computed[rid]
        blocks = -(-held // block)
        rep.used_blocks -= blocks
        full = held // block if self.keep else 0
        if full or rep.kept:
            if not rep.kept:  # the queue so far: every free block, all of them older than this request's
                rep.free_queue.append([-1, rep.cap_blocks - rep.used_blocks - blocks])
            if blocks > full:
                free_blocks(rep, blocks - full)  # its partial last block is not cached
            if full:
                free_blocks(rep, full, rid)
        self.computed[rid] = self.cached[rid]  # the trace's prefix stays cached
        rep.reserved -= rep.promised.pop(rid, 0)
        self.epoch[rid] += 1
        self.preemptions += 1
        rep.waiting.appendleft(rid)

    def _newest_running(self, rep: Replica) -> int:
        """The running request admitted last (vLLM preempts from the tail of its running list)."""
        admitted = self.admitted
        newest = -1
        best = -1
        for rid in rep.dec_a:
            if admitted[rid] > best:
                best, newest = admitted[rid], rid
        for rid in rep.prefilling:
            if admitted[rid] > best:
                best, newest = admitted[rid], rid
        return newest

    def _schedule(self, rep: Replica, now: float, horizon_s: float) -> float | None:
        """Plan the next iteration from now; returns its end time (None: nothing to run, the replica idles).

        Decode-only iterations that end before horizon_s (the next arrival or event) with no finish due and KV to
        spare are run right here, without the event heap.
        """
        if self.prefill_first and rep.role == _MIXED and (rep.prefilling or rep.waiting):
            plan = self._plan_prompts(rep, self.budget, 0, False, now)
            if plan[0]:
                return self._start(rep, now, plan, 0, 0)
        block = self.block
        res_cnt = rep.res_cnt
        preempted = False
        seqs = 0
        decode_seqs = 0
        decode_kv = 0
        # 1. decodes, preempting the newest running request while the KV blocks for one more token do not fit
        if rep.dec_a:
            while True:
                need = res_cnt[-rep.tick % block]
                if rep.used_blocks + need <= rep.cap_blocks or not rep.dec_a:
                    break
                self._preempt(rep, self._newest_running(rep))
                preempted = True
            n = len(rep.dec_a)
            if n:
                if not rep.prefilling and not rep.waiting and not preempted:
                    return self._decode_run(rep, now, horizon_s)
                rep.used_blocks += need
                if rep.kept:
                    evict_blocks(rep, need)
                decode_seqs = n
                decode_kv = n * (rep.tick + 1) + rep.sum_a
                seqs = n
                rep.plan_decodes = n
                if self.prefill_first and rep.role == _MIXED:  # the prompts found no room: decodes alone
                    return self._start(rep, now, (seqs, [], 0, 0.0, 0, 0), decode_seqs, decode_kv)
        return self._start(rep, now, self._plan_prompts(rep, self.budget - seqs, seqs, preempted, now),
                           decode_seqs, decode_kv)

    def _start(self, rep: Replica, now: float, plan: tuple[int, list[tuple[int, int]], int, float, int, int],
               decode_seqs: int, decode_kv: int) -> float | None:
        """Start the planned iteration (sequences, chunks, prompt tokens, pairs, and the decodes of KV transferred
        in besides ``decode_seqs`` over ``decode_kv`` tokens); its end time, or None when it is empty."""
        seqs, chunks, prefill_tokens, attn_pairs, moved_seqs, moved_kv = plan
        if not seqs:
            return None
        rep.plan_chunks = chunks
        dur = rep.cost.step_s(prefill_tokens, attn_pairs, decode_seqs + moved_seqs, decode_kv + moved_kv)
        if not 0.0 < dur < math.inf:
            raise SpecError(f"step time must be finite and > 0 s, got {dur!r}", field="step_s")
        self.iterations += 1
        self.batch_seqs += seqs
        return now + dur

    def _plan_prompts(self, rep: Replica, budget: int, seqs: int, preempted: bool, now: float
                      ) -> tuple[int, list[tuple[int, int]], int, float, int, int]:
        """Steps 2-3 with ``budget`` tokens left after ``seqs`` decodes: (sequences in all, chunks, prompt tokens,
        causal pairs, decodes of KV transferred in, their KV tokens)."""
        block = self.block
        chunks: list[tuple[int, int]] = []
        prefill_tokens = 0
        attn_pairs = 0.0
        moved_seqs = moved_kv = 0
        computed = self.computed
        generated = self.generated
        prompt = self.prompt
        # 2. running prefills take chunks; a KV shortfall preempts the newest not yet scheduled (or this one)
        i = 0
        while i < len(rep.prefilling) and budget > 0:
            rid = rep.prefilling[i]
            past = computed[rid]
            chunk = min(prompt[rid] + generated[rid] - past, budget)
            need = -(-(past + chunk) // block) - (-(-past // block))
            while rep.used_blocks + need > rep.cap_blocks:
                self._preempt(rep, rep.prefilling[-1])
                preempted = True
                if len(rep.prefilling) <= i:
                    break
            if len(rep.prefilling) <= i:
                break
            rep.used_blocks += need
            if rep.kept:
                evict_blocks(rep, need)
            chunks.append((rid, chunk))
            prefill_tokens += chunk
            attn_pairs += chunk * (past + chunk / 2.0)
            budget -= chunk
            seqs += 1
            i += 1
        # 3. admit waiting requests FCFS (not after a preemption, unless nothing else would run)
        if rep.waiting and (not preempted or seqs == 0):
            running = len(rep.dec_a) + len(rep.prefilling)
            waiting = rep.waiting
            while waiting and budget > 0 and running < self.max_seqs:
                rid = waiting[0]
                past = computed[rid]
                seg = rep.kept.get(rid) if rep.kept else None
                if seg is not None:  # its blocks not yet evicted are found in the cache (at least one token is run)
                    past = max(past, min(seg[1] * block, prompt[rid] + generated[rid] - 1))
                pending = prompt[rid] + generated[rid] - past
                if not self.chunked and pending > budget:
                    break
                chunk = min(pending, budget)
                need = -(-(past + chunk) // block)
                if rep.used_blocks + need > rep.cap_blocks:
                    break
                if self.reserve:  # the whole request's KV (prompt and output; a prefill pool: the prompt)
                    full = prompt[rid] + (generated[rid] if rep.role == _PREFILL else self.output[rid] - 1)
                    promise = -(-max(full, past + chunk) // block)
                    if rep.reserved + promise > rep.cap_blocks:
                        break
                    rep.reserved += promise
                    rep.promised[rid] = promise
                waiting.popleft()
                rep.used_blocks += need
                if seg is not None:  # its cached blocks leave the free queue; the rest are allocated
                    computed[rid] = past
                    del rep.kept[rid]
                    fresh, seg[1] = need - seg[1], 0
                    evict_blocks(rep, fresh)
                elif rep.kept:
                    evict_blocks(rep, need)
                self.admit_seq += 1
                self.admitted[rid] = self.admit_seq
                if math.isnan(self.admitted_s[rid]):  # its first admission
                    self.admitted_s[rid] = now
                running += 1
                seqs += 1
                budget -= chunk
                chunks.append((rid, chunk))
                if generated[rid] and pending == 1:  # KV transferred in: this is its first decode
                    moved_seqs += 1
                    moved_kv += past + 1
                else:
                    rep.prefilling.append(rid)
                    prefill_tokens += chunk
                    attn_pairs += chunk * (past + chunk / 2.0)
        return seqs, chunks, prefill_tokens, attn_pairs, moved_seqs, moved_kv

    def _decode_run(self, rep: Replica, now: float, horizon_s: float) -> float:
        """Decode-only iterations from now: run those ending before horizon_s inline; return the last one's end."""
        block = self.block
        step_s = rep.cost.step_s
        res_cnt = rep.res_cnt
        n = len(rep.dec_a)
        heap = rep.finish_heap
        first_finish = heap[0][0] if heap else math.inf  # may be stale: stopping early is harmless
        cap = rep.cap_blocks
        while True:
            need = res_cnt[-rep.tick % block]
            dur = step_s(0, 0.0, n, n * (rep.tick + 1) + rep.sum_a)
            if not 0.0 < dur < math.inf:
                raise SpecError(f"step time must be finite and > 0 s, got {dur!r}", field="step_s")
            rep.used_blocks += need
            if rep.kept:
                evict_blocks(rep, need)
            self.iterations += 1
            self.batch_seqs += n
            end = now + dur
            if end >= horizon_s or rep.tick + 1 >= first_finish or self.iterations >= self.max_iterations:
                rep.plan_decodes = n
                return end
            rep.tick += 1
            now = end
            if rep.used_blocks + res_cnt[-rep.tick % block] > cap:
                return now  # the next tick needs a preemption: a wake-up at now (nothing in flight) does it
