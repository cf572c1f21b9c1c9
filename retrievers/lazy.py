"""`Lazy`: a heavy object (a model, a connection) built on first use, exactly once, however many threads ask."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    """`get()` builds the value under a lock the first time and returns the same object afterwards. A build that
    raises leaves it unbuilt, so the next `get()` tries again. `Lazy(build, value)` starts with a given value."""

    def __init__(self, build: Callable[[], T], value: T | None = None):
        self._build = build
        self._value = value
        self._built = value is not None
        self._lock = threading.Lock()

    def get(self) -> T:
        if not self._built:
            with self._lock:
                if not self._built:
                    self._value = self._build()
                    self._built = True
        return self._value  # type: ignore[return-value]

    @property
    def built(self) -> bool:
        return self._built
