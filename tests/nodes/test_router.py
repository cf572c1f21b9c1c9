import pytest

from switchyard.nodes.router import fixed_next, is_repeat


class TestFixedNext:
    @pytest.mark.parametrize(
        "state, expected",
        [
            ({}, "rewrite"),
            ({"last_action": "rewrite"}, "retrieve"),
            ({"last_action": "retrieve"}, "rerank"),
            ({"last_action": "rerank"}, "grade"),
            ({"last_action": "grade", "verdict": "correct", "graded": [{}]}, "answer"),
            ({"last_action": "grade", "verdict": "incorrect", "attempts": 1}, "rewrite"),
            ({"last_action": "grade", "verdict": "incorrect", "attempts": 2}, "abstain"),
        ],
    )
    def test_follows_the_fixed_edges(self, state, expected):
        assert fixed_next(state, max_retries=1) == expected


class TestIsRepeat:
    def test_same_query_twice(self):
        assert is_repeat("retrieve", {"query": "x"}, [("retrieve", {"query": "x"})])
        assert not is_repeat("retrieve", {"query": "y"}, [("retrieve", {"query": "x"})])

    def test_rerank_and_grade_repeat_only_without_new_input(self):
        assert is_repeat("rerank", {}, [("retrieve", {"query": "x"}), ("rerank", {})])
        assert not is_repeat("rerank", {}, [("rerank", {}), ("retrieve", {"query": "y"})])
        assert is_repeat("grade", {}, [("rerank", {}), ("grade", {})])
        assert not is_repeat("grade", {}, [("grade", {}), ("rerank", {})])

    def test_rewrite_without_query_repeats_until_a_new_grade(self):
        assert is_repeat("rewrite", {}, [("rewrite", {})])
        assert not is_repeat("rewrite", {}, [("rewrite", {}), ("grade", {})])

    def test_terminal_actions_never_repeat(self):
        assert not is_repeat("answer", {}, [("answer", {})])
