"""The server state in PostgreSQL, shared by every server started with the same `--state postgresql://...` URL.

`PostgresState` holds one psycopg connection pool and creates or migrates the schema when it opens: a table
`switchyard_schema` records the version (MIGRATIONS, applied in order under an advisory lock, so servers starting
together migrate once), and a database made by a newer Switchyard is refused with one line. Its stores:

- `PostgresKeyStore`: the `api_keys` table; each server re-reads it at most every `KEYS_REFRESH_S`, so a key created
  or revoked through any server (or `switchyard keys --state URL`) is seen by all within a second.
- `PostgresRateLimiter`: a key's requests of the last 60 s are rows of `rate_hits`, counted and added in one
  transaction under a per-key advisory lock, so all servers together hold a key to its requests per minute.
- `PostgresKeyRuns`: a key's runs in flight are rows of `run_slots` with a lease; a server that dies leaves rows
  that expire instead of blocking the key.
- `PostgresAuditLog`: one row of `audit_log` per request.
- `PostgresPausedRuns` and the conversation threads: LangGraph's Postgres checkpointer (`langgraph-checkpoint-postgres`,
  its own tables) and the `threads` table; a run paused through one server is resumed through another, a
  conversation started on one goes on through another (appends serialised by an advisory lock).
- `PostgresJobStore`: upload jobs in `jobs` and `job_files`, their files' bytes kept until the job ends; the server
  running a job holds a lease on it, and another server claims a job whose lease lapsed.

A database that cannot be reached raises `StateUnavailable` (HTTP 503 with Retry-After) from whatever needed it; the
pool reconnects by itself when the database is back. The URL's password never appears in messages (`redact`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from switchyard.errors import AccessError, StateUnavailable, UsageError, first_line
from switchyard.extras import needs_extra
from switchyard.graphs.build import checkpoint_serde
from switchyard.graphs.conversations import ConversationStore
from switchyard.service.audit import AuditSink
from switchyard.service.job_store import (
    FILE_COLUMNS,
    JOB_COLUMNS,
    KEEP_FINISHED_S,
    UNFINISHED,
    Job,
    JobClaimLost,
    JobStore,
    job_from_row,
    job_values,
)
from switchyard.service.keys import KeyRecord, KeyRuns, KeyStore, RateLimiter
from switchyard.service.settings import JOB_LEASE_S
from switchyard.service.state import redact
from switchyard.service.threads import PausedRuns

with needs_extra("postgres", "a PostgreSQL state backend (serve --state)"):
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool, PoolTimeout

log = logging.getLogger("switchyard.service")

KEYS_REFRESH_S = 0.5
CONNECT_TIMEOUT_S = 5.0

# The schema, one entry per version: a server applies the ones its database lacks, in order, and never edits an
# entry once released (a change is a new entry).
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE api_keys (
        key_id text PRIMARY KEY,
        name text NOT NULL UNIQUE,
        salt text NOT NULL,
        hash text NOT NULL,
        collections text[] NOT NULL,
        write boolean NOT NULL,
        admin boolean NOT NULL,
        groups text[] NOT NULL,
        rpm integer NOT NULL,
        max_in_flight integer NOT NULL,
        created double precision NOT NULL
    );
    CREATE TABLE rate_hits (key_name text NOT NULL, at timestamptz NOT NULL);
    CREATE INDEX rate_hits_key_at ON rate_hits (key_name, at);
    CREATE TABLE run_slots (
        id bigserial PRIMARY KEY,
        key_name text NOT NULL,
        server text NOT NULL,
        expires timestamptz NOT NULL
    );
    CREATE INDEX run_slots_key ON run_slots (key_name);
    CREATE TABLE audit_log (
        id bigserial PRIMARY KEY,
        time timestamptz NOT NULL,
        server text NOT NULL,
        key text,
        method text,
        route text,
        collection text,
        status integer NOT NULL,
        ms real NOT NULL,
        question text
    );
    """,
    """
    CREATE TABLE jobs (
        id text PRIMARY KEY,
        collection text NOT NULL,
        state text NOT NULL,
        error text,
        created double precision NOT NULL,
        started double precision,
        finished double precision,
        attempts integer NOT NULL DEFAULT 0,
        owner text,
        lease_until timestamptz,
        acl text NOT NULL DEFAULT '',
        scope text
    );
    CREATE INDEX jobs_unfinished ON jobs (created) WHERE state IN ('queued', 'running');
    CREATE TABLE job_files (
        job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        position integer NOT NULL,
        name text NOT NULL,
        path text NOT NULL,
        status text NOT NULL,
        error text,
        added integer NOT NULL DEFAULT 0,
        updated integer NOT NULL DEFAULT 0,
        sha256 text NOT NULL,
        content bytea,
        PRIMARY KEY (job_id, position)
    );
    """,
    """
    CREATE TABLE threads (
        id text PRIMARY KEY,
        owner text NOT NULL,
        pipeline text NOT NULL,
        collection text NOT NULL,
        state text NOT NULL,
        expires_at double precision NOT NULL,
        created double precision NOT NULL,
        updated double precision NOT NULL
    );
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
SCHEMA_LOCK = "switchyard schema"  # the advisory lock (`advisory_lock`) held while a server migrates the schema
LOCK_POLL_S = 0.05  # how often a server waiting for an advisory lock asks for it again
PROBE_S = 1.0  # while the database is down, how often a background probe tries it (requests are refused)


def server_id() -> str:
    """This process, as the rows it writes name it: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


class OutageGate:
    """Refuses at once while the database is known to be down. The first failure to reach it closes the gate and
    starts one background thread that tries the database every `probe_every_s` with a connection of its own
    (`probe()`), and opens the gate when it answers; requests never wait for a probe. Without it every call in an
    outage waits the whole connect timeout, and a request that makes several (auth, limits, its handler, the audit
    row) waits several times over, on the server's event loop."""

    def __init__(self, probe: Callable[[], bool], probe_every_s: float):
        self._probe = probe
        self.probe_every_s = probe_every_s
        self._down = False
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def admit(self) -> bool:
        with self._lock:
            return not self._down

    def failed(self) -> None:
        with self._lock:
            if self._down or self._closed.is_set():
                return
            self._down = True
        threading.Thread(target=self._probe_until_up, name="state-probe", daemon=True).start()

    def _probe_until_up(self) -> None:
        while not self._closed.is_set():
            if self._probe():
                with self._lock:
                    self._down = False
                return
            self._closed.wait(self.probe_every_s)

    def close(self) -> None:
        self._closed.set()


class CheckpointPool(ConnectionPool):
    """The pool LangGraph's checkpointer borrows from (it calls `connection()`): an outage is StateUnavailable here
    too, refused at once while the state knows the database is down."""

    def __init__(self, state: PostgresState, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._state = state

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None):
        with self._state.guarded(ConnectionPool.connection(self, timeout=timeout)) as conn:
            yield conn


class PostgresState:
    """A server's state in one PostgreSQL database shared with other servers (service/state.py describes the
    backends)."""

    def __init__(
        self,
        url: str,
        *,
        audit_questions: bool = False,
        run_lease_s: float = 600.0,
        job_lease_s: float = JOB_LEASE_S,
        max_connections: int = 8,
        timeout_s: float = CONNECT_TIMEOUT_S,
    ):
        self.where = redact(url)
        self._url = url
        self.timeout_s = timeout_s
        self.job_lease_s = job_lease_s
        self._saver: PostgresSaver | None = None
        self._saver_pool: ConnectionPool | None = None
        self._saver_lock = threading.Lock()
        self._gate = OutageGate(self._reachable, PROBE_S)
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            timeout=timeout_s,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout_s))},
            check=ConnectionPool.check_connection,  # after a database restart, no dead connection is lent
            open=False,
            name="switchyard-state",
        )
        try:
            self.pool.open(wait=True, timeout=timeout_s)
        except PoolTimeout:
            self.pool.close()
            raise StateUnavailable(f"cannot connect to the state database {self.where}") from None
        try:
            migrate(self)
        except BaseException:
            self.pool.close()
            raise
        self.keys: KeyStore = PostgresKeyStore(self)
        self.rate_limiter: RateLimiter = PostgresRateLimiter(self)
        self.key_runs: KeyRuns = PostgresKeyRuns(self, run_lease_s)
        self.audit: AuditSink = PostgresAuditLog(self, audit_questions)

    @contextlib.contextmanager
    def connection(self):
        """A pooled connection (autocommit; `with conn.transaction():` for more than one statement); a database
        that cannot be reached or fails mid-way is StateUnavailable, at once while it is known to be down (OutageGate)."""
        with self.guarded(self.pool.connection(timeout=self.timeout_s)) as conn:
            yield conn

    @contextlib.contextmanager
    def guarded(self, borrowing):
        """The connection `borrowing` (a pool's `connection()`, not yet entered) lends, behind the OutageGate: what
        cannot reach the database is StateUnavailable (503), for the state's pool and LangGraph's alike."""
        if not self._gate.admit():
            raise StateUnavailable(f"the state database {self.where} is unavailable (tried every {PROBE_S:g} s)")
        conn = None
        try:
            with borrowing as conn:
                yield conn
        except (PoolTimeout, psycopg.OperationalError) as exc:
            if conn is None or conn.broken:  # not a statement's own error (a timeout, a cancel): the database
                self._gate.failed()
            raise StateUnavailable(f"the state database {self.where} is unavailable: {first_line(exc)}") from None

    def job_store(self, path: Path) -> JobStore:
        return PostgresJobStore(self, self.job_lease_s)

    def checkpointer(self) -> PostgresSaver:
        """LangGraph's Postgres checkpointer over a pool of its own (it needs dict rows), its tables set up once:
        paused runs and conversation threads keep their checkpoints there."""
        with self._saver_lock:
            if self._saver is None:
                self._saver_pool = CheckpointPool(
                    self,
                    self._url,
                    min_size=1,
                    max_size=4,
                    timeout=self.timeout_s,
                    kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                    check=ConnectionPool.check_connection,
                    open=False,
                    name="switchyard-checkpoints",
                )
                try:
                    self._saver_pool.open(wait=True, timeout=self.timeout_s)
                    saver = PostgresSaver(self._saver_pool, serde=checkpoint_serde())  # type: ignore[arg-type]
                    with self.advisory_lock(SCHEMA_LOCK):  # one server at a time runs LangGraph's own migrations
                        saver.setup()
                except BaseException:
                    self._saver_pool.close()  # the next call starts again from a new pool
                    self._saver_pool = None
                    raise
                self._saver = saver
            return self._saver

    def paused_runs(self, path: Path, stale_after_s: float) -> PausedRuns:
        return PostgresPausedRuns(self, stale_after_s)

    def conversations(self, path: Path, expire_s: float) -> ConversationStore:
        return ConversationStore(self.checkpointer(), expire_s, shared_lock=lambda: self.advisory_lock("conversations"))

    @contextlib.contextmanager
    def advisory_lock(self, name: str):
        """A lock every server sharing the database takes: PostgreSQL's session advisory lock, held for the block.
        A waiter polls (pg_try_advisory_lock) instead of blocking in pg_advisory_lock: a statement blocked there
        holds a snapshot, and the holder's migrations (LangGraph's CREATE INDEX CONCURRENTLY, on another connection)
        wait for every older snapshot to end, a deadlock through this process that PostgreSQL cannot detect."""
        with self.connection() as conn:
            while not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (name,)).fetchone()[0]:
                time.sleep(LOCK_POLL_S)
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (name,))

    def health(self) -> dict:
        try:
            with self.connection() as conn:
                conn.execute("SELECT 1")
        except StateUnavailable as exc:
            return {"backend": "postgresql", "ok": False, "detail": exc.message}
        return {"backend": "postgresql", "ok": True}

    def _reachable(self) -> bool:
        """The gate's probe: a connection of its own (not the pool's, which waits out its reconnection backoff);
        once it answers, the pools replace the connections the outage broke, now rather than at their next retry."""
        try:
            with psycopg.connect(self._url, connect_timeout=max(1, int(self.timeout_s)), autocommit=True) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        for pool in (self.pool, self._saver_pool):
            if pool is not None:
                with contextlib.suppress(Exception):
                    pool.check()
        return True

    def close(self) -> None:
        self._gate.close()
        if self._saver_pool is not None:
            self._saver_pool.close()
        self.pool.close()


def migrate(state: PostgresState) -> int:
    """Bring the schema to SCHEMA_VERSION (one server at a time) and return the version found before."""
    with state.advisory_lock(SCHEMA_LOCK), state.connection() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS switchyard_schema (version integer NOT NULL)")
        row = conn.execute("SELECT max(version) FROM switchyard_schema").fetchone()
        found = row[0] if row and row[0] is not None else 0
        if found > SCHEMA_VERSION:
            raise UsageError(
                f"the state database {state.where} has schema version {found}, made by a newer Switchyard "
                f"(this one knows up to {SCHEMA_VERSION}); upgrade this server"
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            with conn.transaction():
                conn.execute(MIGRATIONS[version - 1])
                conn.execute("INSERT INTO switchyard_schema (version) VALUES (%s)", (version,))
            log.info("state database %s migrated to schema version %d", state.where, version)
    return found


_KEY_COLUMNS = "key_id, name, salt, hash, collections, write, admin, groups, rpm, max_in_flight, created"


class PostgresKeyStore(KeyStore):
    """The keys in the `api_keys` table, cached per server for KEYS_REFRESH_S."""

    def __init__(self, state: PostgresState, refresh_s: float = KEYS_REFRESH_S):
        self.state = state
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._records: dict[str, KeyRecord] = {}
        self._read_at = float("-inf")

    @property
    def where(self) -> str:
        return f"the state database {self.state.where}"

    def records(self) -> dict[str, KeyRecord]:
        with self._lock:
            if time.monotonic() - self._read_at >= self.refresh_s:
                with self.state.connection() as conn:
                    rows = conn.execute(f"SELECT {_KEY_COLUMNS} FROM api_keys").fetchall()
                names = _KEY_COLUMNS.split(", ")
                self._records = {r[0]: KeyRecord.from_dict(dict(zip(names, r))) for r in rows}
                self._read_at = time.monotonic()
            return self._records

    def add_record(self, record: KeyRecord) -> None:
        values = [getattr(record, name) for name in _KEY_COLUMNS.split(", ")]
        values[4], values[7] = list(record.collections), list(record.groups)
        try:
            with self.state.connection() as conn:
                conn.execute(f"INSERT INTO api_keys ({_KEY_COLUMNS}) VALUES ({', '.join(['%s'] * 11)})", values)
        except psycopg.errors.UniqueViolation:
            raise AccessError(f"a key named {record.name!r} exists; revoke it first") from None
        self._expire()

    def revoke(self, name: str) -> None:
        with self.state.connection() as conn:
            gone = conn.execute("DELETE FROM api_keys WHERE name = %s", (name,)).rowcount
        if not gone:
            raise AccessError(f"no key named {name!r}")
        self._expire()

    def _expire(self) -> None:
        with self._lock:
            self._read_at = float("-inf")


class PostgresRateLimiter(RateLimiter):
    """Requests per minute per key, counted over every server in `rate_hits` (the database's clock)."""

    def __init__(self, state: PostgresState):
        self.state = state

    def hit(self, name: str, per_minute: int) -> float | None:
        with self.state.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"rate:{name}",))
            conn.execute(
                "DELETE FROM rate_hits WHERE key_name = %s AND at <= clock_timestamp() - make_interval(secs => %s)",
                (name, self.WINDOW_S),
            )
            count, wait = conn.execute(
                "SELECT count(*), extract(epoch FROM min(at) + make_interval(secs => %s) - clock_timestamp()) "
                "FROM rate_hits WHERE key_name = %s",
                (self.WINDOW_S, name),
            ).fetchone()
            if count >= per_minute:
                return max(float(wait), 0.0)
            conn.execute("INSERT INTO rate_hits (key_name, at) VALUES (%s, clock_timestamp())", (name,))
            return None


class PostgresKeyRuns(KeyRuns):
    """Runs in flight per key over every server: a row of `run_slots` per run, with a lease (`lease_s`, longer than
    a run may last) after which a dead server's rows no longer count."""

    def __init__(self, state: PostgresState, lease_s: float):
        self.state = state
        self.lease_s = lease_s
        self.server = server_id()
        self._held: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def try_acquire(self, name: str, limit: int) -> bool:
        with self.state.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"runs:{name}",))
            conn.execute("DELETE FROM run_slots WHERE key_name = %s AND expires < clock_timestamp()", (name,))
            (active,) = conn.execute("SELECT count(*) FROM run_slots WHERE key_name = %s", (name,)).fetchone()
            if active >= limit:
                return False
            (slot,) = conn.execute(
                "INSERT INTO run_slots (key_name, server, expires) "
                "VALUES (%s, %s, clock_timestamp() + make_interval(secs => %s)) RETURNING id",
                (name, self.server, self.lease_s),
            ).fetchone()
        with self._lock:
            self._held.setdefault(name, []).append(slot)
        return True

    def release(self, name: str) -> None:
        with self._lock:
            slot = self._held[name].pop()
        try:
            with self.state.connection() as conn:
                conn.execute("DELETE FROM run_slots WHERE id = %s", (slot,))
        except StateUnavailable:
            log.warning("run slot %d of key %r not released (database unavailable); its lease expires it", slot, name)


class PostgresAuditLog:
    """One row of `audit_log` per request (the JSON line's fields, and the server that answered)."""

    def __init__(self, state: PostgresState, questions: bool = False):
        self.state = state
        self.questions = questions
        self.server = server_id()

    def write(self, record: dict) -> None:
        with self.state.connection() as conn:
            conn.execute(
                "INSERT INTO audit_log (time, server, key, method, route, collection, status, ms, question) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    datetime.fromisoformat(record["time"].replace("Z", "+00:00")),
                    self.server,
                    record.get("key"),
                    record.get("method"),
                    record.get("route"),
                    record.get("collection"),
                    record["status"],
                    record["ms"],
                    record.get("question"),
                ),
            )


class PostgresJobStore(JobStore):
    """Upload jobs in the `jobs` and `job_files` tables, shared by every server. The owner of an unfinished job
    holds a lease (`lease_s`, renewed every third of it by the server running it); a job whose lease lapsed (its
    server killed or cut off) is claimed by another. The files' bytes are kept with the job until it ends, so the
    server that takes a job over writes them to the same path (servers sharing a state database share an
    `--upload-dir` path, so a file's documents keep their ids whichever server ingests them)."""

    def __init__(self, state: PostgresState, lease_s: float = JOB_LEASE_S):
        self.state = state
        self.lease_s = lease_s
        self._lease_span = timedelta(seconds=lease_s)
        self.owner = f"{server_id()}:{uuid.uuid4().hex[:8]}"
        with state.connection() as conn:
            conn.execute(
                "DELETE FROM jobs WHERE state NOT IN ('queued', 'running') AND created < %s",
                (time.time() - KEEP_FINISHED_S,),
            )

    def _lease(self, job: Job) -> timedelta | None:
        return self._lease_span if job.state in UNFINISHED and job.owner == self.owner else None

    def _upsert(self, conn, job: Job) -> int:
        lease = self._lease(job)
        return conn.execute(
            f"INSERT INTO jobs ({JOB_COLUMNS}, lease_until) VALUES ({', '.join(['%s'] * 11)}, "
            "CASE WHEN %s::interval IS NULL THEN NULL ELSE clock_timestamp() + %s::interval END) "
            "ON CONFLICT (id) DO UPDATE SET state = excluded.state, error = excluded.error, started = "
            "excluded.started, finished = excluded.finished, attempts = excluded.attempts, owner = excluded.owner, "
            "lease_until = excluded.lease_until WHERE jobs.owner IS NOT DISTINCT FROM excluded.owner",
            (*job_values(job), lease, lease),
        ).rowcount

    def accept(self, job: Job, missing_ok: bool = False) -> None:
        """`missing_ok`: a file no longer on disk is recorded without its bytes (`state migrate`: finished jobs)."""
        rows = []
        for i, f in enumerate(job.files):
            path = Path(f.path)
            content = path.read_bytes() if not missing_ok or path.is_file() else None
            digest = hashlib.sha256(content).hexdigest() if content is not None else ""
            rows.append((job.id, i, f.name, f.path, f.status, f.error, f.added, f.updated, digest, content))
        with self.state.connection() as conn, conn.transaction():
            self._upsert(conn, job)
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO job_files (job_id, position, name, path, status, error, added, updated, sha256, "
                    "content) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    rows,
                )

    def save(self, job: Job) -> None:
        with self.state.connection() as conn, conn.transaction():
            if not self._upsert(conn, job):
                raise JobClaimLost(f"upload job {job.id} is another server's now (this one's claim lapsed)")
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE job_files SET status = %s, error = %s, added = %s, updated = %s "
                    "WHERE job_id = %s AND position = %s",
                    [(f.status, f.error, f.added, f.updated, job.id, i) for i, f in enumerate(job.files)],
                )
            if job.state not in UNFINISHED:  # the bytes were kept for a takeover; the job is over
                conn.execute("UPDATE job_files SET content = NULL WHERE job_id = %s", (job.id,))

    def load(self, job_id: str) -> Job | None:
        with self.state.connection() as conn:
            row = conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = %s", (job_id,)).fetchone()
            if row is None:
                return None
            files = conn.execute(
                f"SELECT {FILE_COLUMNS} FROM job_files WHERE job_id = %s ORDER BY position", (job_id,)
            ).fetchall()
        return job_from_row(row, files)

    def file_path(self, job: Job, position: int) -> Path:
        """The file at its path, written there from the database first unless this machine holds the same bytes."""
        path = Path(job.files[position].path)
        with self.state.connection() as conn:
            (digest,) = conn.execute(
                "SELECT sha256 FROM job_files WHERE job_id = %s AND position = %s", (job.id, position)
            ).fetchone()
            if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == digest:
                return path
            (content,) = conn.execute(
                "SELECT content FROM job_files WHERE job_id = %s AND position = %s", (job.id, position)
            ).fetchone()
        if content is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
            tmp.write_bytes(content)
            os.replace(tmp, path)
        return path

    def claim_orphans(self) -> list[Job]:
        with self.state.connection() as conn:
            claimed = conn.execute(
                "UPDATE jobs SET owner = %s, state = 'queued', lease_until = clock_timestamp() + %s "
                "WHERE id IN (SELECT id FROM jobs WHERE state IN ('queued', 'running') AND (owner IS NULL OR "
                "(owner <> %s AND lease_until < clock_timestamp())) ORDER BY created FOR UPDATE SKIP LOCKED) "
                "RETURNING id, created",
                (self.owner, self._lease_span, self.owner),
            ).fetchall()
        jobs = [self.load(job_id) for job_id, _ in sorted(claimed, key=lambda r: r[1])]
        return [job for job in jobs if job is not None]

    def renew(self) -> None:
        with self.state.connection() as conn:
            conn.execute(
                "UPDATE jobs SET lease_until = clock_timestamp() + %s WHERE owner = %s AND state IN ('queued', "
                "'running')",
                (self._lease_span, self.owner),
            )

    def close(self) -> None:
        try:
            with self.state.connection() as conn:
                conn.execute(
                    "UPDATE jobs SET owner = NULL, lease_until = NULL WHERE owner = %s AND state IN ('queued', "
                    "'running')",
                    (self.owner,),
                )
        except StateUnavailable:
            log.warning("upload jobs of %s not released (database unavailable); their leases expire them", self.owner)


class PostgresPausedRuns(PausedRuns):
    """Paused runs in the `threads` table, their checkpoints in LangGraph's Postgres checkpointer: a run paused
    through one server is seen and resumed through any other (of two resumes at once, one claims it)."""

    def __init__(self, state: PostgresState, stale_after_s: float = 3600.0):
        self.state = state
        self.stale_after_s = stale_after_s
        self.checkpointer = state.checkpointer()
        self._forget_finished()

    def _write(self, sql: str, params: tuple) -> int:
        with self.state.connection() as conn:
            return conn.execute(sql.replace("?", "%s"), params).rowcount

    def _fetchone(self, sql: str, params: tuple) -> tuple | None:
        with self.state.connection() as conn:
            return conn.execute(sql.replace("?", "%s"), params).fetchone()

    def close(self) -> None:
        """Nothing of its own: the state's pools close with it."""
