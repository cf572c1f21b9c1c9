"""What concurrent requests share is tested by starting threads on one barrier: this runs them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any


def on_one_barrier(work: Callable[[Any], Any], args: Sequence[Any], timeout: float = 60.0) -> list:
    """`work(arg)` for each of `args` in its own thread, all released at once by one barrier; their results in the
    order of `args`. The first exception a thread raised is raised here, once every thread has ended."""
    barrier = threading.Barrier(len(args), timeout=timeout)
    results: list = [None] * len(args)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(args[i])
        except BaseException as exc:  # re-raised below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(args))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
