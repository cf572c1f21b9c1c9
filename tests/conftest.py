"""Shared fixtures: the real packaged embedding model (loaded once per session) and temp-dir indexes."""
from __future__ import annotations

import os
import sys
from pathlib import Path

for _var, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                     "TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error",
                     "HF_HUB_DISABLE_PROGRESS_BARS": "1"}.items():
    os.environ.setdefault(_var, _value)

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLES = ROOT / "samples" / "corpus"
sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def embedder():
    from retrievers.embedder import Embedder

    return Embedder("minilm")


@pytest.fixture
def make_stack(tmp_path, embedder):
    """RetrievalStack over a fresh index in tmp_path, sharing the session's embedding model."""
    from configs.loader import load_config
    from retrievers.pipeline import RetrievalStack

    def make(*overrides: str, collection: str | None = None, uri: Path | None = None):
        cfg = load_config(None, [f"store.uri={uri or tmp_path / 'index'}", *overrides])
        stack = RetrievalStack(cfg, collection=collection)
        stack.__dict__["embedder"] = embedder  # cached_property: reuse the loaded model
        return stack

    return make


@pytest.fixture
def handbook_pdf(tmp_path):
    from tests.fixtures.pdfs import make_handbook_pdf

    return make_handbook_pdf(tmp_path / "handbook.pdf")
