"""The second dense retriever, e5 (retrieve.retrievers.e5): a column of the store, written at ingest, searched and
fused with BM25 and MiniLM."""

import numpy as np
import pytest

from switchyard.configs.loader import load_config
from switchyard.errors import ConfigError, StoreError
from switchyard.retrievers.e5_model import PASSAGE_PREFIX, QUERY_PREFIX
from switchyard.retrievers.ingest import corpus_collection
from switchyard.retrievers.store import E5_COLUMN, WINDOW_COLUMN, IndexStore, VectorSearch
from switchyard.run_context import ALL
from tests.conftest import FIXTURES, SAMPLES
from tests.retrievers.helpers import make_chunk, unit
from tests.together import run_together

E5 = ("retrieve.retrievers.e5.enabled=true", "retrieve.fusion.weights.e5=0.4")
NO_E5 = ("retrieve.retrievers.e5.enabled=false",)  # e5 is on by default (config layout 26)


class TestE5Store:
    def test_the_e5_column_is_searched_on_its_own(self, tmp_path):
        store = IndexStore(str(tmp_path / "ix"), "c", dim=3, vector_fields={"e5": 2})
        chunks = [make_chunk("a::0", "alpha", title="T"), make_chunk("b::0", "beta", title="T")]
        # MiniLM prefers a, e5 prefers b
        store.write_documents(
            ["a", "b"],
            chunks,
            np.stack([unit(1, 0, 0), unit(0, 1, 0)]),
            field_vectors={"e5": np.stack([unit(0, 1), unit(1, 0)])},
        )
        assert [h.chunk_id for h in VectorSearch(store).run(unit(1, 0, 0), 2)] == ["a::0", "b::0"]
        hits = VectorSearch(store, field="e5").run(unit(1, 0), 2)
        assert [h.chunk_id for h in hits] == ["b::0", "a::0"] and hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert store.has_field("e5") and store.metadata()["e5_dim"] == 2

    def test_an_e5_collection_needs_e5_vectors(self, tmp_path):
        store = IndexStore(str(tmp_path / "ix"), "c", dim=3, vector_fields={"e5": 2})
        with pytest.raises(ValueError, match="holds e5 vectors"):
            store.write_documents(["a"], [make_chunk("a::0", "alpha", title="T")], np.stack([unit(1, 0, 0)]))
        assert not store.exists() or store.count(ALL) == 0

    def test_a_collection_without_e5_refuses_an_e5_search(self, tmp_path):
        IndexStore(str(tmp_path / "ix"), "c", dim=3).write_documents(
            ["a"], [make_chunk("a::0", "alpha", title="T")], np.stack([unit(1, 0, 0)])
        )
        reopened = IndexStore(str(tmp_path / "ix"), "c", dim=3, vector_fields={"e5": 2})  # the config asks for e5
        assert not reopened.has_field("e5")
        with pytest.raises(StoreError, match="holds no e5 vectors.*new collection"):
            VectorSearch(reopened, field="e5").run(unit(1, 0), 1)


@pytest.mark.slow
class TestE5Ingest:
    def test_ingest_writes_each_chunks_passage_vector(self, make_stack):
        stack = make_stack(*E5)
        stack.ingestor(progress=False).run([SAMPLES])
        rows = stack.store.scan(["search_text", E5_COLUMN], scope=ALL).to_pylist()
        expected = stack.field_embedder("e5").run([PASSAGE_PREFIX + r["search_text"] for r in rows])
        assert np.allclose(np.asarray([r[E5_COLUMN] for r in rows], dtype=np.float32), expected, atol=1e-4)

    def test_the_collection_keeps_its_e5_vectors_when_the_config_turns_e5_off(self, make_stack, tmp_path):
        make_stack(*E5).ingestor(progress=False).run([SAMPLES])
        extra = tmp_path / "extra.md"
        extra.write_text("# Turntables\n\nA turntable turns a locomotive around in a roundhouse.\n")
        plain = make_stack(*NO_E5)
        report = plain.ingestor(progress=False).run([SAMPLES, extra])
        assert report.added == 1 and report.chunks_written == 1  # the others unchanged, not re-embedded
        rows = plain.store.scan(["chunk_id", E5_COLUMN], scope=ALL).to_pylist()
        assert all(r[E5_COLUMN] is not None for r in rows)
        assert [p.title for p in plain.search("what turns a locomotive around", top_k=1, groups=ALL).passages] == [
            "Turntables"
        ]

    def test_the_e5_column_gets_its_own_ann_index(self, make_stack):
        stack = make_stack(
            *E5,
            "ingest.window_tokens=64",  # MiniLM's windows beside (off by default): each gets its own index
            "ingest.window_overlap=32",
            "store.vector_index_min_rows=50",
            "store.vector_index.kind=ivf_pq",
            "store.vector_index.num_partitions=2",
            collection="e5ann",
        )
        stack.ingestor(progress=False).run([FIXTURES / "phantomwiki_articles.json"])
        indexed = {tuple(ix.columns): ix.index_type.upper() for ix in stack.store.table().list_indices()}
        assert indexed.get((E5_COLUMN,)) == "IVFPQ" and indexed.get((WINDOW_COLUMN,)) == "IVFPQ"
        hits = stack.field_retriever("e5").run("What is the hobby of Abraham Kindred?")
        assert "Abraham Kindred" in [p.doc_id for p in hits[:3]]

    def test_a_collection_built_without_e5_is_searched_without_its_list(self, make_stack, caplog):
        """A collection from before e5 was the default keeps working under it: hybrid fuses the lists it holds and
        the log says so once; e5 alone is a clear error."""
        make_stack(*NO_E5).ingestor(progress=False).run([SAMPLES])
        default = make_stack()
        with caplog.at_level("WARNING", logger="switchyard.retrievers.stack"):
            passages = default.search("Who patented the knuckle coupler?", rerank=False, groups=ALL).passages
            default.search("standard gauge", rerank=False, groups=ALL)
        assert passages[0].title == "Railway couplers" and set(passages[0].scores) == {"bm25", "dense", "fused"}
        assert [r.getMessage() for r in caplog.records] == [
            "collection 'default' was built without e5 vectors: its search fuses the other lists only; ingest into "
            "a new collection (store.collection) to add them"
        ]
        with pytest.raises(StoreError, match="holds no e5 vectors"):
            make_stack("retrieve.mode=e5").search("standard gauge", groups=ALL)


@pytest.mark.slow
class TestE5Search:
    def test_hybrid_fuses_three_lists_and_e5_alone_ranks_by_its_cosine(self, make_stack):
        stack = make_stack(*E5)
        stack.ingestor(progress=False).run([SAMPLES])
        top = stack.search("Who patented the knuckle coupler?", top_k=3, rerank=False, groups=ALL).passages
        assert top[0].title == "Railway couplers" and {"bm25", "dense", "e5"} <= set(top[0].scores)
        alone = make_stack(*E5, "retrieve.mode=e5").search(
            "Who patented the knuckle coupler?", rerank=False, groups=ALL
        )
        query = stack.field_embedder("e5").run([QUERY_PREFIX + "Who patented the knuckle coupler?"])[0]
        vectors = dict(
            zip(*[stack.store.scan(["chunk_id", E5_COLUMN], scope=ALL)[c].to_pylist() for c in ("chunk_id", E5_COLUMN)])
        )
        cosines = [float(np.asarray(vectors[p.chunk_id], dtype=np.float32) @ query) for p in alone.passages]
        assert cosines == sorted(cosines, reverse=True)
        assert [p.score for p in alone.passages] == pytest.approx(cosines, abs=1e-4)

    def test_searches_from_many_threads_match_the_sequential_ones(self, make_stack):
        """Threads released together on a fresh stack (both models load on first use, and both run queries at
        once) get the results of the same searches run one by one."""
        make_stack(*E5).ingestor(progress=False).run([SAMPLES])
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

        def ranked(stack, q):
            return [
                (p.chunk_id, round(p.score, 4)) for p in stack.search(q, top_k=3, rerank=False, groups=ALL).passages
            ]

        fresh = make_stack(*E5)
        got = run_together(len(queries), lambda i: ranked(fresh, queries[i]))
        sequential = make_stack(*E5)
        assert got == [ranked(sequential, q) for q in queries]


@pytest.mark.slow
class TestE5Access:
    def test_the_e5_list_never_returns_a_document_the_caller_may_not_read(self, make_stack):
        """The access clause goes into the e5 column's vector query too (not only BM25's and MiniLM's)."""
        stack = make_stack(*E5)
        stack.ingestor(progress=False).run([SAMPLES])
        assert stack.ingestor(progress=False).run([SAMPLES / "couplers.html"], acl="staff").updated == 1
        question = "Who patented the knuckle coupler?"
        for mode in ("e5", "hybrid"):
            searcher = make_stack(*E5, f"retrieve.mode={mode}")
            assert "couplers" in searcher.search(question, rerank=False, groups=ALL).passages[0].doc_id
            for groups in [(), ("other",)]:
                passages = searcher.search(question, rerank=False, groups=groups).passages
                assert passages and not any("couplers" in p.doc_id for p in passages)
            allowed = searcher.search(question, rerank=False, groups=("staff",)).passages
            assert "couplers" in allowed[0].doc_id


class TestE5Settings:
    def test_config_checks(self):
        with pytest.raises(ConfigError, match="give its list a fusion weight"):
            load_config(None, ["retrieve.retrievers.e5.enabled=true", "retrieve.fusion.weights={bm25: 1, dense: 1}"])
        with pytest.raises(ConfigError, match="e5 is off but retrieve.fusion.weights.e5 is 0.4: set .*e5=0 to leave"):
            load_config(None, [*NO_E5, "retrieve.fusion.weights.e5=0.4"])
        with pytest.raises(ConfigError, match="retrieve.mode e5 needs retrieve.retrievers.e5.enabled"):
            load_config(None, [*NO_E5, "retrieve.mode=e5"])
        # turning e5 off over a config that weights it: the message's own fix works
        with pytest.raises(ConfigError, match="retrieve.fusion.weights.e5=0 to leave its list out"):
            load_config("fixed", ["retrieve.retrievers.e5.enabled=false"])
        off = load_config("fixed", ["retrieve.retrievers.e5.enabled=false", "retrieve.fusion.weights.e5=0"])
        assert not off.retrieve.retrievers.e5.enabled and off.retrieve.fusion.weights["bm25"] == 0.4
        assert load_config(None, [*E5, "retrieve.mode=e5"]).retrieve.mode == "e5"
        for shipped in (load_config(None), load_config("e5")):
            assert shipped.retrieve.retrievers.e5.enabled and shipped.retrieve.fusion.weights["e5"] > 0
        # bm25-only and dense-only build no e5 vectors, and their resolved configs (so their hashes) do not mention e5
        assert "e5" not in load_config("bm25-only").model_dump()["retrieve"]["retrievers"]

    def test_benchmark_collections_are_keyed_by_e5(self, tmp_path):
        corpus = tmp_path / "c.jsonl"
        corpus.write_text('{"_id": "1", "text": "x"}\n')
        assert corpus_collection([corpus], 256, 32, "minilm") != corpus_collection(
            [corpus], 256, 32, "minilm", fields=["e5"]
        )


@pytest.mark.slow
class TestE5Sharing:
    def test_pipelines_with_the_same_runtime_share_one_e5_model(self, sample_index, embedder):
        """Two pipelines of one process (as the service and an evaluation hold them), both with e5: one e5 model."""
        from switchyard.graphs.pipeline import Pipeline
        from switchyard.nodes.resources import SharedModels

        models = SharedModels()
        configs = [
            load_config("e5", [f"store.uri={sample_index}", f"store.collection=e5-{i}", "answer.method=extractive"])
            for i in range(2)
        ]
        models.provide(configs[0].embedding, embedder)
        first, second = (Pipeline(c, models) for c in configs)
        assert first.resources.stack.field_embedder("e5") is second.resources.stack.field_embedder("e5")
        assert first.resources.stack.field_embedder("e5") is not first.resources.stack.embedder
