"""Sentence windows: each chunk is also embedded as short windows of whole sentences, and dense retrieval scores a
chunk by its best window (a LanceDB multivector column)."""

import numpy as np
import pytest

from switchyard.configs.loader import load_config
from switchyard.errors import ConfigError
from switchyard.retrievers.chunking import SentenceWindows, tokenizer_file_for
from switchyard.retrievers.documents import search_text
from switchyard.retrievers.embedder import resolve_model_dir
from switchyard.retrievers.filters import scope_clauses
from switchyard.retrievers.ingest import corpus_collection
from switchyard.retrievers.store import CHUNK_VECTORS, WINDOW_COLUMN, ChunkFetch, IndexStore, VectorSearch
from switchyard.run_context import ALL
from tests.conftest import FIXTURES, SAMPLES
from tests.retrievers.helpers import make_chunk, unit

WINDOWS = ("ingest.window_tokens=64", "ingest.window_overlap=32")  # configs/e5.yaml's; the default has none

LONG_TEXT = (
    "The Janney coupler was patented by Eli Janney in 1873. It couples cars automatically when they are "
    "pushed together. Link-and-pin couplers needed a worker between the cars. Many workers were injured "
    "that way every year. The Safety Appliance Act of 1893 made automatic couplers mandatory on US "
    "railroads. Buffers and chain couplers remain common in Europe. Their screw links are tightened by "
    "hand before a train departs. "
)


@pytest.fixture(scope="module")
def windows():
    return SentenceWindows(32, 12, tokenizer_file_for(resolve_model_dir("minilm")))


class TestSentenceWindows:
    def test_a_short_chunk_is_its_own_single_window(self, windows):
        chunk = make_chunk("d::0", "Standard gauge is 1,435 mm.", title="Track gauge")
        assert windows.run(chunk) == [search_text("Track gauge", "Standard gauge is 1,435 mm.")]

    def test_a_long_chunk_becomes_titled_windows_of_whole_sentences(self, windows):
        out = windows.run(make_chunk("d::0", LONG_TEXT, title="Couplers"))
        assert len(out) >= 4
        for text in out:
            title, body = text.split("\n", 1)
            assert title == "Couplers"
            assert len(windows._count(body)) <= 32
            assert body[0].isupper() and body.rstrip()[-1] == "."  # cut at sentence ends, not inside one
        sentences = [s.strip() + "." for s in LONG_TEXT.split(".") if s.strip()]
        assert all(any(s in text for text in out) for s in sentences)  # every sentence lands in a window

    def test_rejects_overlap_not_below_size(self):
        with pytest.raises(ValueError, match="window_overlap"):
            SentenceWindows(32, 32, tokenizer_file_for(resolve_model_dir("minilm")))


class TestWindowStore:
    def test_a_chunk_is_scored_by_its_best_window_not_its_own_vector(self, tmp_path):
        store = IndexStore(str(tmp_path / "ix"), "c", dim=3, windows=(64, 32))
        a, b = make_chunk("a::0", "alpha"), make_chunk("b::0", "beta")
        q = unit(1, 0, 0)
        # a's chunk vector is closer to q, but one of b's windows is closer still
        vectors = np.stack([unit(0.9, 0.1, 0), unit(0, 1, 0)])
        a_windows = np.stack([unit(0.9, 0.1, 0), unit(0, 0, 1)])
        b_windows = np.stack([unit(0, 1, 0), unit(0.99, 0.01, 0), unit(0, 0.5, 0.5)])
        store.write_documents(["a", "b"], [a, b], vectors, [a_windows, b_windows])
        hits = VectorSearch(store).run(q, 2)
        assert [h.chunk_id for h in hits] == ["b::0", "a::0"]
        assert hits[0].score == pytest.approx(float((b_windows @ q).max()), abs=1e-5)
        assert hits[1].score == pytest.approx(float((a_windows @ q).max()), abs=1e-5)
        assert store.windows == (64, 32) and store.metadata()["windows"] == [64, 32]
        # the chunk's own vector is kept for the checks that compare passages (grade, answer support)
        assert np.allclose(ChunkFetch(store).vectors(["a::0"])["a::0"], vectors[0])
        # the chunk list searches each chunk's own vector instead: a first
        by_chunk = VectorSearch(store, CHUNK_VECTORS).run(q, 2)
        assert [h.chunk_id for h in by_chunk] == ["a::0", "b::0"]
        assert [h.score for h in by_chunk] == pytest.approx([float(v @ q) for v in vectors], abs=1e-5)

    def test_a_windowed_collection_needs_window_vectors(self, tmp_path):
        store = IndexStore(str(tmp_path / "ix"), "c", dim=3, windows=(64, 32))
        with pytest.raises(ValueError, match="holds window vectors"):
            store.write_documents(["a"], [make_chunk("a::0", "alpha")], np.stack([unit(1, 0, 0)]))
        assert not store.exists() or store.count(ALL) == 0

    def test_a_collection_without_windows_is_searched_by_chunk_vectors(self, tmp_path):
        IndexStore(str(tmp_path / "ix"), "c", dim=3).write_documents(
            ["a"], [make_chunk("a::0", "alpha")], np.stack([unit(1, 1, 0)])
        )
        reopened = IndexStore(str(tmp_path / "ix"), "c", dim=3, windows=(64, 32))  # config asks for windows
        assert reopened.windows is None and not reopened.has_windows
        assert WINDOW_COLUMN not in reopened.table().schema.names
        (hit,) = VectorSearch(reopened).run(unit(1, 0, 0), 1)
        assert hit.score == pytest.approx(float(unit(1, 1, 0) @ unit(1, 0, 0)), abs=1e-5)


class TestWindowIngest:
    def test_a_chunk_weight_fuses_the_chunk_vector_list_as_a_third(self, make_stack):
        windows = ("ingest.window_tokens=32", "ingest.window_overlap=12")
        plain = make_stack(*windows)
        assert [r.name for r in plain.hybrid_parts()] == ["bm25", "dense", "e5"]
        three = make_stack(*windows, "retrieve.fusion.weights={bm25: 0.4, dense: 0.5, chunk: 0.1}")
        assert [r.name for r in three.hybrid_parts()] == ["bm25", "dense", "chunk"]
        three.ingestor(progress=False).run([SAMPLES])
        question = "Who patented the knuckle coupler?"
        top = three.search(question, top_k=3, groups=ALL).passages
        assert top[0].title == "Railway couplers" and "chunk" in top[0].scores
        alone = three.chunk_dense().run(question, where=scope_clauses(ALL))
        vectors = ChunkFetch(three.store).vectors([p.chunk_id for p in alone])
        query = three.embedder.embed_query(question)
        assert [p.score for p in alone] == pytest.approx([float(vectors[p.chunk_id] @ query) for p in alone], abs=1e-4)
        with pytest.raises(ConfigError, match="unknown retriever"):
            load_config(None, ["retrieve.fusion.weights={bm25: 0.5, dense: 0.5, chunks: 0.1}"])

    def test_ingest_writes_one_vector_per_window(self, make_stack, embedder, tmp_path):
        stack = make_stack("ingest.window_tokens=32", "ingest.window_overlap=12")
        doc = tmp_path / "couplers.md"
        doc.write_text("# Couplers\n\n" + LONG_TEXT + "\n")
        stack.ingestor(progress=False).run([doc, SAMPLES / "track-gauge.md"])
        rows = {
            r["chunk_id"]: r
            for r in stack.store.scan(
                ["chunk_id", "title", "text", "search_text", "vector", WINDOW_COLUMN], scope=ALL
            ).to_pylist()
        }
        splitter = SentenceWindows(32, 12, embedder.tokenizer_file)
        for row in rows.values():
            chunk = make_chunk(row["chunk_id"], row["text"], title=row["title"])
            expected = embedder.run(splitter.run(chunk))
            assert np.allclose(np.asarray(row[WINDOW_COLUMN], dtype=np.float32), expected, atol=1e-5)
        assert any(len(r[WINDOW_COLUMN]) > 1 for r in rows.values())

    def test_dense_search_finds_the_chunk_of_the_matching_sentence(self, make_stack, tmp_path):
        stack = make_stack("retrieve.mode=dense", "ingest.window_tokens=32", "ingest.window_overlap=12")
        stack.ingestor(progress=False).run([SAMPLES])
        top = stack.search(
            "What is being developed to join the pneumatic and data connections automatically?", top_k=1, groups=ALL
        )
        assert stack.store.has_windows and top.passages[0].title == "Railway couplers"

    def test_a_collection_built_without_windows_keeps_ingesting_without_them(self, make_stack):
        old = make_stack("ingest.window_tokens=0")
        old.ingestor(progress=False).run([SAMPLES])
        before = old.store.count(ALL)
        new = make_stack(*WINDOWS)  # a config that asks for windows
        report = new.ingestor(progress=False).run([SAMPLES])
        assert report.unchanged == report.ingested and report.chunks_written == 0  # nothing re-embedded
        assert not new.store.has_windows and new.store.count(ALL) == before
        assert new.search("standard gauge", top_k=1, groups=ALL).passages[0].title == "Track gauge"

    def test_windowed_collection_gets_its_ann_index_on_the_windows(self, make_stack):
        # 60 articles, one chunk each, but more windows than that: the threshold counts the vectors searched
        stack = make_stack(
            *WINDOWS,
            "store.vector_index_min_rows=150",
            "store.vector_index.kind=ivf_pq",
            "store.vector_index.num_partitions=2",
            collection="mv",
        )
        stack.ingestor(progress=False).run([FIXTURES / "phantomwiki_articles.json"])
        windows = sum(len(w) for w in stack.store.scan([WINDOW_COLUMN], scope=ALL)[WINDOW_COLUMN].to_pylist())
        assert stack.store.count(ALL) < 150 <= windows
        assert stack.store.searched_vectors() == windows  # under 1,000 rows the sample is the whole table
        indexed = {tuple(ix.columns): ix.index_type.upper() for ix in stack.store.table().list_indices()}
        assert indexed.get((WINDOW_COLUMN,)) == "IVFPQ" and ("vector",) not in indexed
        hits = stack.search("What is the hobby of Abraham Kindred?", top_k=3, groups=ALL).passages
        assert "Abraham Kindred" in [p.doc_id for p in hits]

    def test_hnsw_search_over_windows_takes_a_configured_ef_below_its_need(self, make_stack):
        # LanceDB's multivector search needs ef >= 10 * k; a configured ef of 20 for k = 100 used to be an error
        stack = make_stack(
            *WINDOWS,
            "store.vector_index_min_rows=150",
            "store.vector_index.kind=ivf_hnsw_sq",
            "store.vector_index.num_partitions=1",
            "store.vector_index.ef=20",
            collection="mvh",
        )
        stack.ingestor(progress=False).run([FIXTURES / "phantomwiki_articles.json"])
        indexed = {tuple(ix.columns): ix.index_type.upper() for ix in stack.store.table().list_indices()}
        assert indexed.get((WINDOW_COLUMN,)) == "IVFHNSWSQ"
        hits = stack.dense().run("What is the hobby of Abraham Kindred?")
        assert len(hits) == stack.store.count(ALL) and "Abraham Kindred" in [p.doc_id for p in hits[:3]]


class TestWindowConcurrency:
    def test_first_searches_of_a_fresh_store_from_many_threads(self, make_stack, embedder):
        """Threads released together on a store that has not yet opened its collection (the window setting is read
        and cached on first use) get the sequential results, scored by best window."""
        from tests.together import run_together

        make_stack("ingest.window_tokens=32", "ingest.window_overlap=12").ingestor(progress=False).run([SAMPLES])
        queries = [
            "Who patented the knuckle coupler?",
            "standard gauge",
            "hump yard retarders",
            "block signalling",
            "blue flag protection",
            "narrow gauge railways",
            "automatic couplers",
            "classification tracks",
        ]
        fresh = make_stack("retrieve.mode=dense")
        got = run_together(
            len(queries),
            lambda i: [(p.chunk_id, round(p.score, 5)) for p in fresh.search(queries[i], top_k=3, groups=ALL).passages],
        )
        sequential = make_stack("retrieve.mode=dense")
        assert got == [
            [(p.chunk_id, round(p.score, 5)) for p in sequential.search(q, top_k=3, groups=ALL).passages]
            for q in queries
        ]
        assert fresh.store.windows == (32, 12)
        windows = dict(
            zip(
                *[
                    fresh.store.scan(["chunk_id", WINDOW_COLUMN], scope=ALL)[c].to_pylist()
                    for c in ("chunk_id", WINDOW_COLUMN)
                ]
            )
        )
        top_id, top_score = got[0][0]
        best = float((np.asarray(windows[top_id], dtype=np.float32) @ embedder.embed_query(queries[0])).max())
        assert top_score == pytest.approx(best, abs=1e-4)

    def test_three_lists_with_margin_weights_from_many_threads(self, make_stack):
        """The chunk list and per-query margin weights keep nothing between queries: threads released together get
        the sequential results."""
        from tests.together import run_together

        three = (
            "ingest.window_tokens=32",
            "ingest.window_overlap=12",
            "retrieve.fusion.weights={bm25: 0.4, dense: 0.5, chunk: 0.1}",
            "retrieve.fusion.adaptive_power=2",
            "retrieve.fusion.adaptive_signal=margin",
        )
        make_stack(*three).ingestor(progress=False).run([SAMPLES])
        queries = ["Who patented the knuckle coupler?", "standard gauge", "hump yard retarders", "blue flag protection"]
        queries = queries * 2
        stack = make_stack(*three)
        got = run_together(
            len(queries),
            lambda i: [(p.chunk_id, round(p.score, 5)) for p in stack.search(queries[i], top_k=3, groups=ALL).passages],
        )
        sequential = make_stack(*three)
        assert got == [
            [(p.chunk_id, round(p.score, 5)) for p in sequential.search(q, top_k=3, groups=ALL).passages]
            for q in queries
        ]
        assert "chunk" in stack.search(queries[0], top_k=1, groups=ALL).passages[0].scores


class TestWindowSettings:
    def test_config_checks(self):
        with pytest.raises(ConfigError, match="window_overlap must be smaller"):
            load_config(None, ["ingest.window_tokens=32", "ingest.window_overlap=32"])
        # a chunk no longer than a window is its own single window: windows longer than the chunks are allowed
        small = load_config(None, [*WINDOWS, "ingest.chunk_size=48", "ingest.chunk_overlap=8"])
        assert small.ingest.window_tokens == 64
        assert load_config(None).ingest.window_tokens == 0  # off by default since e5 is (config layout 26)

    def test_benchmark_collections_are_keyed_by_the_window_settings(self, tmp_path):
        corpus = tmp_path / "c.jsonl"
        corpus.write_text('{"_id": "1", "text": "x"}\n')
        keys = {corpus_collection([corpus], 256, 32, "minilm", windows=w) for w in (None, (64, 32), (48, 16))}
        assert len(keys) == 3
