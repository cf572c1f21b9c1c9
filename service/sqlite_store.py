"""How the service's SQLite stores (background jobs, paused runs) open their file and write: one connection shared
by the store's threads (each store serializes its calls with its own lock), WAL so that readers in other processes
never wait for a writer, and writes as `BEGIN IMMEDIATE` transactions so that two processes never interleave."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection):
    """One write transaction: committed when the block ends, rolled back if it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
