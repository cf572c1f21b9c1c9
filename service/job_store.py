"""The durable record of upload jobs, so a job outlives the process that ran it and `GET /v1/jobs/{id}` answers after
a restart. `JobStore` is the interface; `SqliteJobStore` below is the embedded default (one machine), and
service/postgres.py's `PostgresJobStore` the one servers on several machines share (`serve --state`), where a job's
owner holds a lease and the files' bytes travel with the job.

`SqliteJobStore`: one SQLite file (stdlib `sqlite3`, WAL).

Where: `<index>/.switchyard-jobs.sqlite3` when the index is a local folder; `<upload_dir>/.switchyard-jobs.sqlite3`
when it is on object storage (s3://, gs://, ...), since SQLite needs a local file (`job_store_path`).

Each store instance is an *owner*: it holds an exclusive `flock` on its own lock file beside the database for as long
as it is open, and the kernel drops that lock when the process dies, `kill -9` included. At start a server claims the
unfinished jobs of owners whose lock it can take (their process is gone) and leaves alone those of another live
server sharing the store. Writes are serialized by a lock (one connection per store) and by SQLite's own locking
between processes; every write is one transaction with `synchronous=FULL`.
"""

from __future__ import annotations

import abc
import contextlib
import fcntl
import json
import os
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from switchyard.errors import StoreError, first_line
from switchyard.run_context import ALL, AllScope, Scope
from switchyard.service.settings import beside_index
from switchyard.service.sqlite_store import connect, write_transaction

JOB_STORE_NAME = ".switchyard-jobs.sqlite3"
KEEP_FINISHED_S = 30 * 86400  # finished jobs are forgotten after 30 days
MAX_ATTEMPTS = 3  # a job whose server stopped this many times is failed, not started again (a crash loop)
UNFINISHED = ("queued", "running")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, collection TEXT NOT NULL, state TEXT NOT NULL, error TEXT,
    created REAL NOT NULL, started REAL, finished REAL, attempts INTEGER NOT NULL DEFAULT 0, owner TEXT);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state);
CREATE TABLE IF NOT EXISTS job_files (
    job_id TEXT NOT NULL, position INTEGER NOT NULL, name TEXT NOT NULL, path TEXT NOT NULL,
    status TEXT NOT NULL, error TEXT, added INTEGER NOT NULL DEFAULT 0, updated INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, position));
"""


class JobClaimLost(RuntimeError):
    """A job this server was running is another's now (its lease lapsed and another server claimed it)."""


@dataclass
class FileStatus:
    name: str
    path: str = ""  # where the upload is kept (upload_dir/<collection>/<name>); not shown to clients
    status: str = "queued"  # queued | indexed | unchanged | error
    error: str | None = None
    added: int = 0
    updated: int = 0


@dataclass
class Job:
    id: str
    collection: str
    state: str = "queued"  # queued | running | done | failed
    files: list[FileStatus] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    error: str | None = None
    attempts: int = 0  # times a process started it; > 1: resumed after a server stopped during it
    owner: str | None = None  # the store instance (process) that runs it
    acl: tuple[str, ...] = ()  # access labels of the uploaded documents (the upload's `acl` field)
    scope: Scope = ALL  # what the uploader may read: documents outside it are not changed (resumed jobs too)

    @property
    def resumed(self) -> bool:
        return self.attempts > 1

    def to_dict(self) -> dict:
        files = [
            {"name": f.name, "status": f.status, "error": f.error, "added": f.added, "updated": f.updated}
            for f in self.files
        ]
        done = sum(f.status != "queued" for f in self.files)
        return {
            "id": self.id,
            "collection": self.collection,
            "state": self.state,
            "files": files,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
            "resumed": self.resumed,
            "progress": {"files_done": done, "files_total": len(self.files)},
        }


JOB_COLUMNS = "id, collection, state, error, created, started, finished, attempts, owner, acl, scope"
FILE_COLUMNS = "name, path, status, error, added, updated"


def job_from_row(row: tuple, files: list[tuple]) -> Job:
    """A job from its row (JOB_COLUMNS) and its files' rows (FILE_COLUMNS, in order), as either store reads them."""
    return Job(
        row[0],
        row[1],
        row[2],
        files=[FileStatus(*f) for f in files],
        error=row[3],
        created=row[4],
        started=row[5],
        finished=row[6],
        attempts=row[7],
        owner=row[8],
        acl=tuple(filter(None, (row[9] or "").split(","))),
        scope=ALL if row[10] is None else tuple(json.loads(row[10])),
    )


def job_values(job: Job) -> tuple:
    """The job's row as stored, in JOB_COLUMNS order: `acl` as comma-separated labels, `scope` as a JSON list (None:
    ALL)."""
    scope = None if isinstance(job.scope, AllScope) else json.dumps(list(job.scope))
    fields = (job.id, job.collection, job.state, job.error, job.created, job.started, job.finished, job.attempts)
    return (*fields, job.owner, ",".join(job.acl), scope)


def job_store_path(store_uri: str, upload_dir: Path) -> Path:
    """The job store's file, beside the index."""
    return beside_index(store_uri, upload_dir, JOB_STORE_NAME)


class JobStore(abc.ABC):
    """Where jobs are recorded. `owner` names this store instance (a process); `lease_s` is None where ownership ends
    with the process (SQLite: a file lock), else the seconds a claim lasts unless `renew` extends it."""

    owner: str
    lease_s: float | None = None

    @abc.abstractmethod
    def save(self, job: Job) -> None:
        """Record the job and its files as they are now (one transaction)."""

    def accept(self, job: Job) -> None:
        """Record a new job whose files are in their final place (its `status.path`s): from here on it is never lost.
        A store shared by several machines keeps the files' bytes too."""
        self.save(job)

    def file_path(self, job: Job, position: int) -> Path:
        """Where the server running `job` reads its file at `position` (a shared store writes it there first)."""
        return Path(job.files[position].path)

    @abc.abstractmethod
    def load(self, job_id: str) -> Job | None: ...

    @abc.abstractmethod
    def claim_orphans(self) -> list[Job]:
        """Take over the unfinished jobs whose owner is gone (oldest first): each becomes this store's, queued
        again. A job that another live owner runs is left alone, and of two stores claiming at once one wins."""

    def renew(self) -> None:
        """Extend this owner's claim on its unfinished jobs (stores with a lease; nothing to do without one)."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Give up ownership: this store's unfinished jobs can then be claimed."""


class SqliteJobStore(JobStore):
    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self._open()
        except (OSError, sqlite3.Error) as exc:  # e.g. a read-only index folder: one clear line at start
            raise StoreError(f"cannot record upload jobs in {self.path}: {first_line(exc)}") from exc

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._owners = self.path.with_name(self.path.name + ".owners")
        self._owners.mkdir(exist_ok=True)
        self.owner = uuid.uuid4().hex
        self._owner_fd = os.open(self._owners / f"{self.owner}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._owner_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._lock = threading.Lock()
        self._conn = connect(self.path)
        self._conn.execute("PRAGMA synchronous=FULL")
        with self._tx() as db:
            for statement in filter(str.strip, _SCHEMA.split(";")):  # executescript would commit first
                db.execute(statement)
            columns = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
            for column in ("acl", "scope"):  # a store made before labels, or before writes respected reads
                if column not in columns:
                    db.execute(f"ALTER TABLE jobs ADD COLUMN {column} TEXT")
            old = time.time() - KEEP_FINISHED_S
            db.execute(
                "DELETE FROM job_files WHERE job_id IN (SELECT id FROM jobs WHERE state NOT IN (?, ?) AND created < ?)",
                (*UNFINISHED, old),
            )
            db.execute("DELETE FROM jobs WHERE state NOT IN (?, ?) AND created < ?", (*UNFINISHED, old))

    @contextlib.contextmanager
    def _tx(self):
        """One write transaction, serialized with this store's other calls (and with other processes by SQLite)."""
        with self._lock, write_transaction(self._conn) as db:
            yield db

    def save(self, job: Job) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO jobs (id, collection, state, error, created, started, finished, attempts, owner, "
                "acl, scope) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET state = "
                "excluded.state, error = excluded.error, started = excluded.started, finished = "
                "excluded.finished, attempts = excluded.attempts, owner = excluded.owner",
                job_values(job),
            )
            db.execute("DELETE FROM job_files WHERE job_id = ?", (job.id,))
            db.executemany(
                "INSERT INTO job_files (job_id, position, name, path, status, error, added, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(job.id, i, f.name, f.path, f.status, f.error, f.added, f.updated) for i, f in enumerate(job.files)],
            )

    def ids(self) -> list[str]:
        """Every job's id, oldest first."""
        with self._lock:
            return [row[0] for row in self._conn.execute("SELECT id FROM jobs ORDER BY created")]

    def load(self, job_id: str) -> Job | None:
        with self._lock:
            row = self._conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                return None
            files = self._conn.execute(
                f"SELECT {FILE_COLUMNS} FROM job_files WHERE job_id = ? ORDER BY position", (job_id,)
            ).fetchall()
        return job_from_row(row, files)

    def claim_orphans(self) -> list[Job]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, owner FROM jobs WHERE state IN (?, ?) AND (owner IS NULL OR owner != ?) ORDER BY created",
                (*UNFINISHED, self.owner),
            ).fetchall()
        claimed = []
        for job_id, owner in rows:
            if owner and self._owner_alive(owner):
                continue
            with self._tx() as db:
                won = db.execute(
                    "UPDATE jobs SET owner = ?, state = 'queued' WHERE id = ? AND owner IS ?",
                    (self.owner, job_id, owner),
                ).rowcount
            if won:
                job = self.load(job_id)
                assert job is not None  # just claimed, unfinished: only finished jobs are ever deleted
                claimed.append(job)
                if owner:
                    with contextlib.suppress(OSError):
                        os.unlink(self._owners / f"{owner}.lock")
        for lock in self._owners.glob("*.lock"):  # those of processes gone with no job left; an hour old at least,
            with contextlib.suppress(OSError):  # so never one a starting process has created but not locked yet
                if time.time() - lock.stat().st_mtime > 3600 and not self._owner_alive(lock.stem):
                    lock.unlink()
        return claimed

    def _owner_alive(self, owner: str) -> bool:
        try:
            fd = os.open(self._owners / f"{owner}.lock", os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops a lock taken here

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        with contextlib.suppress(OSError):
            os.unlink(self._owners / f"{self.owner}.lock")
        os.close(self._owner_fd)
