import math

import pytest

from switchyard.evaluation.ranking import dedupe, mrr_at_k, ndcg_at_k, percentile, recall_at_k, score_query


class TestMetrics:
    def test_ndcg_by_hand(self):
        # relevant docs a (rel 1) and b (rel 1); ranking puts b at rank 2, a at rank 4
        got = ndcg_at_k(["x", "b", "y", "a"], {"a": 1, "b": 1}, k=10)
        ideal = 1 + 1 / math.log2(3)
        assert got == pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / ideal)

    def test_ndcg_perfect_and_empty(self):
        assert ndcg_at_k(["a", "b"], {"a": 1, "b": 1}) == pytest.approx(1.0)
        assert ndcg_at_k([], {"a": 1}) == 0.0
        assert ndcg_at_k(["a"], {}) == 0.0

    def test_ndcg_cut_at_k(self):
        assert ndcg_at_k(["x", "a"], {"a": 1}, k=1) == 0.0

    def test_graded_relevance(self):
        # ideal order is b (2) then a (1)
        got = ndcg_at_k(["a", "b"], {"a": 1, "b": 2}, k=10)
        assert got == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))

    def test_recall_and_mrr(self):
        ranking = ["x", "a", "y", "b"]
        qrels = {"a": 1, "b": 1, "c": 1}
        assert recall_at_k(ranking, qrels, 1) == 0.0
        assert recall_at_k(ranking, qrels, 2) == pytest.approx(1 / 3)
        assert recall_at_k(ranking, qrels, 10) == pytest.approx(2 / 3)
        assert mrr_at_k(ranking, qrels, 10) == pytest.approx(0.5)
        assert mrr_at_k(ranking, qrels, 1) == 0.0

    def test_score_query_has_every_metric(self):
        assert set(score_query(["a"], {"a": 1})) == {
            "ndcg@10",
            "recall@1",
            "recall@5",
            "recall@10",
            "recall@100",
            "mrr@10",
        }

    def test_dedupe_keeps_best_chunk_rank(self):
        assert dedupe(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]

    def test_percentile_interpolates(self):
        assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
        assert percentile([5], 95) == 5
        assert math.isnan(percentile([], 50))
