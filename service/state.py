"""The state a server keeps besides the index: API keys, per-key request rates and runs in flight, the audit log,
and the records of upload jobs, paused runs and conversation threads. Two backends, chosen when the server starts
(`serve --state URL`, or `SWITCHYARD_STATE_URL`):

- `LocalState` (no URL, the embedded default): the key file beside the index, counters in the process's memory,
  the audit log in a file or the `switchyard.audit` logger. Right for one server.
- `PostgresState` (service/postgres.py, a `postgresql://` URL): every store in one PostgreSQL database that several
  servers share, so a key revoked through one is refused by all, and a key's limits hold across all of them.

Both give the same stores behind the same interfaces (service/keys.py, service/audit.py), and `health()` says
whether the backend can be used now.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from switchyard.errors import UsageError
from switchyard.graphs.conversations import ConversationStore
from switchyard.service.audit import AuditLog, AuditSink
from switchyard.service.job_store import JobStore, SqliteJobStore
from switchyard.service.keys import (
    FileKeyStore,
    KeyRuns,
    KeyStore,
    LocalKeyRuns,
    LocalRateLimiter,
    RateLimiter,
    keys_path,
)
from switchyard.service.settings import JOB_LEASE_S
from switchyard.service.threads import PausedRuns, SqlitePausedRuns

STATE_ENV = "SWITCHYARD_STATE_URL"
SCHEMES = ("postgresql://", "postgres://")


class ServerState(Protocol):
    keys: KeyStore
    rate_limiter: RateLimiter
    key_runs: KeyRuns
    audit: AuditSink

    def job_store(self, path: Path) -> JobStore:
        """The record of upload jobs (`path`: the SQLite file a local backend keeps beside the index)."""
        ...

    def paused_runs(self, path: Path, stale_after_s: float) -> PausedRuns:
        """The record of paused runs and their checkpoints (`path`: a local backend's SQLite file)."""
        ...

    def conversations(self, path: Path, expire_s: float) -> ConversationStore:
        """Conversation threads (`path`: a local backend's SQLite file)."""
        ...

    def health(self) -> dict: ...

    def close(self) -> None: ...


class LocalState:
    """One server's state: the key file beside the index, limits counted in this process, the audit log locally."""

    def __init__(self, keys_file: Path, audit_log: Path | None = None, audit_questions: bool = False):
        self.keys: KeyStore = FileKeyStore(keys_file)
        self.rate_limiter: RateLimiter = LocalRateLimiter()
        self.key_runs: KeyRuns = LocalKeyRuns()
        self.audit: AuditSink = AuditLog(audit_log, audit_questions)

    def job_store(self, path: Path) -> JobStore:
        return SqliteJobStore(path)

    def paused_runs(self, path: Path, stale_after_s: float) -> PausedRuns:
        return SqlitePausedRuns(path, stale_after_s)

    def conversations(self, path: Path, expire_s: float) -> ConversationStore:
        return ConversationStore.on_disk(path, expire_s)

    def health(self) -> dict:
        return {"backend": "local", "ok": True}

    def close(self) -> None:
        pass


def state_url(given: str | None) -> str | None:
    """The state URL a server or command uses: the one given, else `SWITCHYARD_STATE_URL`, else None (local)."""
    url = given or os.environ.get(STATE_ENV) or None
    if url is not None and not url.startswith(SCHEMES):
        raise UsageError(f"--state needs a postgresql:// URL, got {redact(url)!r}")
    return url


def redact(url: str) -> str:
    """A URL without its password, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    userinfo, _, host = rest.rpartition("@")
    user, has_password, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if has_password else ''}@{host}"


def open_state(
    url: str | None,
    store_uri: str,
    upload_dir: Path,
    audit_log: Path | None = None,
    audit_questions: bool = False,
    job_lease_s: float = JOB_LEASE_S,
) -> ServerState:
    """The state backend for a server over the index at `store_uri`: PostgreSQL at `url`, else local files."""
    if url is None:
        return LocalState(keys_path(store_uri, upload_dir), audit_log, audit_questions)
    from switchyard.service.postgres import PostgresState  # psycopg: the `postgres` extra

    return PostgresState(url, audit_questions=audit_questions, job_lease_s=job_lease_s)
