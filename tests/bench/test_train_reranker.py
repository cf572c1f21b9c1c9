"""bench/train_reranker.py's smaller cross-encoder (`--layers`): the packaged MiniLM cut to its first layers keeps
those layers' weights, scores pairs, and refuses a count it does not have. The training itself is not run here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("sentence_transformers")
sys.path.insert(0, str(ROOT / "bench"))
train_reranker = pytest.importorskip("train_reranker")

pytestmark = pytest.mark.slow  # loads the packaged MiniLM weights


def _cross_encoder():
    from sentence_transformers import CrossEncoder

    from switchyard.retrievers.embedder import resolve_model_dir

    return CrossEncoder(str(resolve_model_dir("minilm")), num_labels=1, max_length=64, device="cpu")


def test_keeping_the_first_layers_keeps_their_weights_and_still_scores_pairs():
    import torch

    full, cut = _cross_encoder(), _cross_encoder()
    train_reranker.keep_first_layers(cut, 2)
    layers = cut.model.base_model.encoder.layer
    assert len(layers) == 2 and cut.model.config.num_hidden_layers == 2
    for kept, original in zip(layers, full.model.base_model.encoder.layer[:2], strict=True):
        for a, b in zip(kept.parameters(), original.parameters(), strict=True):
            assert torch.equal(a, b)
    scores = cut.predict([("who wrote it?", "It was written by Ada."), ("who wrote it?", "Rain fell.")])
    assert len(scores) == 2 and all(float(s) == float(s) for s in scores)  # finite numbers, not NaN
    assert sum(p.numel() for p in cut.model.parameters()) < sum(p.numel() for p in full.model.parameters())


def test_a_layer_count_the_model_does_not_have_is_refused():
    model = _cross_encoder()
    for layers in (0, 7):
        with pytest.raises(SystemExit, match="between 1 and 6"):
            train_reranker.keep_first_layers(model, layers)
