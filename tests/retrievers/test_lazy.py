"""Lazy: built once under a lock, even when many threads ask at the same moment."""

import threading
import time

import pytest

from switchyard.retrievers.lazy import Lazy


class TestLazy:
    def test_built_once_for_barrier_started_threads(self):
        builds = []

        def build():
            builds.append(1)
            time.sleep(0.05)  # a slow load: the other threads arrive while it runs
            return object()

        lazy, barrier, got = Lazy(build), threading.Barrier(8), []

        def worker():
            barrier.wait()
            got.append(lazy.get())

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(builds) == 1 and len({id(g) for g in got}) == 1 and lazy.built

    def test_given_value_is_used_and_a_failed_build_is_retried(self):
        given = object()
        assert Lazy(lambda: pytest.fail("must not build"), given).get() is given
        attempts = []

        def flaky():
            attempts.append(1)
            if len(attempts) == 1:
                raise OSError("disk busy")
            return "ok"

        lazy = Lazy(flaky)
        with pytest.raises(OSError):
            lazy.get()
        assert not lazy.built and lazy.get() == "ok" and len(attempts) == 2
