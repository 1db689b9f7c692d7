"""Cache keys for objects compared by identity (catalogs, tunings): immutable in practice but unhashable; and a
bounded memo for caches whose key is not the arguments themselves."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")
V = TypeVar("V")


class ByIdentity(Generic[T]):
    """Wraps an object so `functools.lru_cache` keys on the object itself (the key keeps it alive, so its id
    cannot be reused by another object while the entry is cached)."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByIdentity) and other.value is self.value


class BoundedMemo(Generic[V]):
    """A memo keyed by what the caller says a value depends on (``functools.lru_cache`` keys on every argument),
    that starts over once it holds ``limit`` entries."""

    __slots__ = ("limit", "values")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.values: dict[Hashable, V] = {}

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value stored under ``key``, made (and stored) on a miss."""
        try:
            return self.values[key]
        except KeyError:
            if len(self.values) >= self.limit:
                self.values.clear()
            value = self.values[key] = make()
            return value
