"""Errors of a benchmark run itself (a rank died or hung): distinct from SpecError, which is bad input."""

from __future__ import annotations


class BenchError(RuntimeError):
    """A measurement failed at run time; the message names the rank and what happened to it."""
