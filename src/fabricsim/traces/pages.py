"""numpy's huge pages off while a trace is read and summarised. numpy asks Linux for transparent huge pages for
every array of 4 MB or more (``madvise``); where the kernel then compacts memory to find them (``defrag`` set to
``madvise``, the usual default) and memory is fragmented, the first touch of such an array stalls: a 1 GB trace's
summary allocates many, and spent 1.2-1.8 s of its 2.6-3.3 s in the kernel, against 1.5 s in all with them off
(benchmarks/bench_trace_import.py). Only the speed changes: the arrays are the same. numpy's own switch (its
environment variable NUMPY_MADVISE_HUGEPAGE=0 at import) is turned off for the duration and restored after, once
the last of any concurrent users is done; where numpy has no such switch nothing is changed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_users = 0
_saved = True


def _switch() -> Callable[[bool], bool] | None:
    """numpy's setter (returns the previous setting), or None."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray  # type: ignore[no-redef]
    setter: Any = getattr(multiarray, "_set_madvise_hugepage", None)
    return setter if callable(setter) else None


@contextmanager
def small_pages() -> Iterator[None]:
    """Arrays allocated inside get ordinary pages (nested and concurrent uses restore the setting once)."""
    global _users, _saved
    switch = _switch()
    if switch is None:
        yield
        return
    with _lock:
        if _users == 0:
            _saved = bool(switch(False))
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                switch(_saved)
