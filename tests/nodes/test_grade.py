"""The corrective check's score method: cosine thresholds plus word coverage (no refusal of a passage that holds
the question's words)."""

from __future__ import annotations

import pytest
from langgraph.runtime import Runtime

from switchyard.configs.loader import load_config
from switchyard.nodes.grade import grade, singular, word_coverage
from switchyard.nodes.resources import Resources, SharedModels
from switchyard.retrievers.documents import Passage
from switchyard.run_context import RunContext

QUESTION = "Who is the father-in-law of the person whose occupation is careers adviser?"
ARTICLE = Passage(
    chunk_id="pw-1",
    doc_id="pw-1",
    title="Alvaro Ruth",
    source="articles.json",
    text="Alvaro Ruth was born in 0205. The occupation of Alvaro Ruth is careers adviser. The father-in-law "
    "of Alvaro Ruth is Rodney Reyna. The friend of Alvaro Ruth is Carly Gauthier.",
)
UNRELATED = Passage(
    chunk_id="x-1",
    doc_id="x-1",
    title="Blue flag",
    source="handbook.pdf",
    text="A blue flag protects workers on a track; no car may be moved onto it.",
)


class TestWordCoverage:
    def test_share_of_content_words(self):
        assert word_coverage("blue flags protect workers", "Blue flags protect trains.") == pytest.approx(3 / 4)

    def test_no_content_words(self):
        assert word_coverage("who is it?", "anything") == 0.0

    def test_plural_in_the_question_matches_the_singular_in_the_passage(self):
        passage = "The daughter of Geri Deluna is Alycia Cormier. The hobby of Geri Deluna is audiophile."
        question = "How many daughters does the person whose hobby is audiophile have?"
        # daughter, hobby, audiophile of {daughter, person, hobby, audiophile}; "does" is not a content word
        assert word_coverage(question, passage) == pytest.approx(3 / 4)

    @pytest.mark.parametrize(
        "plural, single",
        [
            ("daughters", "daughter"),
            ("uncles", "uncle"),
            ("cities", "city"),
            ("children", "child"),
            ("glass", "glass"),
            ("bus", "bus"),
            ("analysis", "analysis"),
            ("is", "is"),
        ],
    )
    def test_singular(self, plural, single):
        assert singular(plural) == single


class TestScoreVerdict:
    @pytest.fixture
    def run(self, sample_index, embedder):
        def run(passages, *overrides):  # passages not in the index are embedded afresh
            cfg = load_config(None, [f"store.uri={sample_index}", *overrides])
            models = SharedModels()
            models.provide(cfg.embedding, embedder)
            return grade(
                {"question": QUESTION, "reranked": passages}, Runtime(context=RunContext()), Resources(cfg, models)
            )

        return run

    def test_covered_passage_is_kept_despite_a_low_cosine(self, run):
        # a cosine bar no passage reaches: only the coverage rule keeps the article
        out = run([UNRELATED, ARTICLE], "grade.thresholds.incorrect=0.55")
        assert out["verdict"] == "ambiguous" and [p.doc_id for p in out["graded"]] == ["pw-1"]

    def test_without_coverage_the_same_passages_are_refused(self, run):
        out = run([UNRELATED, ARTICLE], "grade.thresholds.incorrect=0.55", "grade.thresholds.coverage=1.01")
        assert out["verdict"] == "incorrect" and out["graded"] == []

    def test_unrelated_passages_are_still_refused(self, run):
        out = run([UNRELATED])
        assert out["verdict"] == "incorrect"
