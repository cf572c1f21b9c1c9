"""The research's metrics (evaluation/research_metrics.py): answer similarity with the packaged MiniLM, RAGAS-style
answer and context relevance from scripted judge replies, the resumable judging pass, and the paired statistics
over them in the report."""

import json

import pytest

from switchyard.evaluation.report import aggregate, markdown
from switchyard.evaluation.research_metrics import (
    RelevanceJudge,
    attach,
    judgements_file,
    similarity_scores,
    with_similarity,
)
from switchyard.evaluation.rows import EvalRow
from switchyard.llm.client import LLM
from tests.scripted_backend import ScriptedBackend

COUPLER = {"n": 1, "doc_id": "a", "text": "Eli Janney patented the knuckle coupler in 1873. Cats sleep a lot."}
YARD = {"n": 2, "doc_id": "b", "text": "Bailey Yard is in North Platte. It is the largest yard. Tea is hot."}


def row(qid="q1", config="a", run=0, **kw):
    base = {"config": config, "run": run, "id": qid, "question": "Who patented the knuckle coupler?"}
    return EvalRow(**{**base, "answers": ["Eli Janney"], **kw})


class TestAnswerSimilarity:
    def test_identical_answer_scores_one_and_unrelated_scores_low(self, embedder):
        same, unrelated = similarity_scores(
            [row(prediction="Eli Janney [1]"), row(prediction="a bowl of tomato soup")], embedder.run
        )
        assert same == pytest.approx(1.0, abs=1e-4)  # the citation marker is stripped first
        assert unrelated < 0.3

    def test_best_gold_alternative_counts(self, embedder):
        (score,) = similarity_scores([row(answers=["1,435 mm", "1435 mm"], prediction="1435 mm")], embedder.run)
        assert score == pytest.approx(1.0, abs=1e-4)

    def test_blind_spot_a_paraphrase_of_a_wrong_answer_scores_high(self, embedder):
        """The gold says 1873; the answer says 1874 in other words. F1 and EM say wrong; similarity barely
        moves: it rewards the wording, not the fact (docs/evaluation.md)."""
        gold = "Eli Janney patented the knuckle coupler in 1873"
        wrong = row(answers=[gold], prediction="The knuckle coupler was patented by Eli Janney in 1874.").rescored()
        (score,) = similarity_scores([wrong], embedder.run)
        assert wrong.exact_match == 0.0 and score > 0.85

    def test_abstentions_and_errors_score_zero_and_no_gold_is_none(self, embedder):
        scores = similarity_scores(
            [
                row(prediction="", abstained=True),
                row(prediction="", error="LLMError: down"),
                row(prediction="[1]"),  # nothing but a citation: empty
                row(prediction="hello", answers=[], type="small_talk", abstained=False),
                row(prediction="anything", type="out_of_scope"),
            ],
            embedder.run,
        )
        assert scores == [0.0, 0.0, 0.0, None, None]

    def test_list_answers_are_compared_as_one_text(self, embedder):
        golds = ["Alice", "Bob"]
        full, part = similarity_scores(
            [
                row(answers=golds, is_list=True, prediction="Alice, Bob"),
                row(answers=golds, is_list=True, prediction="Bob"),
            ],
            embedder.run,
        )
        assert full == pytest.approx(1.0, abs=1e-4) and part < full

    def test_each_text_is_embedded_once(self, embedder):
        seen = []

        def embed(texts):
            seen.append(list(texts))
            return embedder.run(texts)

        rows = with_similarity([row(prediction="Eli Janney"), row(qid="q2", prediction="Eli Janney")], embed)
        assert seen == [["Eli Janney"]] and [r.answer_similarity for r in rows] == [pytest.approx(1.0, abs=1e-4)] * 2


def questions_from(text):
    """A scripted generator: questions echo the answer's subject, or nonsense for an answer about soup."""
    if "soup" in text:
        return ["What is for dinner?", "Is soup warm?", "Which bowl?"]
    return ["Who patented the knuckle coupler?", "Who patented the coupler?", "Who invented the knuckle coupler?"]


def scripted_judge(messages, schema):
    system, user = messages[0]["content"], messages[1]["content"]  # the repair round keeps both
    if "garble" in user:
        return "not json"
    if "questions" in system:
        return json.dumps({"questions": questions_from(user)})
    # context: the sentences that share a content word with the question's subject
    lines = user.split("Sentences:\n")[1].splitlines()
    return json.dumps(
        {"relevant": [int(n) for n, s in (line.split(". ", 1) for line in lines) if "coupler" in s] + [99]}
    )


def make_judge(embedder, replies=scripted_judge, name="scripted:test"):
    backend = ScriptedBackend(replies)
    return RelevanceJudge(LLM(backend, max_retries=0), name, embedder.run), backend


class TestAnswerRelevance:
    def test_on_topic_answer_scores_high_off_topic_low(self, embedder):
        judge, backend = make_judge(embedder)
        on = judge.answer_relevance("Who patented the knuckle coupler?", "Eli Janney patented it in 1873.")
        off = judge.answer_relevance("Who patented the knuckle coupler?", "A bowl of tomato soup.")
        assert on["generated_questions"][0] == "Who patented the knuckle coupler?" and on["judge_calls"] == 1
        assert on["answer_relevance"] > 0.8 > 0.3 > off["answer_relevance"]
        assert "3 different short questions" in backend.calls[0][0]["content"]

    def test_blind_spot_relevance_ignores_factuality(self, embedder):
        """A wrong answer on topic scores as high as the right one: the same questions come back."""
        judge, _ = make_judge(embedder)
        right = judge.answer_relevance("Who patented the knuckle coupler?", "Eli Janney patented it.")
        wrong = judge.answer_relevance("Who patented the knuckle coupler?", "Thomas Edison patented it.")
        assert wrong["answer_relevance"] == pytest.approx(right["answer_relevance"])

    def test_unparseable_reply_is_left_unjudged(self, embedder):
        judge, backend = make_judge(embedder)
        out = judge.answer_relevance("Who?", "garble")
        assert out["answer_relevance"] is None and out["judge_fallbacks"] == 1 and len(backend.calls) == 2  # repair

    def test_abstention_scores_zero_without_a_call(self, embedder, tmp_path):
        judge, backend = make_judge(embedder)
        (got,) = judge.judge_results([row(prediction="", abstained=True)], "answer_relevance", tmp_path)
        assert got["answer_relevance"] == 0.0 and not backend.calls


class TestContextRelevance:
    def test_share_of_relevant_sentences_over_cited_passages(self, embedder):
        judge, backend = make_judge(embedder)
        out = judge.context_relevance("Who patented the knuckle coupler?", [COUPLER, YARD])
        # 1 of 2 sentences, 0 of 3; the out-of-range sentence number 99 is ignored
        assert out["context_relevance"] == pytest.approx(1 / 5) and out["judge_calls"] == 2 == len(backend.calls)
        assert [p["relevant"] for p in out["passages"]] == [[1], []]

    def test_no_cited_passage_is_none_and_a_broken_passage_is_left_out(self, embedder):
        judge, backend = make_judge(embedder)
        assert judge.context_relevance("q", [])["context_relevance"] is None and not backend.calls
        garbled = {"n": 3, "doc_id": "c", "text": "garble garble. more garble."}
        out = judge.context_relevance("Who patented the knuckle coupler?", [COUPLER, garbled])
        assert out["context_relevance"] == 0.5 and out["judge_fallbacks"] == 1


class TestJudgingPass:
    def rows(self):
        return [
            row("q1", prediction="Eli Janney", answer="Eli Janney patented it [1].", citations=[COUPLER]),
            row("q2", prediction="soup", answer="A bowl of tomato soup [2].", citations=[YARD]),
            row("q3", prediction="", abstained=True),
            row("q4", error="LLMError: down"),
        ]

    def test_resumes_and_attaches(self, embedder, tmp_path):
        judge, backend = make_judge(embedder)
        judge.judge_results(self.rows()[:1], "context_relevance", tmp_path)
        path = tmp_path / judgements_file("context_relevance")
        with path.open("a") as fh:  # killed mid-write
            fh.write('{"config": "a", "run": 0, "id": "q2", "ju')
        got = judge.judge_results(self.rows(), "context_relevance", tmp_path)
        assert len(backend.calls) == 2  # q1 once (first pass), q2 once; q3 costs nothing; q4 errored: skipped
        assert sorted(j["id"] for j in got) == ["q1", "q2", "q3"]
        judged = attach(self.rows(), "context_relevance", got)
        assert [r.context_relevance for r in judged] == [0.5, 0.0, None, None]
        assert [r.relevance_fallbacks for r in judged] == [0, 0, 0, None]

    def test_another_judge_judges_again(self, embedder, tmp_path):
        make_judge(embedder)[0].judge_results(self.rows()[:2], "answer_relevance", tmp_path)
        other, backend = make_judge(embedder, name="scripted:other")
        got = other.judge_results(self.rows()[:2], "answer_relevance", tmp_path)
        assert len(backend.calls) == 2 and {j["judge"] for j in got} == {"scripted:other"}


def scored(config, qid, sim, **kw):
    return EvalRow(
        config=config, run=0, id=qid, answers=["x"], prediction="x", answer_similarity=sim, difficulty="1", **kw
    )


class TestPairedOverNewMetrics:
    def test_difference_interval_and_report(self):
        # b beats a by exactly 0.2 on every question; c by 0.1, 0.2, 0.3
        a = [scored("a", f"q{i}", 0.5) for i in range(6)]
        b = [scored("b", f"q{i}", 0.7) for i in range(6)]
        c = [scored("c", f"q{i}", 0.5 + [0.1, 0.2, 0.3][i % 3]) for i in range(6)]
        report = aggregate(a + b + c, baseline="a")
        pb, pc = report["paired"]["b"]["answer_similarity"], report["paired"]["c"]["answer_similarity"]
        assert pb["diff"] == pytest.approx(0.2) and pb["ci95"] == [pytest.approx(0.2)] * 2 and pb["wins"] == 6
        assert pc["diff"] == pytest.approx(0.2) and 0.1 <= pc["ci95"][0] < 0.2 < pc["ci95"][1] <= 0.3
        assert pc["p"] < 0.05 and pc["p_holm"] >= pc["p"]
        assert report["configs"]["b"]["answer_similarity"]["mean"] == pytest.approx(0.7)
        assert report["configs"]["c"]["ci95"]["answer_similarity"]["mean"] == pytest.approx(0.7)
        text = markdown(report, "t")
        assert "| answer_similarity | 0.500 ± –" in text and "| b | answer_similarity | +0.200" in text
        assert "answer_relevance" not in text  # not computed: not shown

    def test_rows_without_a_value_are_left_out_of_the_pairs(self):
        a = [scored("a", "q1", 0.5), scored("a", "q2", None), scored("a", "q3", 0.5)]
        b = [scored("b", "q1", 0.9), scored("b", "q2", 0.1), scored("b", "q3", None)]
        pb = aggregate(a + b, baseline="a")["paired"]["b"]["answer_similarity"]
        assert pb["n"] == 1 and pb["diff"] == pytest.approx(0.4)

    def test_existing_report_unchanged_without_the_new_metrics(self):
        report = aggregate([scored("a", "q1", None), scored("b", "q1", None)], baseline="a")
        assert set(report["paired"]["b"]) == {"f1", "contains"}
        assert set(report["configs"]["a"]["ci95"]) == {"f1", "contains", "exact_match"}
