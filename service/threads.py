"""The service's paused runs (graph.router.approve): LangGraph's checkpoints of the paused runs and one row per run
(table `threads`): who started it, on which pipeline and collection, its state and when its pause expires. Both
outlive the process, so a pause survives a server restart. `PausedRuns` is the interface; `SqlitePausedRuns` keeps
them in one SQLite file beside the index, `.switchyard-threads.sqlite3` (`threads_path`;
`langgraph-checkpoint-sqlite`'s `SqliteSaver`, its own tables), and service/postgres.py's `PostgresPausedRuns` in
the state database several servers share, so a run paused through one server is answered through another.

A thread's state: `paused` (waits for an answer until `expires_at`), `running` (one resume is under way: a second
one gets 409), `done`, `expired` (never resumed in time; its checkpoints are deleted) or `failed`. `claim` turns
`paused` into `running` in one UPDATE, so of two resumes at once, in one process or two, exactly one proceeds.
A live resume ends within the request timeout, so a `running` claim older than `stale_after_s` belongs to a process
that died mid-resume: `get` reports that thread `failed` (its checkpoints deleted) instead of "being resumed" forever.
"""

from __future__ import annotations

import abc
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from switchyard.errors import StoreError, first_line
from switchyard.graphs.build import checkpoint_serde
from switchyard.service.settings import beside_index
from switchyard.service.sqlite_store import connect, write_transaction

THREADS_NAME = ".switchyard-threads.sqlite3"
KEEP_FINISHED_S = 30 * 86400  # rows of finished threads are forgotten after 30 days

_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, pipeline TEXT NOT NULL, collection TEXT NOT NULL,
    state TEXT NOT NULL, expires_at REAL NOT NULL, created REAL NOT NULL, updated REAL NOT NULL)
"""


@dataclass
class Thread:
    id: str
    owner: str  # the principal (key) that started it: only it may see or resume it
    pipeline: str
    collection: str
    state: str  # paused | running | done | expired | failed
    expires_at: float

    def expired(self) -> bool:
        return self.state == "expired" or (self.state == "paused" and time.time() >= self.expires_at)


def threads_path(store_uri: str, upload_dir: Path) -> Path:
    """The paused runs' file, beside the index."""
    return beside_index(store_uri, upload_dir, THREADS_NAME)


class PausedRuns(abc.ABC):
    """The record of paused runs, and the LangGraph checkpointer (`checkpointer`) their graphs pause into."""

    checkpointer: BaseCheckpointSaver
    stale_after_s: float

    @abc.abstractmethod
    def _write(self, sql: str, params: tuple) -> int:
        """Run one write statement (qmark parameters) in a transaction; the rows it changed."""

    @abc.abstractmethod
    def _fetchone(self, sql: str, params: tuple) -> tuple | None:
        """The first row of one query (qmark parameters), or None."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def _forget_finished(self) -> None:
        """Rows of threads that ended more than KEEP_FINISHED_S ago go (a store calls this when it opens)."""
        self._write(
            "DELETE FROM threads WHERE state NOT IN ('paused', 'running') AND updated < ?",
            (time.time() - KEEP_FINISHED_S,),
        )

    def add(self, thread_id: str, owner: str, pipeline: str, collection: str, expires_at: float) -> None:
        now = time.time()
        self._write(
            "INSERT INTO threads (id, owner, pipeline, collection, state, expires_at, created, updated) "
            "VALUES (?, ?, ?, ?, 'paused', ?, ?, ?)",
            (thread_id, owner, pipeline, collection, expires_at, now, now),
        )

    def get(self, thread_id: str) -> Thread | None:
        row = self._fetchone(
            "SELECT id, owner, pipeline, collection, state, expires_at, updated FROM threads WHERE id = ?",
            (thread_id,),
        )
        if row is None:
            return None
        thread, claimed_at = Thread(*row[:-1]), row[-1]
        if thread.state == "running" and claimed_at < time.time() - self.stale_after_s:
            self.finish(thread.id, "failed")  # its resume died with its process
            thread.state = "failed"
        return thread

    def claim(self, thread_id: str) -> bool:
        """paused -> running, if it still waits and has not expired; False when another resume got it first."""
        return (
            self._write(
                "UPDATE threads SET state = 'running', updated = ? WHERE id = ? AND state = 'paused' "
                "AND expires_at > ?",
                (time.time(), thread_id, time.time()),
            )
            == 1
        )

    def paused(self, thread_id: str, expires_at: float) -> None:
        self._write(
            "UPDATE threads SET state = 'paused', expires_at = ?, updated = ? WHERE id = ?",
            (expires_at, time.time(), thread_id),
        )

    def finish(self, thread_id: str, state: str) -> None:
        """done, expired or failed; the run's checkpoints are deleted."""
        self._write("UPDATE threads SET state = ?, updated = ? WHERE id = ?", (state, time.time(), thread_id))
        self.checkpointer.delete_thread(thread_id)


class SqlitePausedRuns(PausedRuns):
    def __init__(self, path: Path, stale_after_s: float = 3600.0):
        self.path = Path(path)
        self.stale_after_s = stale_after_s
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = connect(self.path)
            # LangGraph's saver gets a connection of its own (it serializes its calls with its own lock)
            self._saver = SqliteSaver(connect(self.path), serde=checkpoint_serde())
            self._saver.setup()
            self.checkpointer = self._saver
            self._write(_SCHEMA, ())
            self._forget_finished()
        except (OSError, sqlite3.Error) as exc:  # e.g. a read-only index folder: one clear line at start
            raise StoreError(f"cannot keep paused runs in {self.path}: {first_line(exc)}") from exc

    def _write(self, sql: str, params: tuple) -> int:
        with self._lock, write_transaction(self._conn) as db:
            return db.execute(sql, params).rowcount

    def _fetchone(self, sql: str, params: tuple) -> tuple | None:
        with self._lock:
            return self._conn.execute(sql, params).fetchone()

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        self._saver.conn.close()
