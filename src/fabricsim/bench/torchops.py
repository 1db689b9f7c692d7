"""Each collective as torch.distributed calls on preallocated buffers, plus the data that makes it checkable.

Imports torch: only the harness imports this module, inside a benchmark run.

Buffer placement, as nccl-tests means it (``size`` = nccl-tests size, ``c`` = its elements, ``n`` ranks):
- out-of-place reads a send buffer and writes a separate receive buffer; in-place uses one buffer (for
  all_gather the rank's own chunk of the output is the input, for reduce_scatter its chunk of the input is the
  output, at nccl-tests' offsets).
- torch.distributed has no out-of-place all_reduce, reduce or broadcast: their out-of-place variant copies the
  send buffer into the receive buffer and runs in place (broadcast: only the root copies). torch cannot run
  all_to_all or send/recv on one buffer: their in-place variant receives into a staging buffer and copies back.
  Those copies are inside the measured time; :data:`NOTES` says so in every result.

Check data: element ``i`` of rank ``r``'s full-size input is ``(2*i + 3*r) mod 5`` for reductions (sums of these
stay exact in every supported dtype up to 64 ranks for bfloat16, far beyond for the others; past exactness
floats are compared with a relative tolerance of ``eps * n``) and ``(7*i + 13*r) mod 251`` for pure data
movement (tells up to 251 ranks apart). Both periods are primes, so a chunk of a power-of-two size that lands in
the wrong place does not match by accident.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

TORCH_DTYPES: dict[str, torch.dtype] = {
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}

NOTES: dict[str, str] = {
    "all_reduce": "out-of-place = copy send->recv, then in-place all_reduce (torch has no out-of-place form)",
    "reduce": "out-of-place = copy send->recv, then in-place reduce (torch has no out-of-place form)",
    "broadcast": "out-of-place = root copies send->recv, then broadcast of recv (torch has no out-of-place form)",
    "all_to_all": "in-place = all_to_all_single into a staging buffer, then copy back (torch needs two buffers)",
    "send_recv": "in-place = irecv into a staging buffer while isend from the buffer, then copy back",
}

# Check data: element i of rank r's input is (scale*i + shift*r) mod period. Both periods are primes, so no
# power-of-two chunk is a multiple of them and a chunk landing in the wrong place shows. Reductions use values
# 0..4 (sums stay exact); pure data movement uses 0..250, which tells ranks apart.
NARROW, WIDE = 5, 251
_SHAPES = {NARROW: (2, 3), WIDE: (7, 13)}
_MANTISSA_BITS = {torch.float16: 10, torch.bfloat16: 7, torch.float32: 23, torch.float64: 52}


def _tile(rank: int, start: int, period: int) -> list[int]:
    scale, shift = _SHAPES[period]
    return [(scale * (start + j) + shift * rank) % period for j in range(period)]


def _repeat(tile: list[int], length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``tile`` repeated to ``length`` elements, built on the device in the target dtype (no host-size copy)."""
    small = torch.tensor(tile, dtype=torch.int64).to(dtype).to(device)
    return small.repeat(-(-length // len(tile)))[:length]


def pattern(rank: int, start: int, length: int, dtype: torch.dtype, device: torch.device,
            period: int = WIDE) -> torch.Tensor:
    """Rank ``rank``'s check data at elements ``start .. start+length`` of its input."""
    return _repeat(_tile(rank, start, period), length, dtype, device)


def _sum_pattern(ranks: range, start: int, length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The sum over ``ranks`` of their (narrow) patterns: periodic too, so summed on one period, exactly, then
    repeated (integer dtypes wrap as the reduction does)."""
    total = [sum(column) for column in zip(*(_tile(r, start, NARROW) for r in ranks), strict=True)]
    return _repeat(total, length, dtype, device)


def count_wrong(result: torch.Tensor, expected: torch.Tensor, nranks: int) -> int:
    """Elements of ``result`` that differ from ``expected`` (exact, or within eps*n once sums stop being exact)."""
    if result.dtype.is_floating_point:
        exact_limit = 2 ** (_MANTISSA_BITS[result.dtype] + 1)  # every integer up to this is representable
        if (NARROW - 1) * nranks > exact_limit:
            eps = torch.finfo(result.dtype).eps
            close = torch.isclose(result.float(), expected.float(), rtol=eps * nranks, atol=0.0)
            return int((~close).sum().item())
    return int((result != expected).sum().item())


@dataclass
class Step:
    """One (operation, size, placement) on one rank: run it, or fill check data and read back the result."""

    run: Callable[[], None]
    fill: Callable[[], None]
    result: Callable[[], torch.Tensor | None]  # the view to check on this rank (None: nothing to check here)
    expected: Callable[[], torch.Tensor]


class Buffers:
    """Send, receive and staging buffers for one operation at its largest size, zero-filled."""

    def __init__(self, op: str, max_count: int, nranks: int, dtype: torch.dtype, device: torch.device) -> None:
        send_count = max_count // nranks if op == "all_gather" else max_count
        self.send = torch.zeros(send_count, dtype=dtype, device=device)
        self.recv = torch.zeros(max_count, dtype=dtype, device=device)
        staged = op in ("all_to_all", "send_recv")
        self.staging = torch.zeros(max_count if staged else 0, dtype=dtype, device=device)


def make_step(op: str, count: int, in_place: bool, rank: int, nranks: int, root: int, bufs: Buffers) -> Step:
    """The torch.distributed calls for ``op`` on ``count`` elements (nccl-tests 'count') of ``bufs``."""
    builders = {
        "all_reduce": _all_reduce,
        "reduce": _reduce,
        "broadcast": _broadcast,
        "all_gather": _all_gather,
        "reduce_scatter": _reduce_scatter,
        "all_to_all": _all_to_all,
        "send_recv": _send_recv,
    }
    return builders[op](count, in_place, rank, nranks, root, bufs)


def _all_reduce(c: int, in_place: bool, rank: int, n: int, root: int, b: Buffers) -> Step:
    send, recv = b.send[:c], b.recv[:c]

    def run() -> None:
        if not in_place:
            recv.copy_(send)
        dist.all_reduce(recv)

    def fill() -> None:
        (recv if in_place else send).copy_(pattern(rank, 0, c, recv.dtype, recv.device, NARROW))

    return Step(run, fill, lambda: recv, lambda: _sum_pattern(range(n), 0, c, recv.dtype, recv.device))


def _reduce(c: int, in_place: bool, rank: int, n: int, root: int, b: Buffers) -> Step:
    send, recv = b.send[:c], b.recv[:c]

    def run() -> None:
        if not in_place:
            recv.copy_(send)
        dist.reduce(recv, dst=root)

    def fill() -> None:
        (recv if in_place else send).copy_(pattern(rank, 0, c, recv.dtype, recv.device, NARROW))

    return Step(run, fill, lambda: recv if rank == root else None,
                lambda: _sum_pattern(range(n), 0, c, recv.dtype, recv.device))


def _broadcast(c: int, in_place: bool, rank: int, n: int, root: int, b: Buffers) -> Step:
    send, recv = b.send[:c], b.recv[:c]

    def run() -> None:
        if not in_place and rank == root:
            recv.copy_(send)
        dist.broadcast(recv, src=root)

    def fill() -> None:
        recv.zero_()
        if rank == root:
            (recv if in_place else send).copy_(pattern(root, 0, c, recv.dtype, recv.device))

    return Step(run, fill, lambda: recv, lambda: pattern(root, 0, c, recv.dtype, recv.device))


def _all_gather(c: int, in_place: bool, rank: int, n: int, root: int, b: Buffers) -> Step:
    chunk = c // n
    recv = b.recv[:c]
    mine = recv[rank * chunk:(rank + 1) * chunk] if in_place else b.send[:chunk]

    def run() -> None:
        dist.all_gather_into_tensor(recv, mine)

    def fill() -> None:
        recv.zero_()
        mine.copy_(pattern(rank, 0, chunk, recv.dtype, recv.device))

    def expected() -> torch.Tensor:
        return torch.cat([pattern(s, 0, chunk, recv.dtype, recv.device) for s in range(n)])

    return Step(run, fill, lambda: recv, expected)


def _reduce_scatter(c: int, in_place: bool, rank: int, n: int, root: int, b: Buffers) -> Step:
    chunk = c // n
    data = b.recv[:c] if in_place else b.send[:c]
    out = b.recv[rank * chunk:(rank + 1) * chunk] if in_place else b.recv[:chunk]

    def run() -> None:
        dist.reduce_scatter_tensor(out, data)

    def fill() -> None:
        data.copy_(pattern(rank, 0, c, data.dtype, data.device, NARROW))

    return Step(run, fill, lambda: out, lambda: _sum_pattern(range(n), rank * chunk, chunk, out.dtype, out.device))


def _all_to_all(c: int, in_place: bool, rank: int, n: int, root: int, b: Buffers) -> Step:
    chunk = c // n
    send, recv = (b.recv[:c], b.staging[:c]) if in_place else (b.send[:c], b.recv[:c])
    result = b.recv[:c]

    def run() -> None:
        dist.all_to_all_single(recv, send)
        if in_place:
            result.copy_(recv)

    def fill() -> None:
        send.copy_(pattern(rank, 0, c, send.dtype, send.device))

    def expected() -> torch.Tensor:
        return torch.cat([pattern(s, rank * chunk, chunk, result.dtype, result.device) for s in range(n)])

    return Step(run, fill, lambda: result, expected)


def _send_recv(c: int, in_place: bool, rank: int, n: int, root: int, b: Buffers) -> Step:
    send, recv = (b.recv[:c], b.staging[:c]) if in_place else (b.send[:c], b.recv[:c])
    result = b.recv[:c]
    peer_to, peer_from = (rank + 1) % n, (rank - 1) % n

    def run() -> None:
        ops = [dist.P2POp(dist.isend, send, peer_to), dist.P2POp(dist.irecv, recv, peer_from)]
        for request in dist.batch_isend_irecv(ops):
            request.wait()
        if in_place:
            result.copy_(recv)

    def fill() -> None:
        send.copy_(pattern(rank, 0, c, send.dtype, send.device))

    return Step(run, fill, lambda: result, lambda: pattern(peer_from, 0, c, result.dtype, result.device))
