"""Conversations over HTTP: `/v1/ask` (and its stream) answer a follow-up from its earlier turns (`messages`) or from
a thread the server keeps (`thread_id`, owned by the calling key: another key's is a 404, an expired one a 410);
`GET`/`DELETE /v1/conversations/{id}`; bad `messages` are one 400 line that changes nothing; `/v1/chat/completions`
uses the whole message list; threads outlive the app. In-process (TestClient) over a copy of the sample index with two
keys, the no-LLM pipeline; the `openai` client and a restart against real `cli.py serve` processes."""

from __future__ import annotations

import json
import shutil
import time
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from switchyard.graphs.conversations import CONVERSATIONS_NAME
from switchyard.service.keys import FileKeyStore, keys_path
from tests.service.conftest import running_server
from tests.service.test_app import sse_events

QUESTION = "Who patented the knuckle coupler?"
FOLLOW_UP = "What year was that?"
MESSAGES = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "Eli Janney [1]"}]


@pytest.fixture(scope="module")
def index(tmp_path_factory, sample_index):
    """A copy of the sample index with two keys; the conversations' file is written beside it."""
    root = tmp_path_factory.mktemp("conversations")
    shutil.copytree(sample_index, root / "index")
    store = FileKeyStore(keys_path(str(root / "index"), root / "uploads"))
    keys = {name: store.create(name, "default") for name in ("alice", "bob")}
    return SimpleNamespace(root=root, uri=root / "index", keys=keys)


def make_app(index, embedder, *overrides: str):
    from switchyard.service.app import create_app
    from switchyard.service.settings import ServiceSettings

    settings = ServiceSettings(
        configs=("no-llm",),
        warm_up=False,
        api_token=None,
        overrides=(f"store.uri={index.uri}", *overrides),
        upload_dir=index.root / "uploads",
    )
    app = create_app(settings)
    registry = app.state.service.registry
    registry.models.provide(registry.configs["no-llm"].embedding, embedder)
    return app


@pytest.fixture(scope="module")
def client(index, embedder):
    with TestClient(make_app(index, embedder)) as c:
        yield c


def as_key(index, name):
    return {"Authorization": f"Bearer {index.keys[name]}"}


def ask(client, headers, question, **body):
    r = client.post("/v1/ask", json={"question": question, **body}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def turns(client, headers, thread_id) -> list[tuple[str, str]]:
    r = client.get(f"/v1/conversations/{thread_id}", headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["thread_id"] == thread_id
    return [(m["role"], m["content"]) for m in r.json()["messages"]]


def assert_one_line_400(r, said: str) -> None:
    assert r.status_code == 400, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and said in detail, detail


class TestMessages:
    def test_messages_answer_the_follow_up(self, client, index):
        alice = as_key(index, "alice")
        alone = ask(client, alice, FOLLOW_UP)
        assert alone["abstained"] and "standalone" not in alone and "thread_id" not in alone
        body = ask(client, alice, FOLLOW_UP, messages=MESSAGES)
        assert body["short_answer"] == "1873" and not body["abstained"]
        assert body["citations"][0]["title"] == "Railway couplers"
        assert body["question"] == FOLLOW_UP and "coupler" in body["standalone"] and "thread_id" not in body
        assert body["trace"][0]["node"] == "contextualize"

    def test_system_messages_are_ignored(self, client, index):
        messages = [{"role": "system", "content": "Answer in French."}, *MESSAGES]
        assert ask(client, as_key(index, "alice"), FOLLOW_UP, messages=messages)["short_answer"] == "1873"

    @pytest.mark.parametrize(
        "messages, said",
        [
            ([{"role": "wizard", "content": QUESTION}], "unknown role 'wizard'"),
            ("Who patented the knuckle coupler?", "must be a list"),
            ({"role": "user", "content": QUESTION}, "must be a list"),
            (42, "must be a list"),
            ([{"role": "user", "content": ""}], "is empty"),
            ([{"role": "user", "content": QUESTION}, "Eli Janney"], "message 1 is not a message object"),
            ([{"role": "user", "content": {"text": QUESTION}}], "no text content"),
            ([MESSAGES[0]] * 201, "at most 200"),
        ],
        ids=["role", "string", "object", "number", "empty", "not-a-message", "content-object", "too-many"],
    )
    def test_bad_messages_are_one_400_line_and_change_nothing(self, client, index, messages, said):
        alice = as_key(index, "alice")
        ask(client, alice, QUESTION, thread_id="kept-400")
        before = turns(client, alice, "kept-400")
        for path in ("/v1/ask", "/v1/ask/stream"):
            r = client.post(path, json={"question": FOLLOW_UP, "messages": messages}, headers=alice)
            assert_one_line_400(r, said)
        assert turns(client, alice, "kept-400") == before
        both = client.post(
            "/v1/ask", json={"question": FOLLOW_UP, "messages": MESSAGES, "thread_id": "kept-400"}, headers=alice
        )
        assert_one_line_400(both, "not both")
        assert turns(client, alice, "kept-400") == before
        client.delete("/v1/conversations/kept-400", headers=alice)

    def test_a_history_past_fifty_questions_worth_of_characters_is_a_413(self, client, index):
        long = [{"role": "user", "content": "x" * 2000}, {"role": "assistant", "content": "y" * 2000}] * 25
        for path in ("/v1/ask", "/v1/ask/stream"):
            r = client.post(
                path, json={"question": FOLLOW_UP, "messages": long + MESSAGES}, headers=as_key(index, "alice")
            )
            assert r.status_code == 413 and "more than 100000 characters" in r.json()["detail"], r.text
        assert ask(client, as_key(index, "alice"), FOLLOW_UP, messages=long[:40] + MESSAGES)["short_answer"] == "1873"

    def test_the_stream_with_messages_ends_with_the_answer(self, client, index):
        with client.stream(
            "POST", "/v1/ask/stream", json={"question": FOLLOW_UP, "messages": MESSAGES}, headers=as_key(index, "alice")
        ) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            events = [(kind, json.loads(data)) for kind, data in sse_events(r)]
        assert events[0][0] == "run_start" and events[-1][0] == "answer"
        started = [e["node"] for kind, e in events if kind == "node_start"]
        assert started[:2] == ["contextualize", "rewrite"]
        result = events[-1][1]["result"]
        assert result["short_answer"] == "1873" and "coupler" in result["standalone"]


class TestThreads:
    def test_a_thread_turn_after_turn_then_deleted(self, client, index):
        alice = as_key(index, "alice")
        first = ask(client, alice, QUESTION, thread_id="t-alice")
        assert first["thread_id"] == "t-alice" and first["short_answer"] == "Eli Janney" and "standalone" not in first
        second = ask(client, alice, FOLLOW_UP, thread_id="t-alice")
        assert second["thread_id"] == "t-alice" and second["short_answer"] == "1873"
        assert turns(client, alice, "t-alice") == [
            ("user", QUESTION),
            ("assistant", first["answer"]),
            ("user", FOLLOW_UP),
            ("assistant", second["answer"]),
        ]
        gone = client.delete("/v1/conversations/t-alice", headers=alice)
        assert gone.status_code == 204 and gone.content == b""
        r = client.get("/v1/conversations/t-alice", headers=alice)
        assert r.status_code == 404 and r.json() == {"detail": "no conversation 't-alice'"}
        assert client.delete("/v1/conversations/t-alice", headers=alice).status_code == 404
        fresh = ask(client, alice, FOLLOW_UP, thread_id="t-alice")  # the id starts a new conversation
        assert fresh["abstained"] and len(turns(client, alice, "t-alice")) == 2
        client.delete("/v1/conversations/t-alice", headers=alice)

    def test_the_stream_with_a_thread_adds_its_turn(self, client, index):
        alice = as_key(index, "alice")
        first = ask(client, alice, QUESTION, thread_id="t-stream")
        with client.stream(
            "POST", "/v1/ask/stream", json={"question": FOLLOW_UP, "thread_id": "t-stream"}, headers=alice
        ) as r:
            assert r.status_code == 200
            events = [(kind, json.loads(data)) for kind, data in sse_events(r)]
        result = events[-1][1]["result"]
        assert events[-1][0] == "answer" and result["short_answer"] == "1873" and result["thread_id"] == "t-stream"
        assert turns(client, alice, "t-stream") == [
            ("user", QUESTION),
            ("assistant", first["answer"]),
            ("user", FOLLOW_UP),
            ("assistant", result["answer"]),
        ]
        client.delete("/v1/conversations/t-stream", headers=alice)

    def test_another_keys_thread_is_a_404_and_its_id_is_the_callers_own(self, client, index):
        alice, bob = as_key(index, "alice"), as_key(index, "bob")
        ask(client, alice, QUESTION, thread_id="private")
        before = turns(client, alice, "private")
        unknown = client.get("/v1/conversations/nope", headers=bob)
        assert unknown.status_code == 404
        for r in (
            client.get("/v1/conversations/private", headers=bob),
            client.delete("/v1/conversations/private", headers=bob),
        ):
            assert r.status_code == 404 and r.json() == {"detail": "no conversation 'private'"}, r.text
        assert unknown.json() == {"detail": "no conversation 'nope'"}  # the same words as a thread that is not there
        # bob asking on the id starts bob's own conversation: alice's first turn is not his history
        r = client.post("/v1/ask", json={"question": FOLLOW_UP, "thread_id": "private"}, headers=bob)
        assert r.status_code == 200 and r.json()["abstained"], r.text
        assert turns(client, bob, "private")[0] == ("user", FOLLOW_UP)
        assert turns(client, alice, "private") == before
        for r in (client.get("/v1/conversations/private"), client.delete("/v1/conversations/private")):
            assert r.status_code == 401
        assert turns(client, alice, "private") == before
        client.delete("/v1/conversations/private", headers=alice)
        client.delete("/v1/conversations/private", headers=bob)

    def test_an_expired_thread_is_a_410_then_gone(self, index, embedder, monkeypatch):
        with TestClient(make_app(index, embedder, "conversation.expire_s=60")) as client:
            alice = as_key(index, "alice")
            ask(client, alice, QUESTION, thread_id="old")
            later = time.time() + 61
            monkeypatch.setattr("switchyard.graphs.conversations.time", SimpleNamespace(time=lambda: later))
            r = client.post("/v1/ask", json={"question": FOLLOW_UP, "thread_id": "old"}, headers=alice)
            assert r.status_code == 410 and "expired" in r.json()["detail"] and "\n" not in r.json()["detail"]
            assert client.get("/v1/conversations/old", headers=alice).status_code == 404
            ask(client, alice, QUESTION, thread_id="old-too")
            assert client.get("/v1/conversations/old-too", headers=alice).status_code == 200
            monkeypatch.setattr(
                "switchyard.graphs.conversations.time", SimpleNamespace(time=lambda: later + 61)
            )  # unused past expire_s: reading it is a 410, once
            assert client.get("/v1/conversations/old-too", headers=alice).status_code == 410
            assert client.get("/v1/conversations/old-too", headers=alice).status_code == 404

    @pytest.mark.parametrize("thread_id", ["", "x" * 201])
    def test_a_bad_thread_id_is_a_400(self, client, index, thread_id):
        r = client.post("/v1/ask", json={"question": QUESTION, "thread_id": thread_id}, headers=as_key(index, "alice"))
        assert_one_line_400(r, "thread_id")

    def test_threads_outlive_the_app(self, client, index, embedder):
        alice = as_key(index, "alice")
        first = ask(client, alice, QUESTION, thread_id="lasting")
        assert (index.uri / CONVERSATIONS_NAME).is_file()  # beside the index
        with TestClient(make_app(index, embedder)) as restarted:
            assert turns(restarted, alice, "lasting") == [("user", QUESTION), ("assistant", first["answer"])]
            assert ask(restarted, alice, FOLLOW_UP, thread_id="lasting")["short_answer"] == "1873"
            assert restarted.get("/v1/conversations/lasting", headers=as_key(index, "bob")).status_code == 404
        assert len(turns(client, alice, "lasting")) == 4  # the first app sees what the second added


class TestChatCompletions:
    def test_the_whole_message_list_is_the_conversation(self, client, index):
        alice = as_key(index, "alice")
        messages = [{"role": "system", "content": "ignored"}, *MESSAGES, {"role": "user", "content": FOLLOW_UP}]
        r = client.post("/v1/chat/completions", json={"model": "no-llm", "messages": messages}, headers=alice)
        assert r.status_code == 200, r.text
        content = r.json()["choices"][0]["message"]["content"]
        assert content.startswith("1873") and "Sources:\n[1] Railway couplers" in content
        alone = client.post(
            "/v1/chat/completions", json={"model": "no-llm", "messages": messages[-1:]}, headers=alice
        ).json()
        assert alone["choices"][0]["message"]["content"].startswith("Not found")

    def test_a_long_chat_is_answered_from_its_newest_turns(self, client, index):
        """A chat client sends the whole conversation every time: past 200 messages it is still answered."""
        earlier = [
            message
            for i in range(120)
            for message in (
                {"role": "user", "content": f"What is standard gauge, question {i}?"},
                {"role": "assistant", "content": "1,435 mm [1]"},
            )
        ]
        messages = [
            {"role": "system", "content": "ignored"},
            *earlier,
            *MESSAGES,
            {"role": "user", "content": FOLLOW_UP},
        ]
        r = client.post(
            "/v1/chat/completions", json={"model": "no-llm", "messages": messages}, headers=as_key(index, "alice")
        )
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"].startswith("1873")

    @pytest.mark.parametrize(
        "messages, said",
        [
            (MESSAGES, "must end with a user message"),
            ([{"role": "wizard", "content": "x"}, {"role": "user", "content": FOLLOW_UP}], "unknown role 'wizard'"),
            ([], "must end with a user message"),
        ],
    )
    def test_bad_message_lists_are_openai_style_400s(self, client, index, messages, said):
        r = client.post(
            "/v1/chat/completions", json={"model": "no-llm", "messages": messages}, headers=as_key(index, "alice")
        )
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert said in error["message"] and "\n" not in error["message"] and error["type"] == "invalid_request_error"


@pytest.mark.slow
class TestRealServer:
    def test_openai_client_follow_up_and_threads_across_a_restart(self, tmp_path, index_copy):
        from openai import OpenAI

        with running_server(tmp_path, index_copy, "--config", "no-llm") as srv:
            client = OpenAI(base_url=f"{srv.url}/v1", api_key="unused", max_retries=0, timeout=300)
            done = client.chat.completions.create(
                model="no-llm", messages=[*MESSAGES, {"role": "user", "content": FOLLOW_UP}]
            )
            content = done.choices[0].message.content
            assert content.startswith("1873") and done.model_extra["sources"][0]["title"] == "Railway couplers"
            pieces = [
                chunk.choices[0].delta.content or ""
                for chunk in client.chat.completions.create(
                    model="no-llm", stream=True, messages=[*MESSAGES, {"role": "user", "content": FOLLOW_UP}]
                )
                if chunk.choices
            ]
            assert "".join(pieces).startswith("1873")
            with srv.client() as c:
                first = c.post("/v1/ask", json={"question": QUESTION, "thread_id": "kept"}).json()
                assert first["short_answer"] == "Eli Janney"
        with running_server(tmp_path, index_copy, "--config", "no-llm") as srv, srv.client() as c:
            kept = c.get("/v1/conversations/kept")
            assert kept.status_code == 200 and len(kept.json()["messages"]) == 2
            second = c.post("/v1/ask", json={"question": FOLLOW_UP, "thread_id": "kept"}).json()
            assert second["short_answer"] == "1873" and second["thread_id"] == "kept"
            assert "Traceback" not in srv.output()
