"""The JSON a user sees is unchanged: `cli.py ask --json` (fixed and agent) and the streamed events of a sample
question, answered from the recorded run's LLM replies, equal the outputs recorded before the results were typed
(tests/fixtures/record_outputs.py), key order included; only timings and run ids are masked."""

from __future__ import annotations

import pytest

from tests.fixtures.record_outputs import CONFIGS, OUTPUTS, ask_json, ingest, stream_events, text

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    index = tmp_path_factory.mktemp("outputs") / "index"
    ingest(index)
    return index


@pytest.mark.parametrize("name", list(CONFIGS))
def test_ask_json_is_unchanged(index, name):
    assert text(ask_json(CONFIGS[name], index), index) == (OUTPUTS / f"ask-{name}.json").read_text(encoding="utf-8")


def test_streamed_events_are_unchanged(index):
    assert text(stream_events(index), index) == (OUTPUTS / "stream-fixed.json").read_text(encoding="utf-8")
