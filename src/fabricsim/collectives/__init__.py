"""Collective operations in nccl-tests conventions (the performance model builds on these)."""

from fabricsim.collectives.conventions import OPS, busbw_factor, check_op, dtype_bytes, in_network_busbw_factor

__all__ = ["OPS", "busbw_factor", "check_op", "dtype_bytes", "in_network_busbw_factor"]
