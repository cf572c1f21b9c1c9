"""service/memory.py: the heap settings `cli.py serve` applies (their effect on a server's resident size is measured
by bench/serve_load.py, docs/benchmarks.md). Each case runs in a child process: the test process keeps its own."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
APPLY = "from switchyard.service.memory import limit_heap_growth; print(limit_heap_growth())"


def applied(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", APPLY], env={**clean, **env}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_settings_apply_on_glibc():
    assert applied() == "True"


@pytest.mark.parametrize("name", ["MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"])
def test_an_operators_malloc_variable_wins(name):
    assert applied(**{name: "4"}) == "False"
