import pytest

from switchyard.evaluation.metrics import (
    answer_scores,
    citation_precision,
    gold_recall,
    normalize_answer,
    set_prf,
    split_items,
    token_f1,
)


class TestNormalisation:
    def test_squad_rules_and_citations(self):
        assert normalize_answer("The  Eiffel-Tower, [1] in an old  Paris!") == "eiffeltower in old paris"
        assert normalize_answer("") == ""


class TestSingleAnswers:
    def test_exact_match_needs_equality(self):
        s = answer_scores("Eli Janney [1].", ["Eli H. Janney", "Janney"])
        assert s["exact_match"] == 0.0 and answer_scores("eli janney", ["Eli Janney."])["exact_match"] == 1.0
        # F1 against "Eli H Janney": common 2, P 2/2, R 2/3 -> 0.8; against "Janney": P 1/2, R 1 -> 0.667
        assert s["f1"] == pytest.approx(0.8)
        assert s["contains"] == 1.0

    def test_contains_needs_whole_words(self):
        assert answer_scores("I do not know.", ["no"])["contains"] == 0.0
        assert answer_scores("No, they were not [2].", ["no"])["contains"] == 1.0
        assert answer_scores("Annabel Lee", ["Anna"])["contains"] == 0.0
        assert answer_scores("Friends: Annabel Lee and Anna.", ["Anna", "Bo"], is_list=True)["contains"] == 0.5

    def test_token_f1_counts_repeats(self):
        assert token_f1("a cat cat", "cat") == pytest.approx(2 * (1 / 2) * 1 / (1 / 2 + 1))

    def test_empty_prediction(self):
        s = answer_scores("", ["October 1922"])
        assert s == {"exact_match": 0.0, "f1": 0.0, "contains": 0.0}

    def test_no_gold_is_an_error(self):
        with pytest.raises(ValueError):
            answer_scores("x", [" "])


class TestListAnswers:
    def test_items_split_and_scored_as_a_set(self):
        golds = ["Carly Gauthier", "Clinton Pollard", "Minerva Pollard"]
        assert split_items("Carly Gauthier, Clinton Pollard and Bob [1]") == {
            "carly gauthier",
            "clinton pollard",
            "bob",
        }
        p, r, f = set_prf("Carly Gauthier, Clinton Pollard and Bob", golds)
        assert (p, r) == (pytest.approx(2 / 3), pytest.approx(2 / 3)) and f == pytest.approx(2 / 3)
        s = answer_scores("Carly Gauthier, Clinton Pollard and Bob", golds, is_list=True)
        assert s["exact_match"] == 0.0 and s["contains"] == pytest.approx(2 / 3)

    def test_exact_set(self):
        s = answer_scores("Minerva Pollard; Clinton Pollard", ["Clinton Pollard", "Minerva Pollard"], is_list=True)
        assert s["exact_match"] == 1.0 and s["f1"] == 1.0

    def test_single_item_list_when_forced(self):
        assert answer_scores("Bob and Ann", ["Ann"], is_list=True)["f1"] == pytest.approx(2 / 3)


class TestGrounding:
    def test_gold_recall_and_citation_precision(self):
        assert gold_recall(["a", "b", "c"], ["a", "z"]) == 0.5
        assert gold_recall(["a"], []) is None
        assert citation_precision(["a", "b", "a"], ["a"]) == pytest.approx(2 / 3)
        assert citation_precision([], ["a"]) is None
