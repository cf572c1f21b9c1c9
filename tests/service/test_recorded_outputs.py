"""The service answers the recorded sample question with the JSON a user of `cli.py ask --json` sees: `POST /v1/ask`
(fixed and agent) equals the recorded `ask --json` outputs and the data of the `POST /v1/ask/stream` events equal the
recorded stream (tests/fixtures/recorded_outputs, answered from the recorded run's LLM replies: no model), key order
included; only timings and run ids are masked."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from switchyard.service.app import create_app
from switchyard.service.settings import ServiceSettings
from tests.fixtures.record_outputs import OUTPUTS, QUESTION, ingest, replay_overrides, text
from tests.service.test_app import sse_events

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("recorded")
    ingest(root / "index")
    app = create_app(
        ServiceSettings(
            configs=("fixed", "agent"),
            overrides=tuple(replay_overrides(root / "index")),
            warm_up=False,
            api_token=None,
            upload_dir=str(root / "uploads"),
        )
    )
    with TestClient(app) as client:
        yield client, root / "index"


@pytest.mark.parametrize("name", ["fixed", "agent"])
def test_ask_is_the_recorded_ask_json(served, name):
    client, index = served
    r = client.post("/v1/ask", json={"question": QUESTION, "pipeline": name})
    assert r.status_code == 200, r.text
    assert text(r.json(), index) == (OUTPUTS / f"ask-{name}.json").read_text(encoding="utf-8")


def test_the_stream_is_the_recorded_stream(served):
    client, index = served
    with client.stream("POST", "/v1/ask/stream", json={"question": QUESTION, "pipeline": "fixed"}) as r:
        assert r.status_code == 200
        events = [(kind, json.loads(data)) for kind, data in sse_events(r)]
    assert all(kind == data["event"] for kind, data in events)
    assert text([data for _, data in events], index) == (OUTPUTS / "stream-fixed.json").read_text(encoding="utf-8")
