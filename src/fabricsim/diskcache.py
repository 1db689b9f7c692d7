"""fabricsim's cache folder (``$FABRICSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/fabricsim`` or ``~/.cache/fabricsim``)
and plain-data entries in it: values of YAML's types (dicts, lists, text, numbers, booleans, None) stored with
`marshal` under a key of their source's content, so a command's start-up skips work it did before. An entry
that cannot be read is recomputed; an unwritable folder only costs recomputing next time."""

from __future__ import annotations

import marshal
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

CACHE_ENV = "FABRICSIM_CACHE_DIR"
KEPT_ENTRIES = 512
"""entries kept in one kind's folder (the newest): each change of a packaged file writes one"""


def cache_dir() -> Path:
    """The cache folder (not created here)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "fabricsim"


def cached_data(kind: str, key: str, make: Callable[[], Any]) -> Any:
    """The plain data stored under ``kind``/``key``, or ``make()``'s, stored for the next process (data marshal
    cannot store, e.g. a YAML date, is returned uncached)."""
    path = cache_dir() / kind / f"{key}.marshal"
    try:
        return marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        pass
    data = make()
    try:
        blob = marshal.dumps(data)
    except ValueError:
        return data
    store(path, blob, pattern="*.marshal", keep=KEPT_ENTRIES)
    return data


def store(path: Path, blob: bytes, *, pattern: str, keep: int) -> None:
    """Write ``blob`` to ``path`` atomically (readers see the old file or the new one, never half of one), then
    delete all but the ``keep`` newest files matching ``pattern`` beside it; an unwritable folder only costs
    recomputing next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False, suffix=".tmp") as handle:
            handle.write(blob)
        os.replace(handle.name, path)
        entries = list(path.parent.glob(pattern))
        if len(entries) > keep:
            entries.sort(key=lambda p: p.stat().st_mtime_ns, reverse=True)
            for old in entries[keep:]:
                old.unlink(missing_ok=True)
    except OSError:
        pass
