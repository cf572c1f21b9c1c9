"""bench/reranker_data.py: the cross-encoder's training-data rules (issue 61) on small fixtures — the stable
train/tune halves, the held-out check (no test-split or tune query is trained on), SQuAD's non-first paragraphs,
hard-negative selection, pairs and the seeded batch order. The training itself is not run here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("reranker_data", ROOT / "bench" / "reranker_data.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["reranker_data"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


rd = _load()


def test_tune_half_is_a_stable_function_of_the_id_and_cuts_about_half():
    ids = [str(i) for i in range(2000)]
    first = [rd.tune_half(q) for q in ids]
    assert first == [rd.tune_half(q) for q in ids]
    assert 900 < sum(first) < 1100
    # pinned: a change of the rule (salt, hash, bit) would silently move queries between train and tune
    assert "".join("1" if rd.tune_half(str(q)) else "0" for q in range(32)) == PINNED


PINNED = "11111101001100001111101101111100"


def test_split_dev_partitions_the_qrels_by_the_rule():
    qrels = {str(i): {f"d{i}": 1.0} for i in range(300)}
    train, tune = rd.split_dev(qrels)
    assert set(train) | set(tune) == set(qrels)
    assert not set(train) & set(tune)
    assert all(rd.tune_half(q) for q in tune) and not any(rd.tune_half(q) for q in train)
    assert all(rel == qrels[q] for half in (train, tune) for q, rel in half.items())


def test_held_out_queries_are_dropped_by_id_and_by_normalised_text_within_their_namespace():
    held = rd.HeldOut()
    held.add("scifact", {"7": "Aspirin lowers risk.", "8": "Statins help."})
    held.add("phantomwiki", {"3": "Who is the father of Ann?"})
    train = {
        "7": "something else",  # same id as a held-out SciFact query
        "9": "  who IS the father\nof ann? ",  # a held-out text, other case and spacing
        "3": "A scifact claim",  # id 3 is held out in phantomwiki only: kept in scifact
        "10": "A new claim",
    }
    kept, dropped = rd.drop_held_out("scifact", train, held)
    assert kept == {"3": "A scifact claim", "10": "A new claim"}
    assert dropped == ["7", "9"]
    rd.assert_disjoint("scifact", kept, held)
    with pytest.raises(AssertionError, match="scifact:7"):
        rd.assert_disjoint("scifact", train, held)
    with pytest.raises(AssertionError, match="held-out query"):
        rd.assert_disjoint("scifact", {"11": "statins HELP."}, held)


def _squad():
    def para(article: int, index: int, n: int) -> dict:
        return {
            "context": f"Paragraph {index} of article {article} mentions answer{article}{index}.",
            "qas": [
                {
                    "id": f"q{article}-{index}-{k}",
                    "question": f"Question {k} on {article}/{index}?",
                    "answers": [{"text": f"answer{article}{index}", "answer_start": 0}],
                }
                for k in range(n)
            ],
        }

    return {"data": [{"title": f"Article_{a}", "paragraphs": [para(a, i, 2) for i in range(4)]} for a in range(5)]}


def test_squad_training_set_never_takes_a_first_paragraph_question():
    squad = _squad()
    first = rd.squad_questions(squad, first_paragraph_only=True)
    corpus, queries, qrels, answers = rd.squad_training_set(squad, max_paragraphs=None)
    assert len(corpus) == 5 * 3 and len(queries) == 5 * 3  # paragraphs 1..3 of 5 articles, one question each
    assert not set(queries) & set(first)
    assert all(not d["_id"].endswith("#0") for d in corpus)
    for qid, rel in qrels.items():
        (doc_id,) = rel
        article, index = qid[1:].split("-")[:2]
        assert doc_id == f"squad-train:Article {article}#{index}"
        assert answers[qid] == [f"answer{article}{index}"]
    assert len(rd.squad_questions(squad)) == 5 * 4 * 2


def test_squad_training_set_is_stable_and_capped():
    squad = _squad()
    a = rd.squad_training_set(squad, max_paragraphs=4, per_paragraph=2)
    b = rd.squad_training_set(squad, max_paragraphs=4, per_paragraph=2)
    assert a == b
    corpus, queries, _, _ = a
    assert len(corpus) == 4 and len(queries) == 8
    # the cap takes paragraphs across articles (salted hash order), not the first article's
    assert len({d["_id"].split("#")[0] for d in corpus}) > 1


def test_select_negatives_skips_relevant_docs_answer_holders_and_repeats():
    C = rd.Candidate
    ranked = [
        C("gold", "the relevant passage"),
        C("a", "Paris is the capital"),  # holds the answer as a whole word: a likely unlabelled positive
        C("b", "Parisian cafes"),  # the answer only inside a word: a fine negative
        C("b", "second chunk of b"),  # one negative per document
        C("c", "unrelated"),
        C("d", "yes, also unrelated"),  # yes/no answers are never matched
        C("e", "beyond n"),
    ]
    got = rd.select_negatives(ranked, ["gold"], n=3, answers=["paris", "yes"])
    assert [c.doc_id for c in got] == ["b", "c", "d"]
    assert got[0].text == "Parisian cafes"
    assert rd.select_negatives(ranked, ["gold"], n=0) == []


def test_build_pairs_labels_positives_and_negatives_and_skips_queries_without_contrast():
    negs = [rd.Candidate("x", "neg one"), rd.Candidate("y", "neg two")]
    pairs = rd.build_pairs("hotpotqa", "q1", "who?", ["pos one", "pos two", "pos three"], negs)
    assert [(p.passage, p.label) for p in pairs] == [
        ("pos one", 1.0),
        ("pos two", 1.0),
        ("neg one", 0.0),
        ("neg two", 0.0),
    ]
    assert {(p.source, p.qid, p.query) for p in pairs} == {("hotpotqa", "q1", "who?")}
    assert rd.build_pairs("s", "q", "who?", [], negs) == []
    assert rd.build_pairs("s", "q", "who?", ["pos"], []) == []


def test_batch_order_is_seeded_and_covers_every_pair_once_per_epoch():
    pairs = [rd.Pair(f"q{i}", "p" * (i % 37), float(i % 2), "s", str(i)) for i in range(1000)]
    a = rd.batch_order(pairs, batch_size=16, epochs=2, seed=0)
    assert a == rd.batch_order(pairs, batch_size=16, epochs=2, seed=0)
    assert a != rd.batch_order(pairs, batch_size=16, epochs=2, seed=1)
    per_epoch = len(a) // 2
    for epoch in (a[:per_epoch], a[per_epoch:]):
        flat = [p.qid for batch in epoch for p in batch]
        assert sorted(flat) == sorted(p.qid for p in pairs)
    # length-sorted within windows: a batch spans far fewer lengths than a random draw of 16
    spans = [max(len(p.passage) for p in b) - min(len(p.passage) for p in b) for b in a if len(b) == 16]
    assert sum(spans) / len(spans) < 10
