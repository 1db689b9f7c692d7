"""nccl-tests conventions: which operations exist, what 'size' means, and the bus-bandwidth factors.

From nccl-tests doc/PERFORMANCE.md: busbw = algbw * factor, factor 2(n-1)/n for all_reduce, (n-1)/n for
all_gather, reduce_scatter and all_to_all, 1 for broadcast, reduce and send_recv. 'size' is the per-rank buffer
for all_reduce, broadcast, reduce and send_recv, the total across ranks for all_gather and reduce_scatter, and the
per-rank send buffer (all peers together) for all_to_all.
"""

from __future__ import annotations

from fabricsim.errors import unknown_name_error

OPS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv")

DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
    "int8": 1, "uint8": 1, "int32": 4, "int": 4, "int64": 8, "fp8": 1,
}


OP_SPELLINGS: dict[str, str] = {
    "allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter", "bcast": "broadcast",
    "alltoall": "all_to_all", "sendrecv": "send_recv",
}
"""Other spellings of an operation a user may type: NCCL's API names without 'nccl' (ncclAllReduce, ncclBcast) and
nccl-tests' binary names (alltoall_perf, sendrecv_perf) -- the one spelling rule of every command's ``--op``."""


def parse_op(text: str) -> str:
    """An operation name as typed on a command line -> its canonical name (``OPS``). One rule for every ``--op``:
    any case, '-' or '_', a canonical name, an ``OP_SPELLINGS`` form, or either with nccl-tests' ``_perf`` suffix
    (``all_reduce``, ``All-Reduce``, ``allreduce``, ``all_reduce_perf``, ``alltoall_perf``, ``bcast``)."""
    name = text.strip().lower().replace("-", "_").removesuffix("_perf")
    name = OP_SPELLINGS.get(name, name)
    if name not in OPS:
        raise unknown_name_error("op", text, OPS, field="--op")
    return name


def check_op(op: str) -> str:
    """The canonical op name, or a SpecError listing the allowed ones."""
    name = op.strip().lower().replace("-", "_").replace("alltoall", "all_to_all").replace("sendrecv", "send_recv")
    if name not in OPS:
        raise unknown_name_error("op", op, OPS, field="--op")
    return name


def busbw_factor(op: str, nranks: int) -> float:
    """nccl-tests bus-bandwidth factor for an operation on `nranks` ranks."""
    name = check_op(op)
    n = nranks
    if n < 1:
        raise ValueError("nranks must be at least 1")
    if name == "all_reduce":
        return 2.0 * (n - 1) / n
    if name in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def in_network_busbw_factor(nranks: int) -> float:
    """nccl-tests' factor for in-network all-reduce (NVLS/SHARP), (n-1)/(n+1): the link bandwidth it needs."""
    return (nranks - 1) / (nranks + 1)


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a dtype name as nccl-tests and torch spell it."""
    key = dtype.strip().lower().removeprefix("torch.")
    if key not in DTYPE_BYTES:
        raise unknown_name_error("dtype", dtype, DTYPE_BYTES, field="--dtype")
    return DTYPE_BYTES[key]
