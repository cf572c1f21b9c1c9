"""Heap settings for a long-running server process (`switchyard serve` calls `limit_heap_growth` before it starts; a
library never changes its host, so nothing here runs on import).

Why: the native code a server runs on many threads (LanceDB's writer and index updates, the embedder's runtime)
frees blocks of many sizes. With glibc's defaults (up to 8 arenas per core, an mmap threshold that rises to 32 MiB
as large blocks are freed), that memory stays in fragmented heaps instead of going back to the system, so the
resident size of a server that ingests uploads grows with every write (docs/benchmarks.md, "The HTTP service under
load"). Two arenas and a fixed 128 KiB mmap and trim threshold keep it level, at a cost too small to measure there.
Variables `MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` set by the operator win: then
nothing is changed.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's <malloc.h>
OPERATOR_SETTINGS = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def limit_heap_growth(arenas: int = 2, threshold: int = 128 * 1024) -> bool:
    """Apply the settings through glibc's `mallopt`; False (nothing changed) where the C library is not glibc or
    the operator set any of `OPERATOR_SETTINGS`."""
    if any(name in os.environ for name in OPERATOR_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl, macOS, Windows
        return False
    settings = ((M_ARENA_MAX, arenas), (M_MMAP_THRESHOLD, threshold), (M_TRIM_THRESHOLD, threshold))
    applied = [mallopt(param, value) == 1 for param, value in settings]  # each one tried, whatever the others did
    return all(applied)
