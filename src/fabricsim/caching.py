"""Cache keys for objects compared by identity (catalogs, tunings): immutable in practice but unhashable."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


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
