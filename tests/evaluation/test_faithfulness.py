"""LLM-judged faithfulness: per-sentence verdicts against cited passages, resumable judging, report wiring."""

import json

import pytest

from switchyard.evaluation.faithfulness import FaithfulnessJudge, attach_judgements, judge_name
from switchyard.evaluation.rows import EvalRow
from switchyard.llm.client import LLM
from tests.scripted_backend import ScriptedBackend

PASSAGES = [
    {"n": 1, "doc_id": "a", "text": "Eli Janney patented the knuckle coupler in 1873."},
    {"n": 2, "doc_id": "b", "text": "Bailey Yard is in North Platte, Nebraska."},
]


def word_judge(messages, schema):
    """Supported when every word of the claim occurs in the passage; 'garble' in a claim gives a broken reply."""
    user = messages[1]["content"] if len(messages) > 1 else ""
    passage, claim = user.split("\nClaim: ")
    if "garble" in claim.lower():
        return "not json at all"
    words = {w.strip(".,").lower() for w in claim.split()}
    return json.dumps({"supported": words <= {w.strip(".,").lower() for w in passage.split()}})


def make_judge(replies=word_judge, name="scripted:test"):
    backend = ScriptedBackend(replies)
    return FaithfulnessJudge(LLM(backend, max_retries=0), name), backend


class TestFaithfulnessJudge:
    def test_each_sentence_against_its_cited_passages(self):
        judge, backend = make_judge()
        out = judge.run(
            "Eli Janney patented the knuckle coupler [1]. Bailey Yard is in Nebraska [1, 2]. It was painted blue.",
            PASSAGES,
        )
        assert [v["supported"] for v in out["verdicts"]] == [True, True, False]
        assert out["verdicts"][1]["cited"] == [1, 2] and out["verdicts"][2]["cited"] == []
        assert out["faithfulness"] == pytest.approx(2 / 3)
        # sentence 2 needed both passages (the first said no); the uncited sentence cost no call
        assert out["judge_calls"] == 3 == len(backend.calls)

    def test_citation_to_a_missing_passage_counts_as_uncited(self):
        judge, backend = make_judge()
        out = judge.run("Eli Janney patented the knuckle coupler [7].", PASSAGES)
        assert out["faithfulness"] == 0.0 and out["verdicts"][0]["cited"] == [] and not backend.calls

    def test_unparseable_verdict_is_left_unjudged(self):
        judge, _ = make_judge()
        out = judge.run("Eli Janney patented the knuckle coupler [1]. Garble it [1].", PASSAGES)
        assert out["verdicts"][1]["supported"] is None and out["judge_fallbacks"] == 1
        assert out["faithfulness"] == 1.0  # over the one judged sentence, not counted as a failure of the answer

    def test_empty_answer_has_nothing_to_judge(self):
        judge, backend = make_judge()
        out = judge.run("", PASSAGES)
        assert out["faithfulness"] is None and out["sentences"] == 0 and not backend.calls

    def test_validated_init(self):
        with pytest.raises(ValueError, match="name"):
            FaithfulnessJudge(LLM(ScriptedBackend(["{}"])), "")
        with pytest.raises(ValueError, match="max_passage_chars"):
            FaithfulnessJudge(LLM(ScriptedBackend(["{}"])), "j", max_passage_chars=10)


class TestJudgeResults:
    def rows(self):
        base = {"config": "fixed", "run": 0, "abstained": False, "error": None, "citations": PASSAGES}
        return [
            EvalRow(**{**base, "id": "q1", "prediction": "Eli Janney patented the knuckle coupler [1]."}),
            EvalRow(**{**base, "id": "q2", "prediction": "Bailey Yard is in Ohio [2]."}),
            EvalRow(**{**base, "id": "q3", "prediction": "", "abstained": True}),
            EvalRow(**{**base, "id": "q4", "prediction": "", "error": "LLMError: down"}),
        ]

    def test_judges_once_and_resumes(self, tmp_path):
        out = tmp_path / "judgements.jsonl"
        judge, backend = make_judge()
        got = judge.judge_results(self.rows()[:2], out)
        assert [j["faithfulness"] for j in got] == [1.0, 0.0] and len(backend.calls) == 2
        with out.open("a") as fh:  # killed mid-write
            fh.write('{"config": "fixed", "run": 0, "id": "q3", "ju')
        got = judge.judge_results(self.rows(), out)
        assert len(backend.calls) == 2  # q1, q2 not judged again; q3 abstained (no call); q4 errored (skipped)
        assert sorted(j["id"] for j in got) == ["q1", "q2", "q3"]
        assert next(j for j in got if j["id"] == "q3")["faithfulness"] is None

    def test_another_judge_judges_again_and_rows_get_its_verdicts(self, tmp_path):
        out = tmp_path / "judgements.jsonl"
        make_judge()[0].judge_results(self.rows()[:2], out)
        yes, backend = make_judge(lambda m, s: '{"supported": true}', name="scripted:lenient")
        got = yes.judge_results(self.rows()[:2], out)
        assert len(backend.calls) == 2 and all(j["faithfulness"] == 1.0 for j in got)
        merged = attach_judgements(self.rows(), got)
        assert [r.faithfulness for r in merged] == [1.0, 1.0, None, None]

    def test_judge_name_tracks_the_llm_settings(self):
        from switchyard.configs.loader import load_config

        a = load_config(None).llm
        b = load_config(None, ["llm.temperature=0.5"]).llm
        c = load_config(None, ["llm.backend=openai", "llm.model=qwen"]).llm
        assert judge_name(a).startswith("local:") and judge_name(a) != judge_name(b)
        assert judge_name(c).startswith("openai:qwen:")


class TestReportWithJudge:
    def test_faithfulness_row_only_when_judged(self):
        from switchyard.evaluation.report import aggregate, markdown

        row = {
            "config": "a",
            "run": 0,
            "id": "q1",
            "exact_match": 0.0,
            "f1": 0.0,
            "contains": 0.0,
            "abstained": False,
            "latency_ms": 1.0,
            "llm_calls": 1,
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "parse_fallbacks": 0,
            "guards": {},
            "error": None,
            "difficulty": "1",
            "type": "t",
        }
        assert "| faithfulness |" not in markdown(aggregate([EvalRow(**row)]), "t")
        judged = aggregate([EvalRow(**row, faithfulness=0.5, judge_fallbacks=0)])
        assert judged["configs"]["a"]["faithfulness"]["mean"] == 0.5
        assert "| faithfulness | 0.500" in markdown(judged, "t")
