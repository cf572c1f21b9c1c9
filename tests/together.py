"""Start threads together (a barrier releases them at once) rather than hoping they overlap."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def run_together(n: int, fn: Callable[[int], T], timeout: float = 120) -> list[T]:
    """Call fn(i) for i in range(n) from n threads released together; their results in order. The first error
    any thread raised is raised here, after every thread has ended."""
    barrier, results, errors = threading.Barrier(n), [None] * n, []

    def worker(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = fn(i)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    if errors:
        raise errors[0]
    return results


def eventually(seconds: float, condition: Callable[[], bool], ignore: tuple[type[BaseException], ...] = ()) -> bool:
    """Whether `condition()` turns true within `seconds` (polled every 50 ms); exceptions of the `ignore` types
    count as not yet."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        try:
            if condition():
                return True
        except ignore:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
