"""The fast lane (`pytest -m "not slow"`) loads no model: the session's embedder replays recorded MiniLM vectors,
every model loader refuses, and a test (or the session) that leaves a model file mapped fails. The full suite keeps the
real model."""

from __future__ import annotations

import mmap

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
        with shipped.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ):  # as a loader maps weights
            assert str(shipped.resolve()) in conftest.mapped_models()  # the fixture would fail this test at teardown
        assert str(shipped.resolve()) not in conftest.mapped_models()  # unmapped again
