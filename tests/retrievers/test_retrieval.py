"""Retrievers, fusion and rerankers end to end on a real LanceDB index with the real embedding model."""

import json
import re

import pytest

from switchyard.errors import RerankerError
from switchyard.retrievers.rerankers import CrossEncoderReranker, LLMReranker
from switchyard.run_context import ALL
from tests.conftest import FIXTURES, SAMPLES
from tests.together import run_together


@pytest.fixture
def sample_stack(make_stack):
    stack = make_stack()
    stack.ingestor(progress=False).run([SAMPLES])
    return stack


class TestRetrievers:
    @pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
    def test_each_mode_finds_the_right_document(self, make_stack, mode):
        stack = make_stack(f"retrieve.mode={mode}")
        stack.ingestor(progress=False).run([SAMPLES])
        hits = stack.search("Who patented the knuckle coupler?", groups=ALL).passages
        assert hits[0].title == "Railway couplers"
        expected = {"bm25": {"bm25"}, "dense": {"dense"}, "hybrid": {"bm25", "dense", "fused"}}[mode]
        assert expected <= set(hits[0].scores)

    def test_rank_bm25_backend_matches_lancedb_on_top_hit(self, make_stack):
        stack = make_stack("retrieve.mode=bm25", "retrieve.retrievers.bm25.backend=rank_bm25")
        stack.ingestor(progress=False).run([SAMPLES])
        hits = stack.search("interlocking lever frames points", groups=ALL).passages
        assert hits[0].title == "Railway signalling"
        assert stack.retriever.retrievers[0].k1 == 1.2

    def test_rank_bm25_k1_b_change_scores(self, make_stack):
        scores = []
        for k1, b in ((1.2, 0.75), (2.0, 0.2)):
            stack = make_stack(
                "retrieve.mode=bm25",
                "retrieve.retrievers.bm25.backend=rank_bm25",
                f"retrieve.retrievers.bm25.k1={k1}",
                f"retrieve.retrievers.bm25.b={b}",
            )
            stack.ingestor(progress=False).run([SAMPLES])
            scores.append(stack.search("standard gauge", groups=ALL).passages[0].score)
        assert scores[0] != pytest.approx(scores[1])

    def test_rank_bm25_index_follows_table_changes(self, make_stack, tmp_path):
        stack = make_stack("retrieve.mode=bm25", "retrieve.retrievers.bm25.backend=rank_bm25")
        (tmp_path / "a.txt").write_text("zebras graze on the savanna")
        stack.ingestor(progress=False).run([tmp_path / "a.txt"])
        assert stack.search("zebras", groups=ALL).passages
        (tmp_path / "b.txt").write_text("okapis live in the forest")
        stack.ingestor(progress=False).run([tmp_path / "b.txt"])
        assert stack.search("okapis", groups=ALL).passages[0].text == "okapis live in the forest"

    @pytest.mark.parametrize("backend", ["lancedb", "rank_bm25"])
    def test_where_filter_restricts_results(self, make_stack, backend):
        stack = make_stack(f"retrieve.retrievers.bm25.backend={backend}")
        stack.ingestor(progress=False).run([SAMPLES])
        hits = stack.search("gauge couplers yards signals", top_k=10, where="source~.md", groups=ALL).passages
        assert hits and all(p.source.endswith(".md") for p in hits)
        pdf_hits = stack.search("blue flag", where="source~handbook and page=1", groups=ALL).passages
        assert pdf_hits and all(p.page == 1 and p.source.endswith(".pdf") for p in pdf_hits)
        assert stack.search("blue flag", where="title='nothing like this'", groups=ALL).passages == []

    def test_fusion_settings_come_from_config(self, make_stack):
        stack = make_stack(
            "retrieve.fusion.method=rrf",
            "retrieve.fusion.rrf_k=10",
            "retrieve.fusion.weights={bm25: 2, dense: 1}",
            "retrieve.fusion.adaptive_power=0",
        )
        stack.ingestor(progress=False).run([SAMPLES])
        top = stack.search("track gauge of Russia", groups=ALL).passages[0]
        expected = sum(w / (10 + top.ranks[n]) for n, w in (("bm25", 2), ("dense", 1)) if n in top.ranks)
        assert top.scores["fused"] == pytest.approx(expected)

    def test_normalization_and_adaptive_weights_come_from_config(self, make_stack):
        from switchyard.retrievers.fusion import adaptive_weights

        stack = make_stack(
            "retrieve.fusion.normalization=max",
            "retrieve.fusion.adaptive_power=2",
            "retrieve.fusion.weights={bm25: 0.5, dense: 0.5}",
        )
        stack.ingestor(progress=False).run([SAMPLES])
        ranked = stack.retriever.run_each("track gauge of Russia")
        top = stack.retriever.fuse(ranked)[0]
        assert {"bm25", "dense"} <= set(top.scores)
        w = adaptive_weights(ranked, {"bm25": 0.5, "dense": 0.5}, power=2, depth=100)
        assert w["bm25"] != pytest.approx(0.5)  # the lists' shapes moved the weights
        best = {name: max(p.score for p in passages) for name, passages in ranked.items()}
        expected = sum(w[name] * top.scores[name] / best[name] for name in ranked) / sum(w.values())
        assert top.scores["fused"] == pytest.approx(expected)

    def test_object_store_uri_is_passed_through(self, make_stack):
        stack = make_stack(uri="s3://bucket/switchyard-index")
        assert stack.store.uri == "s3://bucket/switchyard-index"


class TestRerankers:
    def test_dense_rescore_reorders_and_records_scores(self, make_stack):
        stack = make_stack("rerank.method=dense_rescore", "rerank.top_k=3")
        stack.ingestor(progress=False).run([SAMPLES])
        result = stack.search("What brakes the cars rolling down the hump?", groups=ALL)
        assert len(result.passages) == 3
        assert all("dense_rescore" in p.scores and "rescore_cosine" in p.scores for p in result.passages)
        assert result.passages == sorted(result.passages, key=lambda p: -p.score)

    def test_llm_hook_is_used(self, make_stack):
        stack = make_stack("rerank.method=llm", "rerank.top_k=2")
        from switchyard.llm.client import LLM
        from tests.scripted_backend import ScriptedBackend

        def score(messages, schema):  # the LLM rates the passage that names Janney highest
            return f'{{"relevant": true, "score": {10 if "Janney" in messages[-1]["content"] else 0}}}'

        stack._get_llm = lambda: LLM(ScriptedBackend(score))
        stack.ingestor(progress=False).run([SAMPLES])
        assert stack.search("railway", groups=ALL).passages[0].title == "Railway couplers"

    def test_llm_reranker_without_backend_is_clear_error(self):
        with pytest.raises(RerankerError, match="needs an LLM backend"):
            LLMReranker(None)

    @pytest.mark.slow  # reaches the cross-encoder loader
    def test_missing_cross_encoder_is_clear_error(self, sample_stack, tmp_path):
        reranker = CrossEncoderReranker(str(tmp_path / "no-such-model"))
        with pytest.raises(RerankerError, match="not available locally"):
            reranker.run("q", sample_stack.search("gauge", rerank=False, groups=ALL).passages)

    @pytest.mark.slow  # loads a cross-encoder
    def test_cross_encoder_from_a_local_folder(self, sample_stack, tmp_path):
        # No cross-encoder weights ship in any package; build a tiny one from the MiniLM weights to prove
        # that a local folder loads and scores (its ranking quality is not the point here).
        from sentence_transformers import CrossEncoder

        from switchyard.retrievers.embedder import resolve_model_dir

        CrossEncoder(str(resolve_model_dir("minilm")), num_labels=1, device="cpu").save_pretrained(str(tmp_path / "ce"))
        reranker = CrossEncoderReranker(str(tmp_path / "ce"), top_k=3)
        out = reranker.run("gauge", sample_stack.search("gauge", top_k=5, rerank=False, groups=ALL).passages)
        assert len(out) == 3 and all("cross_encoder" in p.scores for p in out)


@pytest.mark.slow
class TestRetrievalQuality:
    """On PhantomWiki articles, single-hop questions built from each article's facts find that article."""

    def test_right_article_in_top3_for_most_single_hop_questions(self, make_stack):
        articles = json.loads((FIXTURES / "phantomwiki_articles.json").read_text())
        stack = make_stack(collection="phantom")
        report = stack.ingestor(progress=False).run([FIXTURES / "phantomwiki_articles.json"])
        assert report.added == len(articles)
        questions = []
        for art in articles:
            for fact in art["facts"]:
                m = re.match(r'(\w+)\("([^"]+)", "([^"]+)"\)\.', fact)
                if m and m.group(1) in {"mother", "father", "job", "hobby", "dob"}:
                    relation = {"job": "occupation", "dob": "date of birth"}.get(m.group(1), m.group(1))
                    questions.append((f"What is the {relation} of {m.group(2)}?", art["title"]))
                    break
        assert len(questions) >= 50
        hits = sum(title in [p.doc_id for p in stack.search(q, top_k=3, groups=ALL).passages] for q, title in questions)
        assert hits / len(questions) >= 0.8


@pytest.mark.slow
def test_ann_vector_index_is_built_past_threshold_and_used(make_stack):
    stack = make_stack("store.vector_index_min_rows=50", collection="ann")
    stack.ingestor(progress=False).run([FIXTURES / "phantomwiki_articles.json"])
    types = {ix.index_type.upper() for ix in stack.store.table().list_indices()}
    assert "FTS" in types and any(t.startswith("IVF") for t in types)
    hits = stack.search("What is the hobby of Abraham Kindred?", top_k=3, groups=ALL).passages
    assert "Abraham Kindred" in [p.doc_id for p in hits]


class TestConcurrentSearch:
    QUERIES = [
        "Who patented the knuckle coupler?",
        "standard gauge",
        "hump yard retarders",
        "block signalling",
        "blue flag protection",
        "narrow gauge railways",
        "automatic couplers",
        "classification tracks",
    ]

    @pytest.mark.parametrize("backend", ["lancedb", "rank_bm25"])
    def test_searches_from_many_threads_equal_sequential(self, make_stack, backend):
        stack = make_stack(f"retrieve.retrievers.bm25.backend={backend}")
        stack.ingestor(progress=False).run([SAMPLES])
        stack.embedder.clear_cache()

        def ids(query):
            return [(p.chunk_id, round(p.score, 6)) for p in stack.search(query, groups=ALL).passages]

        together = run_together(len(self.QUERIES), lambda i: ids(self.QUERIES[i]))
        assert together == [ids(q) for q in self.QUERIES]

    def test_rank_bm25_rebuild_while_searching_never_mixes_versions(self, make_stack, tmp_path):
        """One thread changes the table while seven search: each search sees the old or the new index whole."""
        stack = make_stack("retrieve.mode=bm25", "retrieve.retrievers.bm25.backend=rank_bm25")
        (tmp_path / "a.txt").write_text("zebras graze on the savanna near the railway")
        stack.ingestor(progress=False).run([tmp_path / "a.txt"])
        (tmp_path / "b.txt").write_text("okapis live in the forest, far from any railway")

        def act(i):
            if i == 0:
                stack.ingestor(progress=False).run([tmp_path / "b.txt"])
                return None
            return {p.text for p in stack.search("railway", top_k=5, groups=ALL).passages}

        seen = [s for s in run_together(8, act) if s is not None]
        old = {"zebras graze on the savanna near the railway"}
        new = old | {"okapis live in the forest, far from any railway"}
        assert all(s in (old, new) for s in seen)
        assert {p.text for p in stack.search("railway", top_k=5, groups=ALL).passages} == new

    def test_query_vectors_from_many_threads_equal_sequential(self, embedder):
        import numpy as np

        embedder.clear_cache()
        texts = [f"question number {i} about railway couplers" for i in range(16)]
        together = run_together(16, lambda i: embedder.embed_query(texts[i]))
        embedder.clear_cache()
        for text, vector in zip(texts, together):
            assert np.allclose(vector, embedder.embed_query(text), atol=1e-6)
