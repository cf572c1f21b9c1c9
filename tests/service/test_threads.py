"""A human in the loop over HTTP (graph.router.approve, service/threads.py): /v1/ask answers a pause, POST
/v1/threads/{id}/resume goes on to the next pause or the answer; bad answers, unknown, foreign and expired threads are
clear 4xx; of two resumes at once exactly one proceeds; a pause survives a real server restart. The LLM is a scripted
OpenAI-compatible server (a whole zeroshot agent run, tests/nodes/scripted.py)."""

from __future__ import annotations

import shutil
import time
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from switchyard.service.keys import FileKeyStore, keys_path
from switchyard.service.threads import THREADS_NAME, SqlitePausedRuns
from tests.nodes.scripted import zeroshot_agent
from tests.scripted_openai_server import ScriptedOpenAIServer
from tests.service.conftest import running_server
from tests.together import run_together

QUESTION = "Who patented the knuckle coupler?"
ROUTER_DELAY_S = {"value": 0.0}  # a slow router, so a resume is still running when another arrives


def _reply(messages):
    if messages[0]["content"].startswith("You control"):
        time.sleep(ROUTER_DELAY_S["value"])
    return zeroshot_agent(messages)


@pytest.fixture(scope="module")
def scripted_agent():
    server = ScriptedOpenAIServer(_reply)
    yield server
    server.close()


def llm_overrides(scripted_agent) -> tuple[str, ...]:
    return ("llm.backend=openai", f"llm.base_url={scripted_agent.url}")


@pytest.fixture(scope="module")
def index(tmp_path_factory, sample_index):
    """A copy of the sample index with two keys: the paused runs' file is written beside it."""
    root = tmp_path_factory.mktemp("threads")
    shutil.copytree(sample_index, root / "index")
    store = FileKeyStore(keys_path(str(root / "index"), root / "uploads"))
    keys = {name: store.create(name, "default") for name in ("alice", "bob")}
    return SimpleNamespace(root=root, uri=root / "index", keys=keys)


@pytest.fixture(scope="module")
def client(index, scripted_agent, embedder):
    from switchyard.service.app import create_app
    from switchyard.service.settings import ServiceSettings

    settings = ServiceSettings(
        configs=("agent-approve", "no-llm"),
        warm_up=False,
        api_token=None,
        overrides=(f"store.uri={index.uri}", *llm_overrides(scripted_agent)),
        upload_dir=index.root / "uploads",
    )
    app = create_app(settings)
    registry = app.state.service.registry
    registry.models.provide(registry.configs["agent-approve"].embedding, embedder)
    with TestClient(app) as c:
        yield c


def as_key(index, name):
    return {"Authorization": f"Bearer {index.keys[name]}"}


def approve_to_the_end(client, headers, paused: dict) -> tuple[dict, list[dict]]:
    pauses = []
    body = paused
    while body["status"] == "paused":
        pauses.append(body)
        r = client.post(f"/v1/threads/{body['thread_id']}/resume", json={"decision": "approve"}, headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
    return body, pauses


class TestThreads:
    def test_ask_pauses_then_resumes_to_the_answer(self, client, index):
        alice = as_key(index, "alice")
        r = client.post("/v1/ask", json={"question": QUESTION}, headers=alice)
        assert r.status_code == 200, r.text
        paused = r.json()
        assert paused["status"] == "paused" and set(paused) == {
            "status",
            "thread_id",
            "question",
            "pending",
            "expires_at",
        }
        assert paused["pending"] == {
            "step": 1,
            "action": "retrieve",
            "args": {"query": "knuckle coupler patent"},
            "thought": "do retrieve",
            "guard": None,
        }
        status = client.get(f"/v1/threads/{paused['thread_id']}", headers=alice).json()
        assert status["status"] == "paused" and status["pending"] == paused["pending"]
        done, pauses = approve_to_the_end(client, alice, paused)
        assert [p["pending"]["action"] for p in pauses] == ["retrieve", "rerank", "grade", "answer"]
        assert done["status"] == "done" and done["thread_id"] == paused["thread_id"] == done["run_id"]
        assert "Janney" in done["answer"] and done["citations"] and not done["abstained"]
        assert [s["human"]["decision"] for s in done["steps"]] == ["approve"] * 4
        assert client.get(f"/v1/threads/{paused['thread_id']}", headers=alice).json()["status"] == "done"
        again = client.post(f"/v1/threads/{paused['thread_id']}/resume", json={"decision": "approve"}, headers=alice)
        assert again.status_code == 409 and "finished" in again.json()["detail"]

    def test_edit_and_reject(self, client, index):
        alice = as_key(index, "alice")
        paused = client.post("/v1/ask", json={"question": QUESTION}, headers=alice).json()
        url = f"/v1/threads/{paused['thread_id']}/resume"
        bad = client.post(url, json={"decision": "edit", "arguments": {"query": ""}}, headers=alice)
        assert bad.status_code == 422 and bad.json() == {"detail": "retrieve needs a non-empty query"}
        wrong = client.post(url, json={"decision": "edit", "arguments": {"reason": "x"}}, headers=alice)
        assert wrong.status_code == 422 and "retrieve takes query, not reason" in wrong.json()["detail"]
        edited = client.post(url, json={"decision": "edit", "arguments": {"query": "Janney coupler"}}, headers=alice)
        assert edited.status_code == 200 and edited.json()["pending"]["action"] == "rerank"
        rejected = client.post(url, json={"decision": "reject", "reason": "grade first"}, headers=alice).json()
        assert rejected["status"] == "paused" and rejected["pending"]["step"] == 3
        done, _ = approve_to_the_end(client, alice, rejected)
        assert done["steps"][0]["args"] == {"query": "Janney coupler"}
        assert done["steps"][0]["human"] == {"decision": "edit", "proposed": {"query": "knuckle coupler patent"}}
        assert done["steps"][1]["human"] == {"decision": "reject", "reason": "grade first"}
        assert done["steps"][1]["observation"] == "rerank rejected by the reviewer: grade first"

    @pytest.mark.parametrize(
        "body",
        [{"decision": "maybe"}, {}, {"decision": "approve", "extra": 1}, {"decision": "reject", "reason": "x" * 201}],
    )
    def test_a_bad_answer_is_a_422_and_the_run_stays_paused(self, client, index, body):
        alice = as_key(index, "alice")
        paused = client.post("/v1/ask", json={"question": QUESTION}, headers=alice).json()
        r = client.post(f"/v1/threads/{paused['thread_id']}/resume", json=body, headers=alice)
        assert r.status_code == 422 and "detail" in r.json()
        assert client.get(f"/v1/threads/{paused['thread_id']}", headers=alice).json()["status"] == "paused"

    def test_unknown_and_foreign_threads_are_404(self, client, index):
        paused = client.post("/v1/ask", json={"question": QUESTION}, headers=as_key(index, "alice")).json()
        bob = as_key(index, "bob")
        for thread_id in (paused["thread_id"], "nope"):
            r = client.post(f"/v1/threads/{thread_id}/resume", json={"decision": "approve"}, headers=bob)
            assert r.status_code == 404 and r.json() == {"detail": f"no paused run {thread_id!r}"}
            assert client.get(f"/v1/threads/{thread_id}", headers=bob).status_code == 404
        assert client.post(f"/v1/threads/{paused['thread_id']}/resume", json={"decision": "approve"}).status_code == 401

    def test_an_unanswered_pause_expires(self, client, index, monkeypatch):
        alice = as_key(index, "alice")
        paused = client.post("/v1/ask", json={"question": QUESTION}, headers=alice).json()
        later = time.time() + 3601  # past graph.router.approve_timeout_s (configs/agent-approve.yaml: 3600)
        monkeypatch.setattr("switchyard.service.threads.time", SimpleNamespace(time=lambda: later))
        for _ in range(2):
            r = client.post(f"/v1/threads/{paused['thread_id']}/resume", json={"decision": "approve"}, headers=alice)
            assert r.status_code == 410 and "expired" in r.json()["detail"]
        assert client.get(f"/v1/threads/{paused['thread_id']}", headers=alice).json() == {
            "thread_id": paused["thread_id"],
            "status": "expired",
            "pending": None,
            "expires_at": None,
        }
        assert app_pipe(client).pending(paused["thread_id"]) is None  # its checkpoints are gone

    def test_streams_and_chat_refuse_a_pausing_pipeline(self, client, index):
        alice = as_key(index, "alice")
        r = client.post("/v1/ask/stream", json={"question": QUESTION}, headers=alice)
        assert r.status_code == 400 and "POST /v1/threads/{thread_id}/resume" in r.json()["detail"]
        chat = client.post(
            "/v1/chat/completions",
            headers=alice,
            json={"model": "agent-approve", "messages": [{"role": "user", "content": QUESTION}]},
        )
        assert chat.status_code == 400
        pipelines = {p["name"]: p["approve"] for p in client.get("/v1/pipelines", headers=alice).json()}
        assert pipelines == {"agent-approve": True, "no-llm": False}

    def test_the_threads_file_is_beside_the_index(self, index):
        assert (index.uri / THREADS_NAME).is_file()


def app_pipe(client):
    return client.app.state.service.registry.get("agent-approve")


class TestPausedRuns:
    def test_of_two_claims_at_once_exactly_one_wins(self, tmp_path):
        runs = [SqlitePausedRuns(tmp_path / THREADS_NAME) for _ in range(2)]  # two stores, as two processes would
        runs[0].add("t1", "alice", "agent-approve", "default", time.time() + 60)
        assert sorted(run_together(8, lambda i: runs[i % 2].claim("t1"))) == [False] * 7 + [True]
        assert runs[1].get("t1").state == "running"
        for r in runs:
            r.close()

    def test_a_claim_left_by_a_dead_process_turns_failed(self, tmp_path):
        dead = SqlitePausedRuns(tmp_path / THREADS_NAME)
        dead.add("t1", "alice", "agent-approve", "default", time.time() + 60)
        assert dead.claim("t1")
        dead.close()  # the process died mid-resume: the row stays `running`
        fresh = SqlitePausedRuns(tmp_path / THREADS_NAME, stale_after_s=0.0)
        assert fresh.get("t1").state == "failed"
        assert not fresh.claim("t1")
        patient = SqlitePausedRuns(tmp_path / THREADS_NAME, stale_after_s=3600.0)
        patient.add("t2", "alice", "agent-approve", "default", time.time() + 60)
        assert patient.claim("t2") and patient.get("t2").state == "running"  # a live claim is left alone
        fresh.close()
        patient.close()


@pytest.mark.slow
class TestRealServer:
    def test_a_pause_survives_a_restart(self, tmp_path, index_copy, scripted_agent):
        args = ("--config", "agent-approve", *[a for o in llm_overrides(scripted_agent) for a in ("--set", o)])
        with running_server(tmp_path, index_copy, *args) as srv, srv.client() as c:
            paused = c.post("/v1/ask", json={"question": QUESTION}).json()
            assert paused["status"] == "paused"
        with running_server(tmp_path, index_copy, *args) as srv, srv.client() as c:
            status = c.get(f"/v1/threads/{paused['thread_id']}").json()
            assert status["status"] == "paused" and status["pending"] == paused["pending"]
            done, pauses = approve_to_the_end(c, {}, paused)
            assert done["status"] == "done" and "Janney" in done["answer"] and len(pauses) == 4
            assert "Traceback" not in srv.output()

    def test_two_resumes_at_once_one_proceeds_the_other_gets_409(self, tmp_path, index_copy, scripted_agent):
        args = ("--config", "agent-approve", *[a for o in llm_overrides(scripted_agent) for a in ("--set", o)])
        with running_server(tmp_path, index_copy, *args) as srv, srv.client() as c:
            paused = c.post("/v1/ask", json={"question": QUESTION}).json()
            ROUTER_DELAY_S["value"] = 1.0
            try:
                replies = run_together(
                    2, lambda i: c.post(f"/v1/threads/{paused['thread_id']}/resume", json={"decision": "approve"})
                )
            finally:
                ROUTER_DELAY_S["value"] = 0.0
            assert sorted(r.status_code for r in replies) == [200, 409]
            lost = next(r for r in replies if r.status_code == 409)
            assert "being resumed" in lost.json()["detail"]
            assert next(r for r in replies if r.status_code == 200).json()["pending"]["action"] == "rerank"
