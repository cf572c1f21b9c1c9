"""Many servers, one state: three real `serve` processes sharing one PostgreSQL (`--state`) and one index on S3
(moto's S3-compatible server), all on 127.0.0.1, and the same `--upload-dir` path, as a deployment behind a load
balancer would run them. What they must agree on: keys, a key's rate limit, uploads ingested exactly once, a job
of a server killed with SIGKILL finished by another, and the audit log.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import ROOT
from tests.retrievers.test_object_store import BUCKET, KEY_ID_VAR, SECRET, SECRET_VAR, s3_endpoint, s3_overrides
from tests.service.conftest import running_server, wait_for_job
from tests.together import eventually, run_together

__all__ = ["s3_endpoint"]  # the module-scoped moto fixture, used here too
pytestmark = pytest.mark.slow
LEASE_S = 2.0


def _args(endpoint: str, url: str) -> list[str]:
    overrides = [a for o in s3_overrides(endpoint) if not o.startswith("store.uri=") for a in ("--set", o)]
    return ["--config", "no-llm", "--no-warm-up", "--state", url, "--job-lease", str(LEASE_S), *overrides]


@contextlib.contextmanager
def _servers(tmp_path, endpoint: str, url: str, uri: str, count: int, env: tuple[dict, ...] = ()):
    env = env or tuple({} for _ in range(count))
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(
                running_server(
                    tmp_path, uri, *_args(endpoint, url), env={KEY_ID_VAR: "test", SECRET_VAR: SECRET, **extra}
                )
            )
            for extra in env
        ]


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
    with _servers(tmp_path, s3_endpoint, url, uri, 3) as servers:
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
    with _servers(tmp_path, s3_endpoint, url, uri, 2, env=(hold, {})) as (doomed, survivor):
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
