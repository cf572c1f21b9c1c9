"""Short-answer shapes, grounding and extractive spans on hand-made questions and passages."""

from __future__ import annotations

import re

import pytest

from switchyard.nodes.answer import compose, ground
from switchyard.nodes.short_answer import (
    clean_answer,
    extractive_span,
    grounded_in,
    match_option,
    occurs_in,
    question_shape,
    split_list,
    sub_spans,
)
from switchyard.retrievers.documents import Passage

PASSAGES = [
    Passage(
        chunk_id="a-0",
        doc_id="a",
        title="Eli Janney",
        source="a.md",
        page=None,
        text="Eli H. Janney was an American inventor. He patented the knuckle coupler in 1873. "
        "The patent was granted on April 29, 1873.",
    ),
    Passage(
        chunk_id="b-0",
        doc_id="b",
        title="Blue flag",
        source="b.md",
        page=None,
        text="A blue flag protects workers under a car. The rule covers 1,200 yards of track and twelve crews.",
    ),
]


class TestQuestionShape:
    def test_yes_no(self):
        assert question_shape("Were Scott Derrickson and Ed Wood of the same nationality?").kind == "yes_no"

    def test_choice_after_comma(self):
        shape = question_shape("Which is older, the Eiffel Tower or Big Ben?")
        assert shape.kind == "choice" and shape.options == ["the Eiffel Tower", "Big Ben"]

    def test_choice_between(self):
        shape = question_shape("Between Harvey Pekar and Denise Levertov who was born earlier?")
        assert shape.kind == "choice" and shape.options == ["Harvey Pekar", "Denise Levertov"]

    def test_choice_without_comma_takes_the_capitalised_run(self):
        shape = question_shape("Which magazine was started first Arthur's Magazine or First for Women?")
        assert shape.options == ["Arthur's Magazine", "First for Women"]

    @pytest.mark.parametrize(
        "question,expects",
        [
            ("How many crews does the rule cover?", "number"),
            ("When was the knuckle coupler patented?", "date"),
            ("In what year was the coupler patented?", "date"),
            ("Who patented the knuckle coupler?", "name"),
            ("What does a blue flag protect?", "phrase"),
        ],
    )
    def test_expected_type(self, question, expects):
        shape = question_shape(question)
        assert shape.kind == "open" and shape.expects == expects


class TestOccurrence:
    @pytest.mark.parametrize(
        "answer",
        [
            "Eli H. Janney",
            "eli h janney",
            "1873",
            "April 29, 1873",
            "29 April 1873",
            "1873-04-29",
            "1200 yards",
            "12 crews",
            "twelve",
        ],
    )
    def test_present(self, answer):
        assert occurs_in(answer, " ".join(p.text for p in PASSAGES))

    @pytest.mark.parametrize(
        "answer", ["George Westinghouse", "1874", "April 28, 1873", "Janney Coupler Co", "13 crews"]
    )
    def test_absent(self, answer):
        assert not occurs_in(answer, " ".join(p.text for p in PASSAGES))

    def test_whole_words_only(self):
        assert not occurs_in("car", "A cartwheel.") and occurs_in("car", "Under a car.")

    def test_grounded_in_prefers_the_named_passage_and_finds_another(self):
        assert grounded_in("1873", PASSAGES, prefer=0) == 0
        assert grounded_in("twelve crews", PASSAGES, prefer=0) == 1
        assert grounded_in("Westinghouse", PASSAGES) is None

    def test_title_counts(self):
        assert grounded_in("Blue flag", PASSAGES) == 1


class TestModelAnswer:
    @pytest.mark.parametrize(
        "raw,clean",
        [("The answer is Eli Janney [1].", "Eli Janney"), (' "1873". ', "1873"), ("Yes, they were.", "Yes, they were")],
    )
    def test_clean(self, raw, clean):
        assert clean_answer(raw) == clean

    def test_yes_no_options(self):
        shape = question_shape("Is a blue flag a signal?")
        assert match_option("Yes", shape) == "yes" and match_option("no.", shape) == "no"
        assert match_option("Blue", shape) is None

    def test_choice_names_the_first_option_mentioned(self):
        shape = question_shape("Who has won more medals, Debi Thomas or Katarina Witt?")
        assert match_option("Katarina Witt has won more medals than Debi Thomas", shape) == "Katarina Witt"

    def test_sub_spans_leave_out_the_question(self):
        q = "This film is an adaption of Jacques Offenbach's opera written by whom?"
        parts = sub_spans("1. The Tales of Hoffmann (film) - Jacques Offenbach's opera", q)
        assert "The Tales of Hoffmann" in parts and "Jacques Offenbach's opera" not in parts

    def test_choice_options(self):
        shape = question_shape("Which is older, the Eiffel Tower or Big Ben?")
        assert match_option("Big Ben", shape) == "Big Ben"
        assert match_option("Eiffel Tower", shape) == "the Eiffel Tower"
        assert match_option("the London Eye", shape) is None

    def test_split_list(self):
        assert split_list("Ann Lee, Bo Diaz and Cy Ng") == ["Ann Lee", "Bo Diaz", "Cy Ng"]
        assert split_list("Eli Janney") == ["Eli Janney"]


class TestExtractiveSpan:
    def test_name_not_in_question(self):
        shape = question_shape("Who patented the knuckle coupler?")
        assert (
            extractive_span(
                "Who patented the knuckle coupler?",
                shape,
                ["He patented the knuckle coupler in 1873, said Eli Janney."],
            )
            == "Eli Janney"
        )

    def test_date_span(self):
        q = "When was the patent granted?"
        assert extractive_span(q, question_shape(q), ["The patent was granted on April 29, 1873."]) == "April 29, 1873"

    def test_number_span(self):
        q = "How many yards does the rule cover?"
        assert extractive_span(q, question_shape(q), ["The rule covers 1,200 yards of track."]) == "1,200"

    def test_name_after_by_beats_the_sentence_start(self):
        q = "Who patented the knuckle coupler?"
        assert (
            extractive_span(q, question_shape(q), ["The Janney coupler was patented by Eli Janney in 1873."])
            == "Eli Janney"
        )

    def test_phrase_after_the_question_verb(self):
        q = "What do blue flags protect?"
        assert (
            extractive_span(
                q, question_shape(q), ["Hump yards matter.", "Blue flags protect workers on a track: no car may move."]
            )
            == "workers on a track"
        )

    def test_nothing_of_the_type(self):
        q = "When was it granted?"
        assert extractive_span(q, question_shape(q), ["no dates here at all"]) == ""


def ranked(*entries):
    return [(i, s, 1.0 - k / 10) for k, (i, s) in enumerate(entries)]


class TestGround:
    RANKED = ranked(
        (0, "He patented the knuckle coupler in 1873."),
        (0, "Eli H. Janney was an American inventor."),
        (1, "A blue flag protects workers under a car."),
    )

    def test_open_answer_in_a_passage(self):
        found = ground("1873", question_shape("When was it patented?"), PASSAGES, self.RANKED, 0, 2)
        assert found["short"] == "1873" and found["passages"] == [0]
        assert found["evidence"][0][1] == "He patented the knuckle coupler in 1873."

    def test_open_answer_in_no_passage_is_ungrounded(self):
        assert ground("1875", question_shape("When was it patented?"), PASSAGES, self.RANKED, 0, 2) is None

    def test_list_keeps_grounded_items_and_reports_the_others(self):
        found = ground("Eli H. Janney, Mary Smith", question_shape("Who worked on it?"), PASSAGES, self.RANKED, 0, 2)
        assert found["short"] == "Eli H. Janney" and found["dropped"] == ["Mary Smith"]

    def test_yes_no_needs_yes_or_no(self):
        shape = question_shape("Was the coupler patented?")
        assert ground("yes", shape, PASSAGES, self.RANKED, None, 2)["short"] == "yes"
        assert ground("1873", shape, PASSAGES, self.RANKED, None, 2) is None

    def test_choice_must_be_an_indexed_option(self):
        shape = question_shape("Who was first, Eli H. Janney or George Westinghouse?")
        assert ground("Eli H. Janney", shape, PASSAGES, self.RANKED, None, 2)["short"] == "Eli H. Janney"
        assert ground("George Westinghouse", shape, PASSAGES, self.RANKED, None, 2) is None  # not in any passage
        assert ground("Thomas Edison", shape, PASSAGES, self.RANKED, None, 2) is None  # not an option


class TestReplyModel:
    def test_yes_no_and_choice_are_constrained(self):
        from switchyard.nodes.answer import reply_model

        yes_no = reply_model(question_shape("Is it red?")).model_json_schema()
        assert yes_no["properties"]["answer"]["enum"] == ["yes", "no"]
        choice = reply_model(question_shape("Which is older, Big Ben or the Eiffel Tower?")).model_json_schema()
        assert choice["properties"]["answer"]["enum"] == ["Big Ben", "the Eiffel Tower"]
        assert "description" not in reply_model(question_shape("Who?")).model_json_schema()["properties"]["answer"]


class TestCompose:
    def test_numbers_follow_first_use(self):
        out = compose(
            "twelve crews", [1], ranked((1, "The rule covers twelve crews."), (0, "Janney was an inventor.")), PASSAGES
        )
        assert out["answer"] == "twelve crews [1]\n\nThe rule covers twelve crews [1]. Janney was an inventor [2]."
        assert [c.doc_id for c in out["citations"]] == ["b", "a"]
        assert out["short_answer"] == "twelve crews" and out["evidence"].startswith("The rule")

    def test_evidence_alone(self):
        out = compose("", [], ranked((0, "Janney was an inventor.")), PASSAGES)
        assert out["answer"] == "Janney was an inventor [1]." and out["short_answer"] == ""


class TestShortAnswerNode:
    """The answer node in `short` format, on the sample index, with a scripted model (or none)."""

    QUESTION = "Who patented the knuckle coupler?"

    def ask(self, make_pipeline, reply, *overrides):
        from tests.nodes.scripted import scripted_llm

        llm, _ = scripted_llm(rewrite='{"query": "knuckle coupler patent"}', answer=reply)
        return make_pipeline(*overrides, llm=llm, answer_format="short").ask(self.QUESTION)

    def test_grounded_short_answer_comes_first_with_evidence(self, make_pipeline):
        result = self.ask(make_pipeline, '{"answer": "Eli Janney.", "passage": 1}')
        assert result.short_answer == "Eli Janney" and not result.abstained
        assert result.grounding["status"] == "grounded" and result.grounding["shown"] == "short_answer"
        assert result.answer.startswith("Eli Janney [1]\n\n") and result.answer.endswith(result.evidence)
        assert "Janney" in result.evidence and "[1]" in result.evidence
        cited = {c.n for c in result.citations}
        assert cited == {int(n) for n in re.findall(r"\[(\d+)\]", result.answer)}

    def test_ungrounded_answer_is_replaced_by_the_extractive_span(self, make_pipeline):
        result = self.ask(make_pipeline, '{"answer": "George Westinghouse", "passage": 1}')
        assert result.short_answer == "Eli Janney" and "Westinghouse" not in result.answer
        g = result.grounding
        assert (g["status"], g["source"], g["proposed"], g["model_answer_ungrounded"]) == (
            "grounded",
            "extractive",
            "George Westinghouse",
            True,
        )

    def test_a_grounded_part_of_the_answer_is_kept(self, make_pipeline):
        result = self.ask(make_pipeline, '{"answer": "1. Eli Janney (inventor) - a Westinghouse rival", "passage": 1}')
        assert result.short_answer == "Eli Janney"
        assert result.grounding["how"] == "a part of the answer occurs in a cited passage"

    def test_ungrounded_answer_shows_the_evidence_when_configured(self, make_pipeline):
        result = self.ask(
            make_pipeline, '{"answer": "George Westinghouse", "passage": 1}', "answer.ungrounded=evidence"
        )
        assert result.short_answer == "" and not result.abstained
        g = result.grounding
        assert (g["status"], g["shown"], g["proposed"]) == ("ungrounded", "evidence", "George Westinghouse")
        assert result.answer == result.evidence and "Westinghouse" not in result.answer

    def test_ungrounded_answer_abstains_when_configured(self, make_pipeline):
        result = self.ask(make_pipeline, '{"answer": "George Westinghouse", "passage": 1}', "answer.ungrounded=abstain")
        assert result.abstained and result.short_answer == ""
        assert result.grounding["status"] == "ungrounded" and result.grounding["shown"] == "abstention"

    def test_not_found_after_a_correct_check_gets_the_extractive_answer(self, make_pipeline):
        result = self.ask(make_pipeline, '{"answer": "NOT FOUND", "passage": 0}')
        assert result.short_answer == "Eli Janney" and not result.abstained
        g = result.grounding
        assert (g["status"], g["source"], g["model_found_no_answer"]) == ("grounded", "extractive", True)

    @pytest.mark.parametrize(
        "overrides",
        [("grade.thresholds.correct=0.99", "answer.fallback_coverage=1.01"), ("answer.ungrounded=abstain",)],
    )
    def test_not_found_abstains_when_the_check_is_unsure_or_so_configured(self, make_pipeline, overrides):
        result = self.ask(make_pipeline, '{"answer": "NOT FOUND", "passage": 0}', *overrides)
        assert result.abstained and result.grounding["status"] == "abstained"

    def test_not_found_after_an_ambiguous_check_gets_the_extractive_answer_when_a_passage_holds_the_question(
        self, make_pipeline
    ):
        # "correct" out of reach, so the verdict is ambiguous; the kept passage holds the question's words
        result = self.ask(make_pipeline, '{"answer": "NOT FOUND", "passage": 0}', "grade.thresholds.correct=0.99")
        verdicts = [step.output["verdict"] for step in result.trace if step.node == "grade"]
        assert verdicts == ["ambiguous"]
        assert result.short_answer == "Eli Janney" and not result.abstained
        assert result.grounding["model_found_no_answer"] is True

    def test_the_token_stream_carries_the_verified_answer(self, make_pipeline):
        from tests.nodes.scripted import scripted_llm

        llm, _ = scripted_llm(
            rewrite='{"query": "knuckle coupler patent"}', answer='{"answer": "Eli Janney", "passage": 1}'
        )
        events = list(make_pipeline(llm=llm, answer_format="short").stream(self.QUESTION))
        tokens = "".join(e.text for e in events if e.event == "token")
        assert tokens == events[-1].result.answer

    def test_no_llm_pipeline_extracts_a_span(self, make_pipeline):
        from switchyard.configs.loader import resolve_config_path

        result = make_pipeline(config_file=resolve_config_path("no-llm"), answer_format="short").ask(self.QUESTION)
        assert result.short_answer == "Eli Janney" and result.grounding["source"] == "extractive"

    def test_sentences_format_has_no_short_answer(self, make_pipeline):
        from tests.nodes.scripted import scripted_llm

        llm, _ = scripted_llm(
            rewrite='{"query": "knuckle coupler patent"}', answer="Eli Janney patented the knuckle coupler in 1873 [1]."
        )
        result = make_pipeline(llm=llm).ask(self.QUESTION)
        assert result.short_answer == "" and result.evidence == "" and result.grounding == {}
        assert "Eli Janney" in result.answer
