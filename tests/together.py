"""What concurrent requests share is tested by starting threads together (one barrier releases them at once)
rather than hoping they overlap."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

A = TypeVar("A")
T = TypeVar("T")


def run_together(n: int, fn: Callable[[int], T], timeout: float = 600) -> list[T]:
    """Call fn(i) for i in range(n) from n threads released together by one barrier; their results in order. The
    first error any thread raised is raised here, after every thread has ended; a thread still running after
    `timeout` seconds is a TimeoutError (never a missing result)."""
    barrier, results, errors = threading.Barrier(n, timeout=60), [None] * n, []

    def worker(i: int) -> None:
        try:
            barrier.wait()
            results[i] = fn(i)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    if errors:
        raise errors[0]
    if any(t.is_alive() for t in threads):
        raise TimeoutError(f"{sum(t.is_alive() for t in threads)} of {n} threads still running after {timeout} s")
    return results  # type: ignore[return-value]


def on_one_barrier(work: Callable[[A], T], args: Sequence[A], timeout: float = 600) -> list[T]:
    """`work(arg)` for each of `args` in its own thread, all released at once (run_together); results in order."""
    return run_together(len(args), lambda i: work(args[i]), timeout)


def eventually(seconds: float, condition: Callable[[], bool], ignore: tuple[type[BaseException], ...] = ()) -> bool:
    """Whether `condition()` turns true within `seconds` (polled every 50 ms); exceptions of the `ignore` types
    count as not yet."""
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
