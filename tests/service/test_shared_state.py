"""Several servers over one PostgreSQL state database (`serve --state URL`): what they must agree on, through HTTP.

Each "server" is an app of its own (its own Service, pool and caches) over the same sample index and the same
database, as three processes behind a load balancer would be; requests go through the real middleware (auth, rate
limits, audit) and routes.
"""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from tests.together import eventually, run_together


def _server(index, tmp_path, url: str, configs=("no-llm",), overrides_extra=(), **settings) -> TestClient:
    from switchyard.service.app import create_app
    from switchyard.service.settings import ServiceSettings

    return TestClient(
        create_app(
            ServiceSettings(
                configs=configs,
                overrides=(f"store.uri={index}", *overrides_extra),
                warm_up=False,
                upload_dir=tmp_path / "uploads",
                api_token=None,
                state_url=url,
                **settings,
            )
        )
    )


@pytest.fixture
def cluster(postgres, sample_index, tmp_path):
    url = postgres.database()
    servers = [_server(sample_index, tmp_path / f"s{i}", url) for i in range(3)]
    yield url, servers
    for server in servers:
        server.app.state.service.state.close()


def _get(server: TestClient, key: str, path: str = "/v1/collections"):
    return server.get(path, headers={"Authorization": f"Bearer {key}"})


def test_a_key_made_through_one_server_opens_all_and_its_revocation_closes_all(cluster):
    _, (a, b, c) = cluster
    a.app.state.service.keys.create("admin", admin=True)  # keys remain after the revocation: the server stays closed
    key = a.app.state.service.keys.create("acme", "default")
    assert all(eventually(1.0, lambda s=s: _get(s, key).status_code == 200) for s in (a, b, c))
    c.app.state.service.keys.revoke("acme")
    assert all(eventually(1.0, lambda s=s: _get(s, key).status_code == 401) for s in (a, b, c))


def test_a_keys_rate_limit_holds_across_servers(cluster):
    _, servers = cluster
    key = servers[0].app.state.service.keys.create("metered", "default", rpm=12)
    time.sleep(0.6)  # every server's key cache sees it
    codes = run_together(6, lambda i: [_get(servers[i % 3], key).status_code for _ in range(5)])
    flat = [code for run in codes for code in run]
    assert flat.count(200) == 12 and flat.count(429) == 18
    refused = _get(servers[1], key)
    assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 60


def test_the_audit_log_holds_one_row_per_request_from_every_server(cluster):
    import psycopg

    url, servers = cluster
    key = servers[0].app.state.service.keys.create("audited", "default")
    time.sleep(0.6)
    for i in range(9):
        _get(servers[i % 3], key)
    _get(servers[2], "sy_000000000000_wrongwrongwrongwrongwrong")
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT key, status, server FROM audit_log WHERE route = '/v1/collections'").fetchall()
    assert sorted((r[0] or "", r[1]) for r in rows) == [("", 401)] + [("audited", 200)] * 9
    assert len({r[2] for r in rows}) == 1  # one process here; the server column names it (host:pid)


@pytest.mark.slow  # waits out connect timeouts and the pool's reconnection (~7-17 s)
def test_the_database_down_is_503_with_retry_after_and_healthz_says_so(postgres, sample_index, tmp_path):
    from tests.postgres_server import PostgresServer

    with PostgresServer() as own:
        server = _server(sample_index, tmp_path, own.database())
        key = server.app.state.service.keys.create("k", "default")
        assert _get(server, key).status_code == 200 and server.get("/healthz").json()["state"]["ok"]
        own.stop()
        time.sleep(0.6)  # past the key cache
        started = time.monotonic()
        refused = _get(server, key)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
        assert "unavailable" in refused.json()["detail"] and time.monotonic() - started < 15
        health = server.get("/healthz")
        assert health.status_code == 503 and health.json()["status"] == "unavailable"
        own.start()
        assert eventually(15.0, lambda: _get(server, key).status_code == 200)
        assert server.get("/healthz").status_code == 200
        server.app.state.service.state.close()


@pytest.mark.slow
def test_serve_and_keys_take_the_state_url_and_never_print_its_password(postgres, sample_index, tmp_path):
    """The command line: `keys create --state URL` in one process, `serve --state URL` in another, the key accepted;
    SWITCHYARD_STATE_URL works as --state; a URL that is not postgresql:// is a one-line usage error."""
    import os
    import subprocess
    import sys

    import psycopg

    from tests.conftest import ROOT
    from tests.service.conftest import running_server

    url = postgres.database()
    with psycopg.connect(url, autocommit=True) as conn:  # a password on the URL, as an operator might give it
        conn.execute("ALTER USER postgres PASSWORD 's3cret-pw'")
    with_password = url.replace("postgres@", "postgres:s3cret-pw@")
    cli = [sys.executable, str(ROOT / "cli.py")]
    env = {**os.environ, "SWITCHYARD_STATE_URL": with_password}
    made = subprocess.run([*cli, "keys", "create", "ops", "--admin"], capture_output=True, text=True, env=env)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert "s3cret-pw" not in made.stderr and "postgres:***@" in made.stderr
    with running_server(tmp_path, sample_index, "--config", "no-llm", "--state", with_password) as srv:
        with srv.client(token=key) as client:
            assert client.get("/v1/collections").status_code == 200
        with srv.client(token=None) as anonymous:
            assert anonymous.get("/v1/collections").status_code == 401
        assert (
            "s3cret-pw" not in srv.output() and "state in the state database postgresql://postgres:***@" in srv.output()
        )
    bad = subprocess.run([*cli, "keys", "list", "--state", "mysql://u:pw@h/db"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "pw@" not in bad.stderr


def test_a_run_paused_through_one_server_is_answered_through_another(postgres, sample_index, tmp_path, embedder):
    """graph.router.approve across servers: A pauses the run, B resumes it step by step to the answer (one scripted
    OpenAI-compatible model behind both), C sees it done; a conversation (thread_id on /v1/ask) begun on A goes on
    through C with its first turn in the history."""
    from tests.nodes.scripted import zeroshot_agent
    from tests.scripted_openai_server import ScriptedOpenAIServer

    url = postgres.database()
    model = ScriptedOpenAIServer(zeroshot_agent)
    llm = ("llm.backend=openai", f"llm.base_url={model.url}")
    servers = []
    try:
        for i in range(3):
            server = _server(
                sample_index, tmp_path / f"s{i}", url, configs=("agent-approve", "no-llm"), overrides_extra=llm
            )
            registry = server.app.state.service.registry
            registry.models.provide(registry.configs["agent-approve"].embedding, embedder)
            servers.append(server)
        a, b, c = servers
        key = a.app.state.service.keys.create("alice", "default")
        time.sleep(0.6)
        alice = {"Authorization": f"Bearer {key}"}
        body = a.post("/v1/ask", json={"question": "Who patented the knuckle coupler?"}, headers=alice).json()
        assert body["status"] == "paused"
        thread = body["thread_id"]
        assert c.get(f"/v1/threads/{thread}", headers=alice).json()["status"] == "paused"
        while body["status"] == "paused":
            reply = b.post(f"/v1/threads/{thread}/resume", json={"decision": "approve"}, headers=alice)
            assert reply.status_code == 200, reply.text
            body = reply.json()
        assert "Janney" in body["answer"] and c.get(f"/v1/threads/{thread}", headers=alice).json()["status"] == "done"

        first = a.post(
            "/v1/ask",
            json={"question": "Who patented the knuckle coupler?", "pipeline": "no-llm", "thread_id": "chat-1"},
            headers=alice,
        )
        assert first.status_code == 200, first.text
        history = c.get("/v1/conversations/chat-1", headers=alice).json()
        assert [t["role"] for t in history["messages"]][:2] == ["user", "assistant"]
    finally:
        for server in servers:
            server.app.state.service.state.close()
        model.close()
