"""The fast lane (`pytest -m "not slow"`) loads no model: the session's embedder replays recorded MiniLM vectors,
every model loader refuses, and conftest's session check fails the run if a model file was opened or mapped. The full
suite keeps the real model."""

from __future__ import annotations

import pytest

from switchyard.retrievers.embedder import Embedder
from switchyard.retrievers.vector_recording import RecordingEmbedder
from tests import conftest
from tests.conftest import FAST_LANE_VECTORS, ROOT, ModelLoadInFastLane, vector_mode


def test_the_fast_lane_replays_and_refuses_models_the_full_suite_embeds(request, embedder, make_pipeline):
    mode = vector_mode(request.config)
    if mode == "live":  # the full suite: the real model, loaded
        assert isinstance(embedder, Embedder)
        assert embedder.run(["What is standard gauge?"]).shape == (1, 384)
        return
    assert isinstance(embedder, RecordingEmbedder)
    assert embedder.recording.root == FAST_LANE_VECTORS and embedder.replay == (mode == "replay")
    pipe = make_pipeline(config_file="no-llm")
    assert pipe.resources.embedder is embedder  # pipelines built from a config get it too
    hits = pipe.search("knuckle coupler").passages
    assert hits and "coupler" in hits[0].text.lower()
    if mode == "replay":
        with pytest.raises(ModelLoadInFastLane, match="Embedder._load: the fast lane loads no model"):
            Embedder("minilm").warm_up()
        shipped = ROOT / "retrievers" / "models" / "cross-encoder.onnx"
        before = len(conftest._opened_models)
        shipped.open("rb").close()  # what any other code opening a model file would do
        assert conftest._opened_models[before:] == [str(shipped)]  # the fixture would fail this test at teardown
        del conftest._opened_models[before:]  # opened on purpose here
