"""Query adapters: a linear correction of query vectors, fitted on labelled queries, applied by dense search."""

import json
import threading

import numpy as np
import pytest

from switchyard.configs.loader import load_config
from switchyard.errors import AdapterError, ConfigError
from switchyard.retrievers.dense import DenseRetriever
from switchyard.retrievers.query_adapter import AdapterExample, QueryAdapter, apply_adapter, collect_examples, fit
from switchyard.retrievers.store import ChunkFetch, IndexStore
from tests.retrievers.helpers import make_chunk, unit


class TestApplyAdapter:
    def test_zero_matrix_is_the_identity(self):
        q = unit(3, 4, 0)
        assert np.allclose(apply_adapter(np.zeros((3, 3), np.float32), q), q)

    def test_hand_computed_correction(self):
        # q = (1, 0); q·A = (0, 1) -> q + q·A = (1, 1) -> normalised (1/sqrt 2, 1/sqrt 2)
        a = np.array([[0, 1], [0, 0]], dtype=np.float32)
        assert np.allclose(apply_adapter(a, np.array([1, 0], np.float32)), [2**-0.5, 2**-0.5])
        batch = apply_adapter(a, np.array([[1, 0], [0, 2]], np.float32))  # the second row: (0, 2) + (0, 0)
        assert np.allclose(batch, [[2**-0.5, 2**-0.5], [0, 1]])


class TestQueryAdapterFile:
    def test_round_trip_keeps_matrix_and_meta(self, tmp_path):
        m = np.arange(9, dtype=np.float32).reshape(3, 3) / 10
        path = QueryAdapter.save(tmp_path / "a.npz", m, {"model": "minilm", "queries": 5})
        adapter = QueryAdapter(path)
        assert np.array_equal(adapter.matrix, m)
        assert adapter.meta["model"] == "minilm" and adapter.meta["queries"] == 5 and adapter.meta["format"] == 1
        assert np.allclose(adapter.run(unit(1, 0, 0)), apply_adapter(m, unit(1, 0, 0)))
        assert not list(tmp_path.glob("*.tmp.npz"))

    def test_refuses_another_model_or_dimension(self, tmp_path):
        adapter = QueryAdapter(QueryAdapter.save(tmp_path / "a.npz", np.zeros((3, 3)), {"model": "minilm"}))
        adapter.check("minilm", 3)
        with pytest.raises(AdapterError, match="fitted for 'minilm'"):
            adapter.check("e5-small", 3)
        with pytest.raises(AdapterError, match="3-dim"):
            adapter.check("minilm", 384)

    @pytest.mark.parametrize(
        "content, message",
        [
            (None, "not found"),
            (b"not an npz", "not a query adapter file"),
            ("non-square", "square"),
            ("old-format", "unknown adapter format"),
        ],
    )
    def test_bad_files_are_clear_errors(self, tmp_path, content, message):
        path = tmp_path / "a.npz"
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif content == "non-square":
            np.savez(path, matrix=np.zeros((2, 3)), meta=np.asarray(json.dumps({"format": 1})))
        elif content == "old-format":
            np.savez(path, matrix=np.zeros((2, 2)), meta=np.asarray(json.dumps({"format": 0})))
        with pytest.raises(AdapterError, match=message):
            QueryAdapter(path).warm_up()

    def test_save_wants_npz(self, tmp_path):
        with pytest.raises(AdapterError, match=".npz"):
            QueryAdapter.save(tmp_path / "a.bin", np.zeros((2, 2)), {})


class TestFit:
    def test_learns_to_rank_the_labelled_document_first(self):
        # queries near x; their relevant document sits near y, a distractor near x: unadapted, the distractor wins
        rng = np.random.default_rng(0)
        positive, distractor = unit(0.1, 1, 0, 0), unit(1, 0.1, 0, 0)
        examples = []
        for _ in range(20):
            q = unit(*(np.array([1, 0, 0.2, 0]) + rng.normal(0, 0.05, 4)))
            examples.append(AdapterExample(q, positive[None, :], [distractor[None, :], unit(0, 0, 0, 1)[None, :]]))
        before = [float(e.query @ positive) > float(e.query @ distractor) for e in examples]
        matrix = fit(examples, epochs=20, learning_rate=0.05)
        adapted = apply_adapter(matrix, np.stack([e.query for e in examples]))
        after = [float(q @ positive) > float(q @ distractor) for q in adapted]
        assert not any(before) and all(after)
        # a new query from the same region goes the same way
        new = apply_adapter(matrix, unit(1, 0.02, 0.18, 0.01))
        assert float(new @ positive) > float(new @ distractor)

    def test_same_examples_same_matrix(self):
        e = [AdapterExample(unit(1, 0, 0), unit(0, 1, 0)[None, :], [unit(1, 0.1, 0)[None, :]])]
        assert np.array_equal(fit(e, epochs=2, learning_rate=0.01), fit(e, epochs=2, learning_rate=0.01))

    def test_rejects_nothing_to_learn_and_bad_settings(self):
        with pytest.raises(AdapterError, match="no usable labelled queries"):
            fit([])
        e = [AdapterExample(unit(1, 0), unit(0, 1)[None, :], [unit(1, 0)[None, :]])]
        with pytest.raises(AdapterError, match="epochs >= 1"):
            fit(e, epochs=0)
        with pytest.raises(AdapterError, match="negatives >= 1"):
            collect_examples(None, {}, {}, negatives=0)


@pytest.fixture()
def windowed_store(tmp_path):
    """a::0 (two windows), b::0, b::1, c::0 in a windowed collection of 3-dim vectors."""
    store = IndexStore(str(tmp_path / "ix"), "c", dim=3, windows=(64, 32))
    chunks = [make_chunk("a::0"), make_chunk("b::0"), make_chunk("b::1"), make_chunk("c::0")]
    vectors = np.stack([unit(1, 0, 0), unit(0, 1, 0), unit(0, 1, 0.2), unit(0.7, 0.7, 0)])
    windows = [np.stack([unit(1, 0, 0), unit(1, 0.3, 0)]), vectors[1:2], vectors[2:3], vectors[3:4]]
    store.write_documents(["a", "b", "c"], chunks, vectors, windows)
    return store, windows


class TestCollectExamples:
    def test_positives_are_every_searched_vector_of_the_relevant_documents(self, windowed_store):
        store, windows = windowed_store
        examples, skipped = collect_examples(
            store, {"q1": unit(1, 0, 0), "q2": unit(1, 0, 0)}, {"q1": {"b": 1}, "q2": {"missing-doc": 1}}, negatives=2
        )
        assert skipped == 1 and len(examples) == 1
        (e,) = examples
        assert sorted(map(tuple, e.positive.round(4))) == sorted(map(tuple, np.concatenate(windows[1:3]).round(4)))
        # hard negatives: the nearest non-relevant chunks, best first, with all their windows
        assert len(e.negatives) == 2
        assert np.allclose(e.negatives[0], windows[0]) and np.allclose(e.negatives[1], windows[3])

    def test_dense_vectors_by_chunk_or_document(self, windowed_store):
        store, windows = windowed_store
        by_doc = ChunkFetch(store).dense_vectors(doc_ids=["b"])
        assert set(by_doc) == {"b::0", "b::1"} and by_doc["b::0"][0] == "b"
        assert ChunkFetch(store).dense_vectors(chunk_ids=["a::0"])["a::0"][1].shape == (2, 3)
        assert ChunkFetch(store).dense_vectors(chunk_ids=[]) == {}


class _FixedEmbedder:
    """Embeds the three test queries as fixed vectors (no model needed to check where the adapter applies)."""

    dim = 3

    def embed_query(self, text):
        return {"x": unit(1, 0, 0), "y": unit(0, 1, 0), "z": unit(0, 0, 1)}[text]


class TestDenseRetrieverWithAdapter:
    def test_searches_with_the_adapted_query_vector(self, windowed_store, tmp_path):
        store, _ = windowed_store
        swap = np.array([[-1, 1, 0], [1, -1, 0], [0, 0, 0]], dtype=np.float32)  # q + q·A swaps the first two axes
        adapter = QueryAdapter(QueryAdapter.save(tmp_path / "swap.npz", swap, {"model": "fixed"}))
        plain = DenseRetriever(store, _FixedEmbedder(), top_k=2)
        adapted = DenseRetriever(store, _FixedEmbedder(), top_k=2, adapter=adapter)
        assert plain.run("x")[0].doc_id == "a"
        hits = adapted.run("x")  # searched as (0, 1, 0)
        assert hits[0].doc_id == "b" and hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert str(adapted.adapter.path).endswith("swap.npz")

    def test_threads_released_together_get_the_sequential_results(self, windowed_store, tmp_path):
        store, _ = windowed_store
        swap = np.array([[-1, 1, 0], [1, -1, 0], [0, 0, 0]], dtype=np.float32)
        adapter = QueryAdapter(QueryAdapter.save(tmp_path / "swap.npz", swap, {"model": "fixed"}))  # not loaded yet
        dense = DenseRetriever(store, _FixedEmbedder(), top_k=3, adapter=adapter)
        queries = ["x", "y", "z"] * 4
        expected = {
            q: [
                p.chunk_id
                for p in DenseRetriever(store, _FixedEmbedder(), top_k=3, adapter=QueryAdapter(adapter.path)).run(q)
            ]
            for q in set(queries)
        }
        barrier, results, errors = threading.Barrier(len(queries)), {}, []

        def work(i, q):
            try:
                barrier.wait(timeout=30)
                results[i] = [p.chunk_id for p in dense.run(q)]
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i, q)) for i, q in enumerate(queries)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors
        assert all(results[i] == expected[q] for i, q in enumerate(queries))


class TestAdapterConfig:
    def test_missing_adapter_file_is_a_config_error(self):
        with pytest.raises(ConfigError, match="no such query adapter file"):
            load_config(None, ["retrieve.retrievers.dense.query_adapter=/no/such/adapter.npz"])

    def test_off_by_default(self):
        assert load_config(None, []).retrieve.retrievers.dense.query_adapter is None
