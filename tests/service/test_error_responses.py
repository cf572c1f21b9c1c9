"""One handler maps the whole error family to the JSON error reply, by the status each class carries: the same
`{"detail": "<one line>"}` from any route, `ServiceError`'s headers kept, anything else a 500 with one line. The
chat endpoint words the same errors the OpenAI way."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from switchyard.errors import (
    ApprovalError,
    CollectionNotFound,
    FilterError,
    LLMError,
    MissingExtra,
    NotFound,
    PauseExpired,
    QuestionError,
    ServiceError,
    StoreError,
    UnknownThread,
)
from switchyard.service.app import create_app
from switchyard.service.settings import ServiceSettings

RAISED = {
    "collection": CollectionNotFound("collection 'x' does not exist (collections: none)"),
    "store": StoreError("the index is locked\nsecond line"),
    "filter": FilterError("unknown filter field 'acl'"),
    "question": QuestionError("the question is empty"),
    "llm": LLMError("the LLM server is unreachable"),
    "extra": MissingExtra("needs the server extra"),
    "thread": UnknownThread("no paused run 'x'"),
    "expired": PauseExpired("the pause expired"),
    "approval": ApprovalError("retrieve needs a non-empty query"),
    "item": NotFound("no job 'x'"),
    "busy": ServiceError(429, "4 runs are in flight; retry shortly", {"Retry-After": "1"}),
    "other": KeyError("boom"),
}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    index = tmp_path_factory.mktemp("index")
    app = create_app(
        ServiceSettings(
            configs=("no-llm",),
            overrides=(f"store.uri={index}",),
            warm_up=False,
            api_token=None,
            upload_dir=str(tmp_path_factory.mktemp("uploads")),
        )
    )

    def fail(kind: str):
        raise RAISED[kind]

    app.add_api_route("/test/raise/{kind}", fail)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize(
    "kind, status, detail",
    [
        ("collection", 404, "collection 'x' does not exist (collections: none)"),
        ("store", 409, "the index is locked"),
        ("filter", 400, "unknown filter field 'acl'"),
        ("question", 400, "the question is empty"),
        ("llm", 502, "the LLM server is unreachable"),
        ("extra", 501, "needs the server extra"),
        ("thread", 404, "no paused run 'x'"),
        ("expired", 410, "the pause expired"),
        ("approval", 422, "retrieve needs a non-empty query"),
        ("item", 404, "no job 'x'"),
        ("busy", 429, "4 runs are in flight; retry shortly"),
        ("other", 500, "internal error: KeyError: 'boom'"),
    ],
)
def test_each_class_answers_with_its_status_and_one_line(client, kind, status, detail):
    r = client.get(f"/test/raise/{kind}")
    assert r.status_code == status
    assert r.json() == {"detail": detail}
    assert (r.headers.get("retry-after") == "1") == (kind == "busy")


@pytest.mark.parametrize(
    "body, status, said",
    [
        ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, 404, "unknown pipeline 'gpt-4o'"),
        ({"messages": [{"role": "user", "content": " "}]}, 400, "the question is empty"),
        ({"messages": [{"role": "user", "content": "hi"}], "collection": "nope"}, 404, "collection 'nope' does not"),
    ],
)
def test_the_chat_endpoint_words_them_the_openai_way(client, body, status, said):
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == status
    error = r.json()["error"]
    assert said in error["message"] and error["code"] == status and error["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "content, said",
    [
        ('{"messages": "hi"}', "messages: Input should be a valid list"),
        ('{"messages": [{"role": "user"', "the body is not valid JSON"),
        ("role=user", "the body is not valid JSON"),
    ],
)
def test_a_chat_body_that_does_not_parse_or_validate_is_an_openai_400(client, content, said):
    # OpenAI's SDKs read error.message; FastAPI's own {"detail": ...} replies (400, 422) would be unreadable to them
    r = client.post("/v1/chat/completions", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json() == {"error": {"message": said, "type": "invalid_request_error", "code": 400}}


def test_the_documented_errors_are_the_replies(client):
    # every route lists the statuses it may send, with the body of its error family (tests/service/test_fuzz.py
    # checks the replies against them)
    doc = client.get("/openapi.json").json()
    chat = doc["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert chat["404"]["content"]["application/json"]["schema"]["$ref"].endswith("/OpenAIErrorReply")
    ask = doc["paths"]["/v1/ask"]["post"]["responses"]
    assert {"400", "401", "404", "413", "429", "502", "504"} <= set(ask)
    assert ask["404"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorReply")
    assert "403" in doc["paths"]["/metrics"]["get"]["responses"]
