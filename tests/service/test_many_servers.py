"""Many servers, one state: three real `serve` processes sharing one PostgreSQL (`--state`) and one index (on S3, moto's
S3-compatible server, or one folder), all on 127.0.0.1, and the same `--upload-dir` path, as a deployment behind a
load balancer would run them. What they must agree on: keys, a key's rate limit, uploads ingested exactly once, a job
of a server killed with SIGKILL finished by another, the audit log, a paused run answered through another server, a
conversation going on through a third; and a restart of the database under load, ridden out by all three.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.conftest import ROOT
from tests.moto_server import BUCKET, CREDENTIALS, SECRET, s3_overrides
from tests.retrievers.test_object_store import s3_endpoint
from tests.service.conftest import running_server, wait_for_job
from tests.together import eventually, run_together

__all__ = ["s3_endpoint"]  # the module-scoped moto fixture, used here too
pytestmark = pytest.mark.slow
# the killed-server test's job lease, short so that the survivor takes the job over soon; the other tests keep the
# default (30 s): with 2 s, a busy machine (six uploads through three servers beside another test worker) let a
# running job's claim lapse and another server finish it
LEASE_S = 2.0


def _args(endpoint: str, url: str, lease_s: float | None) -> list[str]:
    overrides = [a for o in s3_overrides(endpoint) if not o.startswith("store.uri=") for a in ("--set", o)]
    lease = ["--job-lease", str(lease_s)] if lease_s else []
    return ["--config", "no-llm", "--no-warm-up", "--state", url, *lease, *overrides]


@contextlib.contextmanager
def _servers(tmp_path, index: str, args: list[str], env: tuple[dict, ...]):
    """One `serve` per entry of `env` (that server's extra environment), all with the same index and arguments."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(running_server(tmp_path, index, *args, env=extra)) for extra in env]


def _s3_servers(
    tmp_path, endpoint: str, url: str, uri: str, count: int, env: tuple[dict, ...] = (), lease_s: float | None = None
):
    env = env or tuple({} for _ in range(count))
    return _servers(tmp_path, uri, _args(endpoint, url, lease_s), tuple({**CREDENTIALS, **extra} for extra in env))


def _keys(url: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "keys", *args, "--state", url], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _audit_rows(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM audit_log").fetchone()[0]


def test_three_servers_agree_on_keys_limits_uploads_and_the_audit_log(tmp_path, s3_endpoint, postgres):
    url, uri = postgres.database(), f"s3://{BUCKET}/many-{int(time.time() * 1000)}"
    admin = _keys(url, "create", "ops", "--admin")
    user = _keys(url, "create", "acme", "--collections", "default", "--write")
    metered = _keys(url, "create", "metered", "--collections", "default", "--rpm", "30")
    with _s3_servers(tmp_path, s3_endpoint, url, uri, 3) as servers:
        clients = [httpx.Client(base_url=s.url, timeout=120) for s in servers]

        def get(i: int, key: str, path: str = "/v1/collections") -> int:
            return clients[i % 3].get(path, headers={"Authorization": f"Bearer {key}"}).status_code

        # keys: made by a command, revoked by a command, seen by every server within a second
        assert all(get(i, user) == 200 for i in range(3))
        _keys(url, "revoke", "acme")
        assert all(eventually(1.0, lambda i=i: get(i, user) == 401) for i in range(3))
        user = _keys(url, "create", "acme", "--collections", "default", "--write")
        assert all(eventually(1.0, lambda i=i: get(i, user) == 200) for i in range(3))

        # a key's requests per minute hold across the three servers together
        codes = run_together(6, lambda t: [get(t + j, metered) for j in range(10)])
        accepted = sum(code == 200 for run in codes for code in run)
        assert 27 <= accepted <= 33 and {c for run in codes for c in run} <= {200, 429}

        # uploads through every server at once: each ingested exactly once, each job visible from every server
        def upload(i: int) -> str:
            body = f"Depot {i} keeps the {['red', 'blue', 'green'][i % 3]} shunter number {1000 + i}.".encode()
            r = clients[i % 3].post(
                "/v1/collections/default/documents",
                files=[("files", (f"depot{i}.txt", body))],
                headers={"Authorization": f"Bearer {admin}"},  # the collection is new: only an admin makes one
            )
            assert r.status_code == 202, r.text
            return r.json()["job_id"]

        jobs = run_together(6, upload)  # the collection is new: six first writers at once (index upkeep conflicts)
        headers = {"Authorization": f"Bearer {admin}"}
        for i, job in enumerate(jobs):
            with httpx.Client(base_url=servers[(i + 1) % 3].url, headers=headers, timeout=120) as other:
                finished = wait_for_job(other, job, timeout=240)
                assert finished["files"][0]["status"] == "indexed", finished
        titles = [d["title"] for d in clients[2].get("/v1/collections/default/documents", headers=headers).json()]
        assert sorted(titles) == sorted(f"depot{i}" for i in range(6))

        # the audit log: one row per request, whichever server answered
        before = _audit_rows(url)
        for i in range(9):
            assert get(i, admin) == 200
        assert eventually(2.0, lambda: _audit_rows(url) == before + 9)
        for client in clients:
            client.close()
        assert all(SECRET not in s.output() for s in servers)


def test_a_job_of_a_server_killed_mid_way_is_finished_by_another(tmp_path, s3_endpoint, postgres):
    """Server A holds its job after the first file is committed; it is killed with SIGKILL; B, running, claims the
    job once A's lease lapses and ingests the rest; every document is in the index once."""
    url, uri = postgres.database(), f"s3://{BUCKET}/kill-{int(time.time() * 1000)}"
    admin = _keys(url, "create", "ops", "--admin")
    headers = {"Authorization": f"Bearer {admin}"}
    hold = {"SWITCHYARD_TEST_HOLD_JOB_AFTER_FILES": "1"}
    with _s3_servers(tmp_path, s3_endpoint, url, uri, 2, env=(hold, {}), lease_s=LEASE_S) as (doomed, survivor):
        files = [("files", (f"yard{i}.txt", f"Yard {i} turns locomotive {200 + i}.".encode())) for i in range(3)]
        with httpx.Client(base_url=doomed.url, headers=headers, timeout=120) as a:
            job = a.post("/v1/collections/default/documents", files=files).json()["job_id"]
        assert eventually(180, lambda: f"holding job {job} after 1 file(s)" in doomed.output()), doomed.output()[-2000:]
        doomed.proc.send_signal(signal.SIGKILL)
        assert doomed.proc.wait(timeout=30) == -signal.SIGKILL
        with httpx.Client(base_url=survivor.url, headers=headers, timeout=120) as b:
            done = wait_for_job(b, job, timeout=240)
            assert done["state"] == "done" and done["resumed"] is True, done
            # the first file was committed by A before the kill: B ingests it again and finds it unchanged
            assert [f["status"] for f in done["files"]] == ["unchanged", "indexed", "indexed"]
            titles = [d["title"] for d in b.get("/v1/collections/default/documents").json()]
        assert sorted(titles) == ["yard0", "yard1", "yard2"]
        assert "took over 1 unfinished upload job" in survivor.output()


def test_a_run_paused_through_one_server_is_answered_through_another(tmp_path, sample_index, postgres):
    """graph.router.approve across processes: A pauses the run, B resumes it step by step to the answer (one scripted
    OpenAI-compatible model behind all three), C sees it done; a conversation begun on A goes on through C with the
    first turn in its history."""
    from tests.nodes.scripted import zeroshot_agent
    from tests.scripted_openai_server import ScriptedOpenAIServer

    url = postgres.database()
    key = _keys(url, "create", "alice", "--collections", "default")
    alice = {"Authorization": f"Bearer {key}"}
    with ScriptedOpenAIServer(zeroshot_agent) as model:
        args = ["--config", "agent-approve", "--config", "no-llm", "--no-warm-up", "--state", url]
        args += ["--set", "llm.backend=openai", "--set", f"llm.base_url={model.url}"]
        with _servers(tmp_path, sample_index, args, ({}, {}, {})) as servers:
            a, b, c = (httpx.Client(base_url=s.url, headers=alice, timeout=120) for s in servers)
            body = a.post("/v1/ask", json={"question": "Who patented the knuckle coupler?"}).json()
            assert body["status"] == "paused", body
            thread = body["thread_id"]
            assert c.get(f"/v1/threads/{thread}").json()["status"] == "paused"
            while body["status"] == "paused":
                reply = b.post(f"/v1/threads/{thread}/resume", json={"decision": "approve"})
                assert reply.status_code == 200, reply.text
                body = reply.json()
            assert "Janney" in body["answer"] and c.get(f"/v1/threads/{thread}").json()["status"] == "done"

            question = {"question": "Who patented the knuckle coupler?", "pipeline": "no-llm", "thread_id": "chat-1"}
            assert a.post("/v1/ask", json=question).status_code == 200
            follow_up = {**question, "question": "When did he patent it?"}
            assert c.post("/v1/ask", json=follow_up).status_code == 200
            history = b.get("/v1/conversations/chat-1").json()
            assert [(m["role"], m["content"]) for m in history["messages"] if m["role"] == "user"] == [
                ("user", question["question"]),
                ("user", follow_up["question"]),
            ]
            for client in (a, b, c):
                client.close()


def test_three_servers_ride_out_a_database_restart_under_load(tmp_path, sample_index, postgres):
    """PostgreSQL stopped for ~8 s and started again while three servers answer searches from six threads and one
    of them runs an upload job: every request answered 200 or 503 with Retry-After, none takes longer than the
    request timeout, every server answers again without a restart, and the job, held mid-way across the outage,
    finishes with every file indexed once."""
    from switchyard.service.jobs import TEST_HOLD_ENV
    from tests.postgres_server import PostgresServer

    index = tmp_path / "index"
    shutil.copytree(sample_index, index)  # the job writes to it
    with PostgresServer() as own:  # its own server: the session's keeps running for the other tests
        url = own.database()
        admin = _keys(url, "create", "ops", "--admin")
        headers = {"Authorization": f"Bearer {admin}"}
        args = ["--config", "no-llm", "--no-warm-up", "--state", url, "--timeout", "30"]
        hold = {TEST_HOLD_ENV: "1:4"}  # A holds its job 4 s after the first file: it records it during the outage
        with _servers(tmp_path, str(index), args, (hold, {}, {})) as servers:
            clients = [httpx.Client(base_url=s.url, headers=headers, timeout=60) for s in servers]
            for client in clients:  # the models loaded before the clock starts
                assert client.post("/v1/search", json={"query": "knuckle coupler"}).status_code == 200
            files = [("files", (f"shed{i}.txt", f"Shed {i} stables locomotive {300 + i}.".encode())) for i in range(3)]
            job = clients[0].post("/v1/collections/default/documents", files=files).json()["job_id"]
            assert eventually(60, lambda: f"holding job {job}" in servers[0].output()), servers[0].output()[-2000:]

            stop, seen = threading.Event(), []

            def traffic(i: int) -> list[tuple[int, float, str | None]]:
                replies = []
                while not stop.is_set():
                    started = time.monotonic()
                    r = clients[i % 3].post("/v1/search", json={"query": "knuckle coupler"})
                    replies.append((r.status_code, time.monotonic() - started, r.headers.get("retry-after")))
                    if r.status_code == 503:
                        stop.wait(0.5)
                return replies

            load = threading.Thread(target=lambda: seen.extend(run_together(6, traffic, timeout=180)))
            load.start()
            time.sleep(1.0)
            own.stop()
            time.sleep(8.0)
            own.start()
            back = [eventually(30, lambda c=c: c.get("/healthz").status_code == 200) for c in clients]
            time.sleep(1.0)
            stop.set()
            load.join(timeout=120)

            replies = [reply for thread in seen for reply in thread]
            assert back == [True, True, True] and all(s.proc.poll() is None for s in servers)
            assert {status for status, _, _ in replies} == {200, 503}, replies
            assert all(retry == "5" for status, _, retry in replies if status == 503)
            assert max(seconds for _, seconds, _ in replies) < 30
            assert all(thread[-1][0] == 200 for thread in seen)  # each thread's last request, after the restart
            done = wait_for_job(clients[1], job, timeout=120)
            assert done["state"] == "done" and [f["status"] for f in done["files"]] == ["indexed"] * 3, done
            titles = [d["title"] for d in clients[2].get("/v1/collections/default/documents").json()]
            assert sorted(t for t in titles if t.startswith("shed")) == ["shed0", "shed1", "shed2"]
            assert "waiting for the state database" in servers[0].output()
            for client in clients:
                client.close()
