"""Settings that matter at scale: the store's vector-index choice and the rank_bm25 backend's size limit."""

import pytest

from switchyard.configs.loader import load_config
from switchyard.configs.schema import VectorIndexConfig
from switchyard.errors import CollectionTooLargeError, ConfigError, StoreError
from switchyard.retrievers.store.vector_index import index_config, partitions, tune
from switchyard.run_context import ALL
from tests.conftest import FIXTURES, SAMPLES


class _RecordingQuery:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def record(value):
            self.calls.append((name, value))
            return self

        return record


class TestVectorIndexSpec:
    def test_rejects_unknown_kind_and_negative_settings(self):
        with pytest.raises(ConfigError, match="store.vector_index.kind: Input should be 'ivf_hnsw_sq' or 'ivf_pq'"):
            load_config(None, ["store.vector_index.kind=hnsw"])  # the allowed kinds are the schema's
        with pytest.raises(ConfigError, match="store.vector_index.nprobes"):  # checked once, in the schema
            load_config(None, ["store.vector_index.nprobes=-1", "store.vector_index.ef=-2"])

    def test_automatic_and_explicit_partitions(self):
        assert partitions(VectorIndexConfig(kind="ivf_hnsw_sq"), 1_000_000) == 20
        assert partitions(VectorIndexConfig(kind="ivf_hnsw_sq"), 60_000) == 1
        assert partitions(VectorIndexConfig(kind="ivf_pq"), 1_000_000) == 1000
        assert partitions(VectorIndexConfig(kind="ivf_pq", num_partitions=64), 1_000_000) == 64

    def test_index_config_of_each_kind(self):
        from lancedb.index import IvfHnswSq, IvfPq

        hnsw = index_config(VectorIndexConfig(kind="ivf_hnsw_sq"), 100_000, 384)
        assert isinstance(hnsw, IvfHnswSq) and hnsw.num_partitions == 2 and hnsw.distance_type == "cosine"
        pq = index_config(VectorIndexConfig(kind="ivf_pq"), 250_000, 384)
        assert isinstance(pq, IvfPq) and (pq.num_partitions, pq.num_sub_vectors) == (500, 48)
        assert index_config(VectorIndexConfig(kind="ivf_pq", num_sub_vectors=96), 10_000, 384).num_sub_vectors == 96
        with pytest.raises(ValueError, match="num_sub_vectors 100 must divide the vector dimension 384"):
            index_config(VectorIndexConfig(kind="ivf_pq", num_sub_vectors=100), 10_000, 384)

    def test_tune_applies_only_the_settings_given(self):
        query = tune(VectorIndexConfig(kind="ivf_pq", nprobes=40, refine_factor=5), _RecordingQuery())
        assert query.calls == [("nprobes", 40), ("refine_factor", 5)]
        assert tune(VectorIndexConfig(), _RecordingQuery()).calls == []
        assert tune(VectorIndexConfig(ef=300), _RecordingQuery()).calls == [("ef", 300)]

    def test_config_section_reaches_the_store(self, make_stack):
        stack = make_stack(
            "store.vector_index.kind=ivf_pq", "store.vector_index.nprobes=7", "store.vector_index_min_rows=1234"
        )
        assert stack.store.vector_index == VectorIndexConfig(kind="ivf_pq", nprobes=7)
        assert stack.store.vector_index_min_rows == 1234


@pytest.mark.slow
class TestVectorIndexBuild:
    def test_ivf_pq_index_is_built_once_past_threshold_and_searched(self, make_stack):
        stack = make_stack(
            "store.vector_index_min_rows=50",
            "store.vector_index.kind=ivf_pq",
            "store.vector_index.num_partitions=2",
            "store.vector_index.refine_factor=5",
            collection="pq",
        )
        stack.ingestor(progress=False).run([FIXTURES / "phantomwiki_articles.json"])
        indices = {ix.index_type.upper(): ix for ix in stack.store.table().list_indices()}
        assert {"FTS", "IVFPQ"} <= set(indices)
        assert stack.store.ensure_vector_index() is False  # present: not rebuilt
        hits = stack.search("What is the hobby of Abraham Kindred?", top_k=3, groups=ALL).passages
        assert "Abraham Kindred" in [p.doc_id for p in hits]

    def test_no_vector_index_below_threshold(self, make_stack):
        stack = make_stack("store.vector_index_min_rows=100000")
        stack.ingestor(progress=False).run([SAMPLES])
        assert not stack.store.has_vector_index() and stack.store.has_text_index()
        assert stack.store.ensure_vector_index() is False


class TestRankBM25Limit:
    def test_refuses_a_collection_over_max_chunks_with_a_clear_message(self, make_stack):
        stack = make_stack(
            "retrieve.mode=bm25", "retrieve.retrievers.bm25.backend=rank_bm25", "retrieve.retrievers.bm25.max_chunks=3"
        )
        stack.ingestor(progress=False).run([SAMPLES])
        n = stack.store.count(ALL)
        with pytest.raises(CollectionTooLargeError) as err:
            stack.search("standard gauge", groups=ALL)
        assert isinstance(err.value, StoreError)  # the CLI and the service report it as a store error
        assert f"has {n:,} chunks" in str(err.value) and "max_chunks = 3" in str(err.value)
        assert "backend=lancedb" in str(err.value)

    def test_a_collection_at_the_limit_is_searched(self, make_stack):
        stack = make_stack("retrieve.mode=bm25", "retrieve.retrievers.bm25.backend=rank_bm25")
        stack.ingestor(progress=False).run([SAMPLES])
        n = stack.store.count(ALL)
        at_limit = make_stack(
            "retrieve.mode=bm25",
            "retrieve.retrievers.bm25.backend=rank_bm25",
            f"retrieve.retrievers.bm25.max_chunks={n}",
        )
        assert at_limit.search("standard gauge", groups=ALL).passages
        assert at_limit.retriever.retrievers[0].max_chunks == n


class TestReindexPolicy:
    """Small writes are not folded into the indexes one by one (store.reindex_min_rows): they are searched
    exhaustively until enough rows, or enough small fragments, have piled up."""

    @staticmethod
    def unindexed(stack) -> int:
        return max(ix.num_unindexed_rows or 0 for ix in stack.store.table().list_indices())

    @staticmethod
    def write(stack, folder, name: str, text: str):
        (folder / f"{name}.md").write_text(f"# {name}\n\n{text}\n")
        return stack.ingestor(progress=False).run([folder / f"{name}.md"])

    def test_a_small_write_stays_unindexed_and_is_still_found(self, make_stack, tmp_path):
        stack = make_stack("store.reindex_min_rows=50")
        docs = tmp_path / "docs"
        docs.mkdir()
        self.write(stack, docs, "first", "The Harwick Viaduct has twenty-two brick arches over the river.")
        assert stack.store.has_text_index() and self.unindexed(stack) == 0  # a new index covers every row
        self.write(stack, docs, "second", "The quillwort grows in the shallow margins of upland tarns.")
        assert self.unindexed(stack) == 1
        for mode in ("bm25", "dense", "hybrid"):  # the same collection, searched each way
            searched = make_stack("store.reindex_min_rows=50", f"retrieve.mode={mode}")
            hits = searched.search("quillwort tarns", top_k=1, groups=ALL).passages
            assert hits and "quillwort" in hits[0].text, mode

    def test_rows_are_folded_in_at_the_threshold_or_after_nine_small_fragments(self, make_stack, tmp_path):
        docs = tmp_path / "docs"
        docs.mkdir()
        at_two = make_stack("store.reindex_min_rows=2", collection="two")
        for i in range(3):
            self.write(at_two, docs, f"d{i}", f"Document {i} is about the number {i}.")
        assert self.unindexed(at_two) == 0  # the third write made two unindexed rows: folded in
        never = make_stack("store.reindex_min_rows=100000", collection="fragments")
        counts = []
        for i in range(11):
            self.write(never, docs, f"d{i}", f"Document {i} is about the number {i}.")
            counts.append(self.unindexed(never))
        assert counts[:8] == list(range(8)) and counts[-1] < 7, counts  # folded in once 9 small fragments piled up

    def test_zero_folds_after_every_write(self, make_stack, tmp_path):
        stack = make_stack("store.reindex_min_rows=0")
        docs = tmp_path / "docs"
        docs.mkdir()
        for i in range(2):
            self.write(stack, docs, f"d{i}", f"Document {i} is about the number {i}.")
            assert self.unindexed(stack) == 0


def test_a_commit_refused_as_a_retryable_conflict_is_tried_again_and_nothing_else_is(monkeypatch):
    from switchyard.retrievers.store import index_store

    monkeypatch.setattr(index_store.time, "sleep", lambda s: None)
    calls = []

    def conflicts_then(n: int, error: str = "lance error: Retryable commit conflict for version 7"):
        def commit():
            calls.append(1)
            if len(calls) <= n:
                raise RuntimeError(error)
            return "committed"

        return commit

    assert index_store.retrying_conflicts(conflicts_then(2)) == "committed" and len(calls) == 3
    calls.clear()
    with pytest.raises(RuntimeError, match="Retryable"):  # another process keeps winning: give up, loudly
        index_store.retrying_conflicts(conflicts_then(index_store.COMMIT_ATTEMPTS))
    assert len(calls) == index_store.COMMIT_ATTEMPTS
    calls.clear()
    with pytest.raises(RuntimeError, match="schema mismatch"):  # not a conflict: not tried again
        index_store.retrying_conflicts(conflicts_then(1, "lance error: schema mismatch"))
    assert len(calls) == 1
