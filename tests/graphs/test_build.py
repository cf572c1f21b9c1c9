"""The fixed graph end to end over the sample index; a scripted LLM forces each control-flow path."""

import json

import pytest

from switchyard.graphs.build import route_after_grade
from tests.nodes.scripted import scripted_llm


def _nodes(result):
    return [e.node for e in result.trace]


class TestRouteAfterGrade:
    @pytest.mark.parametrize(
        "state, route",
        [
            ({"verdict": "correct", "graded": [{}], "attempts": 1}, "relevant"),
            ({"verdict": "ambiguous", "graded": [{}], "attempts": 1}, "relevant"),
            ({"verdict": "incorrect", "graded": [], "attempts": 1}, "retry"),
            ({"verdict": "incorrect", "graded": [], "attempts": 2}, "exhausted"),
            ({"verdict": "correct", "graded": [], "attempts": 2}, "exhausted"),
        ],
    )
    def test_routes(self, state, route):
        assert route_after_grade(state, max_retries=1) == route


class TestFixedGraph:
    def test_answer_with_verified_citation_and_trace(self, make_pipeline):
        llm, _ = scripted_llm(
            rewrite='{"query": "knuckle coupler patent"}', answer="Eli Janney patented the knuckle coupler in 1873 [3]."
        )
        result = make_pipeline("grade.method=llm", llm=llm).ask("Who patented the knuckle coupler?")
        assert _nodes(result) == ["rewrite", "retrieve", "rerank", "grade", "answer"]
        assert not result.abstained
        assert result.citations[0].title == "Railway couplers"
        assert result.answer.endswith("[1].")  # renumbered to the passage that supports it
        assert result.queries == ["Who patented the knuckle coupler?", "knuckle coupler patent"]
        grade_step = result.trace[3]
        assert grade_step.llm_calls >= 1 and grade_step.ms > 0
        assert result.usage.llm_calls == sum(e.llm_calls for e in result.trace)
        assert result.config.resolved["grade"]["method"] == "llm" and len(result.config.hash) == 12

    def test_corrective_loop_then_explicit_abstention(self, make_pipeline):
        llm, _ = scripted_llm(
            rewrite=['{"query": "first try"}', '{"query": "second try"}'], grade='{"relevant": false}'
        )
        result = make_pipeline("grade.method=llm", "grade.max_retries=1", llm=llm).ask("What colour is the sky?")
        assert _nodes(result) == ["rewrite", "retrieve", "rerank", "grade"] * 2 + ["abstain"]
        assert result.abstained and result.answer == "Not found in the indexed documents."
        assert result.citations == []
        assert result.queries[-1] == "second try"
        # the second rewrite was told what the first round learnt
        assert "only found unrelated passages" in result.trace[4].input["feedback"]

    def test_max_retries_zero_abstains_after_one_round(self, make_pipeline):
        llm, _ = scripted_llm(grade='{"relevant": false}')
        result = make_pipeline("grade.method=llm", "grade.max_retries=0", llm=llm).ask("Anything?")
        assert _nodes(result) == ["rewrite", "retrieve", "rerank", "grade", "abstain"]

    def test_malformed_llm_output_never_crashes(self, make_pipeline):
        llm, _ = scripted_llm(
            rewrite="I think you should search for trains!",
            grade="maybe?",
            answer="The Janney coupler was patented by Eli Janney in 1873 [1].",
        )
        result = make_pipeline("grade.method=llm", llm=llm).ask("Who patented the knuckle coupler?")
        assert result.failures.parse_fallbacks >= 2  # rewrite and grades fell back deterministically
        assert result.queries == ["Who patented the knuckle coupler?"]
        assert not result.abstained and result.citations

    @pytest.mark.parametrize("num_queries", [1, 3])
    def test_question_longer_than_a_query_survives_a_fallback(self, make_pipeline, num_queries):
        # HotpotQA has questions over 160 characters, the limit on a model-written query
        question = (
            "In the railway yard described in the handbook, which safety rule, written after several "
            "accidents involving workers between cars, says what must never be moved onto a protected track?"
        )
        assert len(question) > 160
        llm, _ = scripted_llm(rewrite="no json here", answer="NOT FOUND")
        result = make_pipeline(f"rewrite.num_queries={num_queries}", llm=llm).ask(question)
        assert result.queries == [question] and result.failures.parse_fallbacks >= 1

    def test_model_says_not_found(self, make_pipeline):
        llm, _ = scripted_llm(answer="NOT FOUND")
        result = make_pipeline(llm=llm).ask("Who patented the knuckle coupler?")
        assert result.abstained and "model found no answer" in result.citation_check["abstain_reason"]

    def test_ambiguous_keeps_only_relevant_passages(self, make_pipeline):
        grades = [
            '{"relevant": true}',
            '{"relevant": false}',
            '{"relevant": false}',
            '{"relevant": false}',
            '{"relevant": false}',
        ]
        llm, _ = scripted_llm(grade=grades, answer="Standard gauge is 1,435 mm [1].")
        result = make_pipeline("grade.method=llm", llm=llm).ask("What is standard gauge?")
        grade_out = result.trace[3].output
        assert grade_out["verdict"] == "ambiguous" and len(grade_out["graded"]) == 1

    def test_no_llm_config_makes_no_llm_call(self, make_pipeline):
        from switchyard.configs.loader import CONFIG_DIR

        result = make_pipeline(config_file=CONFIG_DIR / "no-llm.yaml").ask("What do blue flags protect?")
        assert result.usage.llm_calls == 0 and not result.abstained
        assert "blue flag" in result.answer.lower() and result.citations[0].source.endswith(".pdf")
        assert result.citations[0].page == 1

    def test_where_filter_reaches_retrieval(self, make_pipeline):
        from switchyard.configs.loader import CONFIG_DIR

        result = make_pipeline(config_file=CONFIG_DIR / "no-llm.yaml").ask("railway", where="source~couplers")
        assert all(c.source.endswith("couplers.html") for c in result.citations)

    def test_score_grader_abstains_on_unrelated_question(self, make_pipeline):
        from switchyard.configs.loader import CONFIG_DIR

        result = make_pipeline(config_file=CONFIG_DIR / "no-llm.yaml").ask(
            "What is the recipe for a chocolate soufflé?"
        )
        assert result.abstained and result.trace[-1].node == "abstain"

    def test_empty_question_and_recursion_limit(self, make_pipeline):
        from switchyard.errors import QuestionError

        pipe = make_pipeline()
        with pytest.raises(QuestionError):
            pipe.ask("   ")
        assert pipe.config.graph.recursion_limit == 25

    def test_output_is_json_serialisable(self, make_pipeline):
        llm, _ = scripted_llm(answer="Standard gauge is 1,435 mm [1].")
        json.dumps(make_pipeline(llm=llm).ask("What is standard gauge?").to_json())


class TestAnswerFallbacks:
    def test_unsupported_llm_answer_falls_back_to_extractive(self, make_pipeline):
        llm, _ = scripted_llm(answer="Magnetic levitation lets trains float over the moon [1].")
        result = make_pipeline(llm=llm).ask("What do blue flags protect?")
        assert not result.abstained and "blue flag" in result.answer.lower()
        assert result.citation_check["fallback"].startswith("extractive (no sentence")

    def test_repetitive_llm_answer_falls_back(self, make_pipeline):
        llm, _ = scripted_llm(answer="use a combination of " * 10)
        result = make_pipeline(llm=llm).ask("What do blue flags protect?")
        assert result.citation_check["fallback"] == "extractive (the model's answer was repetitive)"

    def test_partly_invented_answer_keeps_only_supported_sentences(self, make_pipeline):
        llm, _ = scripted_llm(
            answer="The Janney coupler was patented by Eli Janney in 1873 [1]. "
            "Janney later became president of France [1]."
        )
        result = make_pipeline(llm=llm).ask("Who patented the knuckle coupler?")
        assert "France" not in result.answer and "Eli Janney" in result.answer
        assert result.citation_check["removed"] == 1
