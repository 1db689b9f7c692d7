"""The cache folder's plain-data entries: a hit returns what was stored, a damaged entry is recomputed, data marshal
cannot store is returned uncached, and packaged YAML read through it equals a fresh parse."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from fabricsim import diskcache
from fabricsim.inputs import load_packaged_yaml, load_yaml


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(diskcache.CACHE_ENV, str(tmp_path))
    return tmp_path


def test_hit_damaged_and_unstorable(folder: Path) -> None:
    calls: list[int] = []

    def make() -> dict[str, object]:
        calls.append(1)
        return {"a": [1, 2.5, None, True, "x"]}

    assert diskcache.cached_data("t", "k", make) == make.__call__() and len(calls) == 2
    assert diskcache.cached_data("t", "k", make) == {"a": [1, 2.5, None, True, "x"]} and len(calls) == 2
    (folder / "t" / "k.marshal").write_bytes(b"\x00garbage")
    assert diskcache.cached_data("t", "k", make)["a"][1] == 2.5 and len(calls) == 3
    day = {"d": datetime.date(2026, 12, 6)}
    assert diskcache.cached_data("t", "date", lambda: day) == day
    assert not (folder / "t" / "date.marshal").exists()


def test_packaged_yaml_through_the_cache(folder: Path) -> None:
    root = Path(__file__).resolve().parents[1] / "src" / "fabricsim" / "catalog" / "data"
    for path in sorted(root.glob("*.yaml"))[:4]:
        text = path.read_text(encoding="utf-8")
        first, second = load_packaged_yaml(text, path.name), load_packaged_yaml(text, path.name)
        assert first == second == load_yaml(text, path.name)
    assert len(list((folder / "yaml").glob("*.marshal"))) == 4


def test_old_entries_are_pruned(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diskcache, "KEPT_ENTRIES", 3)
    for i in range(6):
        diskcache.cached_data("p", f"k{i}", lambda i=i: i)
    assert len(list((folder / "p").glob("*.marshal"))) == 3
