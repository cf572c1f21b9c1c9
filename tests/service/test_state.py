"""The server state (service/state.py) against both backends: the local files and counters of one server, and a
real PostgreSQL on 127.0.0.1 (service/postgres.py) that several servers share. The same tests run on both; what
only a shared database can do (two servers agreeing, leases, migrations, outages) runs on PostgreSQL.

Two "servers" here are two state objects over the same files or database, as two processes would hold.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from switchyard.errors import AccessError, StateUnavailable, UsageError
from switchyard.run_context import ALL
from switchyard.service.state import LocalState, open_state, redact, state_url
from tests.together import eventually, run_together


@pytest.fixture(params=["local", "postgresql"])
def backend(request, tmp_path):
    """A factory of state objects sharing one backend (each call: another server), closed at the end."""
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres").database()
    else:
        url = None
    opened = []

    def server(**kwargs):
        state = open_state(url, str(tmp_path / "index"), tmp_path / "uploads", **kwargs)
        opened.append(state)
        return state

    server.kind = request.param
    server.url = url
    yield server
    for state in opened:
        state.close()


def test_keys_are_created_verified_listed_and_revoked(backend):
    state = backend()
    key = state.keys.create("acme", "manuals,faq", write=True, rpm=5)
    principal = state.keys.verify(key)
    assert principal.name == "acme" and principal.collections == ("faq", "manuals") and principal.rpm == 5
    assert state.keys.verify(key[:-2] + "xx") is None and state.keys.verify("not-a-key") is None
    assert [k["name"] for k in state.keys.list()] == ["acme"] and "hash" not in state.keys.list()[0]
    with pytest.raises(AccessError, match="exists"):
        state.keys.create("acme", "faq")
    state.keys.revoke("acme")
    assert state.keys.verify(key) is None and not state.keys.active()
    with pytest.raises(AccessError, match="no key named"):
        state.keys.revoke("acme")


def test_a_key_created_or_revoked_by_one_server_holds_for_another_within_a_second(backend):
    one, two = backend(), backend()
    assert not two.keys.active()
    key = one.keys.create("shared", admin=True)
    assert eventually(1.0, lambda: two.keys.verify(key) is not None)
    one.keys.revoke("shared")
    assert eventually(1.0, lambda: two.keys.verify(key) is None)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)  # local counts are one process's
def test_a_keys_rate_holds_across_servers_hit_at_once(backend):
    servers = [backend() for _ in range(3)]
    allowed = run_together(6, lambda i: sum(servers[i % 3].rate_limiter.hit("k", 10) is None for _ in range(6)))
    assert sum(allowed) == 10  # 36 requests from 6 threads on 3 servers, the budget held once
    wait = servers[0].rate_limiter.hit("k", 10)
    assert wait is not None and 0 < wait <= 60


def test_the_rate_window_slides(backend):
    limiter = backend().rate_limiter
    assert limiter.hit("k", 1) is None and limiter.hit("k", 1) is not None
    assert limiter.hit("other", 1) is None  # per key


def test_runs_in_flight_per_key(backend):
    runs = backend().key_runs
    assert runs.try_acquire("k", 2) and runs.try_acquire("k", 2) and not runs.try_acquire("k", 2)
    runs.release("k")
    assert runs.try_acquire("k", 2)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)  # local counts are one process's
def test_runs_in_flight_hold_across_servers_and_a_dead_servers_slots_expire(backend):
    alive, dying = backend(), backend()
    dying.key_runs.lease_s = 1.0
    acquired = run_together(8, lambda i: (alive, dying)[i % 2].key_runs.try_acquire("k", 3))
    assert sum(acquired) == 3
    # the dying server never releases: once its leases run out its slots stop counting
    held_by_alive = len(alive.key_runs._held.get("k", []))
    for _ in range(held_by_alive):
        alive.key_runs.release("k")
    assert eventually(3.0, lambda: alive.key_runs.try_acquire("k", 1))


def test_audit_lines(backend, tmp_path):
    log = tmp_path / "audit.jsonl"
    state = backend(audit_log=log) if backend.kind == "local" else backend()
    record = {"time": "2026-01-01T12:00:00.123Z", "key": "acme", "method": "POST", "route": "/v1/ask"}
    state.audit.write({**record, "collection": "faq", "status": 200, "ms": 12.5})
    if backend.kind == "local":
        assert '"route": "/v1/ask"' in log.read_text()
    else:
        import psycopg

        with psycopg.connect(backend.url) as conn:
            rows = conn.execute("SELECT key, route, collection, status, ms, server FROM audit_log").fetchall()
        assert rows[0][:5] == ("acme", "/v1/ask", "faq", 200, 12.5) and ":" in rows[0][5]


def test_the_schema_is_created_once_and_a_newer_one_is_refused(postgres):
    import psycopg

    from switchyard.service.postgres import SCHEMA_VERSION, PostgresState

    url = postgres.database()
    states = run_together(3, lambda i: PostgresState(url))  # three servers starting at once
    for state in states:
        state.close()
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT array_agg(version) FROM switchyard_schema").fetchone()[0] == list(
            range(1, SCHEMA_VERSION + 1)
        )
        conn.execute("INSERT INTO switchyard_schema VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(UsageError, match=f"schema version {SCHEMA_VERSION + 1}, made by a newer Switchyard") as err:
        PostgresState(url)
    assert "\n" not in str(err.value)


def test_the_outage_gate_refuses_until_its_background_probe_reaches_the_database():
    from switchyard.service.postgres import OutageGate

    up, probes = threading.Event(), []
    gate = OutageGate(lambda: probes.append(threading.current_thread().name) or up.is_set(), probe_every_s=0.01)
    assert gate.admit() and not probes  # no probing while all is well
    gate.failed()
    gate.failed()  # a second failure starts no second probe
    assert not gate.admit()
    assert eventually(2.0, lambda: len(probes) >= 3) and not gate.admit()
    assert set(probes) == {"state-probe"}  # never on the caller's thread
    up.set()
    assert eventually(2.0, gate.admit)
    gate.close()
    gate.failed()  # closed: no more probes
    assert gate.admit()


def test_servers_waiting_for_the_schema_lock_do_not_stall_a_concurrent_index_build(postgres):
    """Found by three servers starting at once behind a load balancer: the one migrating (LangGraph's checkpointer
    tables: CREATE INDEX CONCURRENTLY, which waits for every older snapshot) must not wait for the servers that wait
    for its lock, or neither ever goes on (a deadlock through the application, which PostgreSQL cannot see)."""
    import psycopg

    from switchyard.service.postgres import SCHEMA_LOCK, PostgresState

    url = postgres.database()
    holder, waiter = PostgresState(url), PostgresState(url)
    waited = []

    def wait_for_the_lock() -> None:
        with waiter.advisory_lock(SCHEMA_LOCK):
            waited.append(True)

    with holder.advisory_lock(SCHEMA_LOCK):
        thread = threading.Thread(target=wait_for_the_lock)
        thread.start()
        time.sleep(0.5)  # the waiter is waiting
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET statement_timeout = '10s'")  # the stall, if any, ends as an error
            conn.execute("CREATE TABLE built (x int)")
            conn.execute("CREATE INDEX CONCURRENTLY built_x ON built (x)")
        assert not waited  # the lock is still held
    thread.join(timeout=10)
    assert waited == [True] and not thread.is_alive()
    holder.close()
    waiter.close()


@pytest.mark.slow  # waits out connect timeouts and the pool's reconnection (~7-17 s)
def test_a_database_that_goes_down_is_503_and_comes_back_by_itself(postgres, tmp_path):
    from tests.postgres_server import PostgresServer

    with PostgresServer() as own:  # a server of its own, to stop
        state = open_state(own.database(), str(tmp_path / "index"), tmp_path / "uploads")
        key = state.keys.create("k", admin=True)
        conversations = state.conversations(tmp_path, 3600.0)  # LangGraph's checkpointer, its own pool
        own.stop()
        started = time.monotonic()
        with pytest.raises(StateUnavailable) as err:
            state.rate_limiter.hit("k", 5)
        assert time.monotonic() - started < 15 and err.value.status == 503
        assert err.value.headers["Retry-After"] == "5" and "password" not in err.value.message
        started = time.monotonic()  # known to be down: refused at once, not after a connect timeout each
        for _ in range(20):
            with pytest.raises(StateUnavailable):
                state.rate_limiter.hit("k", 5)
        assert time.monotonic() - started < 3 and state.health()["ok"] is False
        with pytest.raises(StateUnavailable):  # a 503 too, not a driver error (a 500)
            conversations.turns("chat", "k")
        own.start()
        assert eventually(15.0, lambda: state.health()["ok"])
        state.keys._expire()
        assert state.keys.verify(key) is not None and state.rate_limiter.hit("k", 5) is None
        assert conversations.turns("chat", "k") == []
        state.close()


def test_state_urls_are_checked_and_never_shown_with_their_password(monkeypatch):
    monkeypatch.delenv("SWITCHYARD_STATE_URL", raising=False)
    assert state_url(None) is None
    monkeypatch.setenv("SWITCHYARD_STATE_URL", "postgresql://u:s3cret@db:5432/sy")
    assert state_url(None) == "postgresql://u:s3cret@db:5432/sy"
    assert redact("postgresql://u:s3cret@db:5432/sy") == "postgresql://u:***@db:5432/sy"
    assert redact("postgresql://db/sy") == "postgresql://db/sy"
    assert redact("postgresql://u@db/sy") == "postgresql://u@db/sy"  # no password: nothing to hide
    with pytest.raises(UsageError, match="postgresql://") as err:
        state_url("mysql://u:s3cret@db/sy")
    assert "s3cret" not in str(err.value)


def test_the_local_backend_is_what_a_server_gets_without_a_url(tmp_path, monkeypatch):
    monkeypatch.delenv("SWITCHYARD_STATE_URL", raising=False)
    state = open_state(state_url(None), str(tmp_path / "index"), tmp_path / "uploads")
    assert isinstance(state, LocalState) and state.health() == {"backend": "local", "ok": True}
    assert state.keys.where == str(tmp_path / "index" / ".switchyard-keys.json")


def _job(tmp_path, store, name="a.txt", text="The knuckle coupler was patented by Eli Janney."):
    from switchyard.service.job_store import FileStatus, Job

    folder = tmp_path / "uploads" / "default"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return Job(id=f"job-{name}", collection="default", files=[FileStatus(name, str(folder / name))], owner=store.owner)


def test_upload_jobs_are_accepted_saved_and_loaded(backend, tmp_path):
    from switchyard.service.job_store import job_store_path

    store = backend().job_store(job_store_path(str(tmp_path / "index"), tmp_path / "uploads"))
    job = _job(tmp_path, store)
    job.acl, job.scope = ("hr",), ("hr", "ops")
    store.accept(job)
    job.state, job.files[0].status, job.files[0].added = "running", "indexed", 1
    store.save(job)
    loaded = store.load(job.id)
    assert loaded.state == "running" and loaded.files[0].status == "indexed" and loaded.files[0].added == 1
    assert loaded.acl == ("hr",) and loaded.scope == ("hr", "ops") and loaded.owner == store.owner
    assert store.load("nope") is None and store.file_path(loaded, 0).read_text().startswith("The knuckle")
    store.close()


def test_a_job_whose_lease_lapsed_is_claimed_once_and_its_files_follow_it(postgres, tmp_path):
    """Server A accepts a job and stops renewing its lease (killed, or cut off); B and C claim at once: one wins,
    writes the file from the database where A's machine had it, and A may no longer record the job."""
    from switchyard.service.job_store import JobClaimLost
    from switchyard.service.postgres import PostgresState

    url = postgres.database()
    a, b, c = (PostgresState(url, job_lease_s=1.0) for _ in range(3))
    try:
        stores = [s.job_store(tmp_path / "unused") for s in (a, b, c)]
        job = _job(tmp_path, stores[0])
        stores[0].accept(job)
        assert stores[1].claim_orphans() == [] and stores[2].claim_orphans() == []  # A's lease holds
        Path(job.files[0].path).unlink()  # another machine: the upload is not on its disk
        time.sleep(1.2)
        claims = run_together(2, lambda i: stores[1 + i].claim_orphans())
        won = [c for c in claims if c]
        assert len(won) == 1 and won[0][0].id == job.id and won[0][0].state == "queued"
        winner = stores[1 + claims.index(won[0])]
        assert winner.file_path(won[0][0], 0).read_text().startswith("The knuckle")
        job.state = "running"
        with pytest.raises(JobClaimLost):
            stores[0].save(job)
        winner.close()  # a graceful stop gives the job up at once
        assert [j.id for j in stores[0].claim_orphans()] == [job.id]
    finally:
        for state in (a, b, c):
            state.close()


def test_an_upload_of_a_server_that_died_is_ingested_by_another_exactly_once(postgres, tmp_path, make_stack):
    """Two IngestJobs over one PostgreSQL store and one index: A accepts an upload and dies before running it; B,
    running, takes it over when A's lease lapses and ingests it; the collection holds its document once."""
    from switchyard.service.jobs import IngestJobs
    from switchyard.service.postgres import PostgresState

    url = postgres.database()
    a, b = PostgresState(url, job_lease_s=1.0), PostgresState(url, job_lease_s=1.0)
    stack = make_stack()
    dead = IngestJobs(tmp_path / "uploads", lambda _c: stack, a.job_store(tmp_path / "unused"))
    alive = IngestJobs(tmp_path / "uploads", lambda _c: stack, b.job_store(tmp_path / "unused"))
    try:
        job = _job(tmp_path, dead.store, "coupler.txt")
        dead.store.accept(job)  # accepted, then the server is gone before its worker starts
        assert alive.recover() == []  # the lease still holds
        deadline = time.monotonic() + 15
        while (alive.get(job.id) or {}).get("state") != "done" and time.monotonic() < deadline:
            time.sleep(0.1)
        done = alive.get(job.id)
        assert done["state"] == "done", (done["error"], done)
        assert done["resumed"] is False and done["files"][0]["status"] == "indexed"
        docs = [d for d in stack.store.list_documents(ALL) if d["doc_id"].startswith("coupler")]
        assert len(docs) == 1
    finally:
        alive.shutdown()
        a.close()
        b.close()


def test_paused_runs_claimed_once_across_servers_and_finished(backend, tmp_path):
    from switchyard.service.threads import THREADS_NAME

    one, two = (backend().paused_runs(tmp_path / "index" / THREADS_NAME, 3600.0) for _ in range(2))
    one.add("t1", "alice", "agent-approve", "default", time.time() + 60)
    seen = two.get("t1")
    assert seen.owner == "alice" and seen.state == "paused" and not seen.expired()
    assert sorted(run_together(8, lambda i: (one, two)[i % 2].claim("t1"))) == [False] * 7 + [True]
    assert one.get("t1").state == "running"
    two.paused("t1", time.time() + 60)  # the resume paused again: it waits once more
    assert one.claim("t1")
    one.finish("t1", "done")
    assert two.get("t1").state == "done" and not two.claim("t1") and two.get("nope") is None
    for runs in (one, two):
        runs.close()


def test_a_conversation_started_on_one_server_goes_on_through_another(backend, tmp_path):
    from switchyard.graphs.conversations import CONVERSATIONS_NAME

    a, b = (backend().conversations(tmp_path / "index" / CONVERSATIONS_NAME, 3600.0) for _ in range(2))
    a.append("chat-1", "Who patented the knuckle coupler?", "Eli Janney.", owner="acme")
    assert [m.content for m in b.turns("chat-1", "acme")] == ["Who patented the knuckle coupler?", "Eli Janney."]
    assert b.turns("chat-1", "globex") == []  # another key's thread of the same id is its own
    run_together(6, lambda i: (a, b)[i % 2].append("chat-1", f"question {i}?", f"answer {i}.", owner="acme"))
    turns = [m.content for m in a.turns("chat-1", "acme")]
    assert len(turns) == 14 and {f"question {i}?" for i in range(6)} <= set(turns)  # no append lost
    for store in (a, b):
        store.close()
