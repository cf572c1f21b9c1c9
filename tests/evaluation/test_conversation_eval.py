"""Conversations in `cli.py eval`: MTRAG's folder as it is and the plain JSONL with `history` load as turns (each
asked after the dataset's own earlier turns); rows carry the turn, the standalone question and the turn's retrieval
against its gold passages; an unanswerable turn is right when refused; the report groups by turn kind, type and
position. The fixture: three three-turn conversations over the sample corpus (tests/fixtures/conversations)."""

import json

import pytest

from switchyard.errors import DatasetError
from switchyard.evaluation.compare import run_evaluation
from switchyard.evaluation.datasets import load_dataset
from switchyard.evaluation.rows import EvalRow
from tests.conftest import FIXTURES, ROOT

CONVERSATIONS = FIXTURES / "conversations"
BASELINES = ROOT / "bench" / "conversation"
NO_LLM = ["rewrite.method=prf", "answer.method=extractive", "grade.method=score"]


def test_both_forms_load_the_same_turns():
    plain = load_dataset(CONVERSATIONS / "turns.jsonl", corpus=CONVERSATIONS / "corpus.jsonl")
    mtrag = load_dataset(CONVERSATIONS / "mtrag")
    assert len(plain.questions) == len(mtrag.questions) == 9
    for p, m in zip(plain.questions, mtrag.questions):
        assert (p.question, p.turn, p.rewrite, p.gold_doc_ids) == (m.question, m.turn, m.rewrite, m.gold_doc_ids)
        assert [h["content"] for h in p.history] == [h["content"] for h in m.history]
        assert p.difficulty == m.difficulty and p.difficulty in ("first", "follow-up")
    second = plain.questions[1]
    assert second.question == "What year was that?" and second.turn == 2
    assert [h["role"] for h in second.history] == ["user", "assistant"]
    assert mtrag.corpus == [CONVERSATIONS / "mtrag" / "passages.jsonl"]
    unanswerable = [q for q in mtrag.questions if q.type == "unanswerable"]
    assert [q.id for q in unanswerable] == ["c2<::>3"] and unanswerable[0].answers == []


@pytest.mark.parametrize(
    "history, message",
    [
        ([{"role": "wizard", "content": "hi"}], "unknown role 'wizard'"),
        ("Who patented it?", "history must be a list of messages"),
        ([{"role": "user", "content": "  "}], "is empty"),
    ],
)
def test_a_turn_whose_history_does_not_parse_is_refused_with_its_line(tmp_path, history, message):
    bad = tmp_path / "turns.jsonl"
    bad.write_text(json.dumps({"id": "x", "question": "And then?", "answers": ["a"], "history": history}) + "\n")
    with pytest.raises(DatasetError, match=rf"turns.jsonl:1: .*{message}"):
        load_dataset(bad, corpus=CONVERSATIONS / "corpus.jsonl")


def test_an_unanswerable_turn_is_right_when_refused():
    base = {"config": "c", "run": 0, "id": "t", "type": "unanswerable", "turn": 3, "gold_doc_ids": []}
    refused = EvalRow(**base, prediction="Not found.", abstained=True).rescored()
    answered = EvalRow(**base, prediction="In 1850.", abstained=False).rescored()
    assert (refused.f1, refused.contains) == (1.0, 1.0) and (answered.f1, answered.contains) == (0.0, 0.0)
    assert refused.recall_at_5 is None  # no gold passages: no retrieval score


def test_a_turn_is_scored_on_its_gold_passages():
    row = EvalRow(
        config="c", run=0, id="t", turn=2, answers=["1873"], prediction="1873",
        gold_doc_ids=["couplers", "gauge"], retrieved_doc_ids=["yards", "couplers", "a", "b", "c", "gauge"],
    ).rescored()  # fmt: skip
    assert row.recall_at_5 == 0.5 and 0 < row.ndcg_at_10 < 1
    alone = EvalRow(config="c", run=0, id="q", answers=["x"], prediction="x", gold_doc_ids=["a"]).rescored()
    assert alone.recall_at_5 is None and "recall_at_5" not in alone.to_json()  # a question alone: as before


@pytest.mark.slow
def test_the_floor_the_history_step_and_the_ceiling_on_the_same_turns(tmp_path):
    configs = [BASELINES / "last.yaml", BASELINES / "terms.yaml", BASELINES / "rewrite.yaml"]
    done = run_evaluation(
        CONVERSATIONS / "mtrag", configs, tmp_path / "out", overrides=NO_LLM, baseline="last", progress=False
    )
    rows = {(r["config"], r["id"]): r for r in map(json.loads, done.results.read_text().splitlines())}
    assert len(rows) == 27
    follow_up = "c1<::>2"  # "What year was that?" after the knuckle coupler's patent
    assert rows[("last", follow_up)]["abstained"] and "standalone" not in rows[("last", follow_up)]
    assert rows[("terms", follow_up)]["prediction"] == "1873"
    assert "knuckle coupler" in rows[("terms", follow_up)]["standalone"]
    assert rows[("rewrite", follow_up)]["standalone"] == "What year was the knuckle coupler patented?"
    assert rows[("terms", follow_up)]["turn"] == 2 and rows[("terms", follow_up)]["history_messages"] == 2
    first = rows[("terms", "c1<::>1")]
    assert "standalone" not in first and first["recall_at_5"] == 1.0  # a first turn runs as a question alone
    report = done.report
    assert set(report["by_difficulty"]) == {"first", "follow-up"} and list(report["by_turn"]) == ["1", "2", "3"]
    assert report["by_difficulty"]["follow-up"]["terms"]["n"] == 6
    assert "recall_at_5" in report["configs"]["terms"]["ci95"]
    assert "recall_at_5" in {m for c in report["paired"].values() for m in c}
    assert "## F1 / contains / recall@5 / refused by turn" in done.report_md.read_text()
