"""Moving a single-machine deployment's state into PostgreSQL: `switchyard state migrate --from DIR --to URL`.

DIR is the folder where a server without `--state` keeps its files (the index folder, or the upload folder when the
index is on object storage): the key file, the upload jobs' SQLite file, and the paused runs' and conversations'
SQLite files (LangGraph checkpoints). Each is copied into the database `--to` names, which is created or migrated
as a server would. Idempotent: what the database already holds (a key id, a job id, a thread id, a checkpoint id)
is left as it is, so running it twice, or after servers started on the database, adds nothing twice. Unfinished
jobs arrive without an owner, so the first server that starts claims them and runs them (their files are read from
where the old server kept them, and travel with the job from then on).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from switchyard.errors import UsageError
from switchyard.graphs.build import checkpoint_serde
from switchyard.graphs.conversations import CONVERSATIONS_NAME
from switchyard.service.job_store import JOB_STORE_NAME, SqliteJobStore
from switchyard.service.keys import KEYS_NAME, FileKeyStore
from switchyard.service.postgres import PostgresJobStore, PostgresState
from switchyard.service.threads import THREADS_NAME


@dataclass
class Migrated:
    """What one migration copied (`copied`) and found already there (`kept`), by kind."""

    copied: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)

    def count(self, kind: str, copied: bool) -> None:
        counts = self.copied if copied else self.kept
        counts[kind] = counts.get(kind, 0) + 1

    def summary(self) -> str:
        kinds = sorted(set(self.copied) | set(self.kept))
        parts = [f"{kind} {self.copied.get(kind, 0)} copied, {self.kept.get(kind, 0)} already there" for kind in kinds]
        return "; ".join(parts) or "nothing to migrate"


def migrate_state(folder: Path, url: str) -> Migrated:
    """Copy the state files in `folder` into the PostgreSQL database at `url` (idempotent)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"--from {folder}: no such folder (the index folder, or the upload folder of an S3 index)")
    state = PostgresState(url)
    done = Migrated()
    try:
        _keys(folder / KEYS_NAME, state, done)
        _jobs(folder / JOB_STORE_NAME, state, done)
        _threads(folder / THREADS_NAME, state, done)
        _checkpoints(folder / THREADS_NAME, state.checkpointer(), done)
        _checkpoints(folder / CONVERSATIONS_NAME, state.checkpointer(), done)
    finally:
        state.close()
    return done


def _keys(path: Path, state: PostgresState, done: Migrated) -> None:
    if not path.is_file():
        return
    have = state.keys.records()
    for key_id, record in FileKeyStore(path).records().items():
        if key_id in have:
            done.count("keys", copied=False)
            continue
        state.keys.add_record(record)
        done.count("keys", copied=True)


def _jobs(path: Path, state: PostgresState, done: Migrated) -> None:
    if not path.is_file():
        return
    source = SqliteJobStore(path)
    try:
        target = PostgresJobStore(state)
        for job_id in source.ids():
            job = source.load(job_id)
            if job is None or target.load(job_id) is not None:
                done.count("jobs", copied=False)
                continue
            job.owner = None  # unfinished ones: the first server that starts claims them
            target.accept(job, missing_ok=True)
            done.count("jobs", copied=True)
    finally:
        source.close()


def _threads(path: Path, state: PostgresState, done: Migrated) -> None:
    if not path.is_file():
        return
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT id, owner, pipeline, collection, state, expires_at, created, updated FROM threads"
        ).fetchall()
    except sqlite3.OperationalError:  # a file without the table: nothing paused there
        rows = []
    finally:
        conn.close()
    with state.connection() as db:
        for row in rows:
            copied = db.execute(
                "INSERT INTO threads (id, owner, pipeline, collection, state, expires_at, created, updated) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                row,
            ).rowcount
            done.count("paused runs", copied=bool(copied))


def _checkpoints(path: Path, target: BaseCheckpointSaver, done: Migrated) -> None:
    """Every checkpoint of every thread of a SQLite checkpointer file, oldest first, with its pending writes."""
    if not path.is_file():
        return
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        source = SqliteSaver(conn, serde=checkpoint_serde())
        try:
            tuples = list(source.list(None))
        except sqlite3.OperationalError:  # no checkpoint tables
            return
        for item in reversed(tuples):  # list() gives the newest first; parents go in first
            configurable = item.config["configurable"]
            if target.get_tuple(item.config) is not None:
                done.count("checkpoints", copied=False)
                continue
            start = {"thread_id": configurable["thread_id"], "checkpoint_ns": configurable["checkpoint_ns"]}
            parent = item.parent_config or RunnableConfig(configurable=start)
            stored = target.put(parent, item.checkpoint, item.metadata, item.checkpoint["channel_versions"])
            by_task: dict[str, list] = {}
            for task_id, channel, value in item.pending_writes or []:
                by_task.setdefault(task_id, []).append((channel, value))
            for task_id, writes in by_task.items():
                target.put_writes(stored, writes, task_id)
            done.count("checkpoints", copied=True)
    finally:
        conn.close()
